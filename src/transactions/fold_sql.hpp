// fold_sql.hpp: the statement that folds committed deltas into key_values: the flusher's fold
// (workers/fold.cpp) in steps of pages, and a large commit's (large_commit.cpp) over every page.
#pragma once

// One transaction's deltas may touch a key that another's also touched: sum them per key. $1 the
// counters (int4[]), $2 and $3 a TID range of pages: a scan of those pages alone. The rows it
// writes are stamped (updated_at) with `stamp`, an expression: the flusher's transaction's start,
// or a large commit's time (attachments read the stamp: shmem.hpp).
#define SC_FOLD_SQL_STAMPED(stamp)                                                                \
  "WITH folded AS (DELETE FROM slotted_counter.deltas "                                           \
  "WHERE counter OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int4[]) "                             \
  "AND ctid OPERATOR(pg_catalog.>=) $2 AND ctid OPERATOR(pg_catalog.<) $3 "                       \
  "RETURNING counter, key, bucket, delta, written_at) "                                           \
  "INSERT INTO slotted_counter.key_values AS t "                                                  \
  "(counter, key, bucket, value, written_at, updated_at) "                                        \
  "SELECT counter, key, bucket, pg_catalog.sum(delta)::pg_catalog.int8, "                         \
  "pg_catalog.max(written_at), " stamp " FROM folded GROUP BY counter, key, bucket "              \
  "ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "                            \
  "SET value = t.value OPERATOR(pg_catalog.+) excluded.value, updated_at = excluded.updated_at, " \
  "written_at = GREATEST(t.written_at, excluded.written_at)"
#define SC_FOLD_SQL SC_FOLD_SQL_STAMPED("pg_catalog.now()")
