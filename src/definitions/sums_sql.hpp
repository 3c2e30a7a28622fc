// sums_sql.hpp: the statement that adds changes to slotted_counter.counter_totals, written once
// for the triggers on key_values (sums.cpp) and the flush's rows inserted below the executor
// (workers/flush_insert.cpp).
#pragma once

// The change of each (counter, bucket), from `rows` (SQL yielding counter, bucket and v, a
// numeric), summed and added in (counter, bucket) order: two transactions lock the sums they
// share in the same order. A change of 0 leaves the row as it is.
#define SC_ADD_TO_SUMS(rows)                                                                      \
  "INSERT INTO slotted_counter.counter_totals AS s (counter, bucket, value) "                     \
  "SELECT counter, bucket, pg_catalog.sum(v) FROM (" rows ") c GROUP BY counter, bucket "         \
  "HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 ORDER BY counter, bucket "                  \
  "ON CONFLICT ON CONSTRAINT counter_totals_pkey DO UPDATE "                                      \
  "SET value = s.value OPERATOR(pg_catalog.+) excluded.value"
