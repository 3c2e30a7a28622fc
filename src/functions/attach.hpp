// attach.hpp: attachments, lagged totals written into users' own tables (attach.cpp: sc_attach
// and sc_detach; attach_run.cpp: the attacher that runs them).
#pragma once

#include "shared/shmem.hpp"

extern "C" {
PGDLLEXPORT void slotted_counter_attacher_main(Datum arg);
}

// When an attachment's next run is due, in SQL over a row of slotted_counter.attachments
// (unqualified columns): its interval after its last attempt, and for one that failed three times
// or more in a row, at least a minute after, doubled with each further failure up to an hour. A
// run that keeps failing (a dropped role, a table restored under another owner) is so tried, and
// logged, about once an hour instead of at every flush; the first success ends the backoff.
#define SC_ATTACHMENT_DUE_AT                                                                   \
  "(COALESCE(last_attempt, '-infinity'::pg_catalog.timestamptz) OPERATOR(pg_catalog.+) "      \
  "GREATEST(every, CASE WHEN failures OPERATOR(pg_catalog.<) 3 THEN '0'::pg_catalog.interval " \
  "ELSE LEAST('1 hour'::pg_catalog.interval, '1 minute'::pg_catalog.interval "                \
  "OPERATOR(pg_catalog.*) pg_catalog.power(2, LEAST(failures OPERATOR(pg_catalog.-) 3, 6))) "  \
  "END))"
