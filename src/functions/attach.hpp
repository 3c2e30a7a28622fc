// attach.hpp: attachments, lagged totals written into users' own tables (attach.cpp: sc_attach
// and sc_detach; attach_run.cpp: the attacher that runs them).
#pragma once

#include "shared/shmem.hpp"

extern "C" {
PGDLLEXPORT void slotted_counter_attacher_main(Datum arg);
}

namespace sc {

// Deletes the attachments whose target is one of the tables this transaction dropped, as part of
// it (a dropped table takes its attachments along, as it takes its triggers). At pre-commit.
void DetachDroppedTargets(const Oid* relids, int n);

}  // namespace sc
