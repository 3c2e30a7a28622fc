// sketch_rows.cpp: the rows of slotted_counter.key_sketches (sketch_rows.hpp): the stored
// sketches that loads and reads union, and the writes of flushes and commits, with their
// key_values rows.
#include "definitions/sketch_rows.hpp"

#include "definitions/expiry.hpp"

#include "spi.hpp"

namespace sc {

namespace {

// [deltas][live]: the stored sketches of a buffered counter's keys (key_sketches), or of a
// transactional one's (with its unfolded sketch_deltas); live: of the keys that have not expired
// (an unbucketed counter with a retention: the key's last write, its row's written_at, after the
// cutoff, the last parameter; or a commit not folded yet, which is newer). For one key, a group,
// every key, every key of a range that leaves out -infinity (an unbucketed key's: by the index of
// buckets).
SPIPlanPtr plan_key[2][2] = {};
SPIPlanPtr plan_keys[2][2] = {};
SPIPlanPtr plan_all[2][2] = {};
SPIPlanPtr plan_all_buckets[2][2] = {};

#define SC_SKETCHES_OF(table, keys, live)                                                         \
  "SELECT s.sketch FROM slotted_counter." table " s WHERE s.counter OPERATOR(pg_catalog.=) $1 "  \
  "AND s.bucket OPERATOR(pg_catalog.>=) $2 AND s.bucket OPERATOR(pg_catalog.<) $3" keys live
// A stored sketch is live if its key was written after the cutoff, or if a commit not folded yet
// came within the retention (the interval, the parameter after the cutoff) of that write; a
// commit not folded yet, if it came after the cutoff.
#define SC_LIVE(cutoff, retain)                                                                   \
  " AND EXISTS (SELECT FROM slotted_counter.key_values v "                                        \
  "WHERE v.counter OPERATOR(pg_catalog.=) s.counter AND v.key OPERATOR(pg_catalog.=) s.key "      \
  "AND v.bucket OPERATOR(pg_catalog.=) s.bucket AND (v.written_at OPERATOR(pg_catalog.>) "         \
  cutoff " OR EXISTS (SELECT FROM slotted_counter.sketch_deltas d "                               \
  "WHERE d.counter OPERATOR(pg_catalog.=) s.counter AND d.key OPERATOR(pg_catalog.=) s.key "      \
  "AND d.bucket OPERATOR(pg_catalog.=) s.bucket AND d.written_at OPERATOR(pg_catalog.<) "         \
  "pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', v.written_at) OPERATOR(pg_catalog.+) "   \
  retain "))))"
#define SC_DELTA_LIVE(cutoff) " AND s.written_at OPERATOR(pg_catalog.>) " cutoff
#define SC_SKETCH_ROWS_LIVE(keys, live, delta_live)                                               \
  {SC_SKETCHES_OF("key_sketches", keys, live),                                                    \
   SC_SKETCHES_OF("key_sketches", keys, live) " UNION ALL "                                       \
       SC_SKETCHES_OF("sketch_deltas", keys, delta_live)}
#define SC_SKETCH_ROWS(keys, cutoff, retain)                                                      \
  { SC_SKETCH_ROWS_LIVE(keys, "", ""),                                                            \
    SC_SKETCH_ROWS_LIVE(keys, SC_LIVE(cutoff, retain), SC_DELTA_LIVE(cutoff)) }
// Indexed [live][deltas], as SC_SKETCH_ROWS gives them.
const char* const kAllSql[2][2] = SC_SKETCH_ROWS("", "$4", "$5");
const char* const kAllBucketsSql[2][2] =
    SC_SKETCH_ROWS(" AND s.bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET, "$4", "$5");
const char* const kKeySql[2][2] =
    SC_SKETCH_ROWS(" AND s.key OPERATOR(pg_catalog.=) $4", "$5", "$6");
const char* const kKeysSql[2][2] =
    SC_SKETCH_ROWS(" AND s.key OPERATOR(pg_catalog.=) ANY ($4::pg_catalog.int8[])", "$5", "$6");

SPIPlanPtr plan_fold_expired = nullptr;
SPIPlanPtr plan_insert_deltas = nullptr;
SPIPlanPtr plan_fold = nullptr;
SPIPlanPtr plan_write = nullptr;

}  // namespace

void UnionSketchBytes(const CounterDef& def, const bytea* stored, SketchSet* out) {
  auto* registers = static_cast<uint8*>(palloc(kSketchDataBytes));
  HllRead read;
  if (!HllReadStored(reinterpret_cast<const uint8*>(VARDATA_ANY(stored)),
                     VARSIZE_ANY_EXHDR(stored), registers, kSketchDataBytes, &read) ||
      !SketchSetUnionStored(*out, read, registers))
    ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                    errmsg("a sketch of counter \"%s\" in slotted_counter.key_sketches is not "
                           "one of its precision",
                           def.name)));
  pfree(registers);
}

void UnionStoredSketches(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                         int64 until, bool committed_only, SketchSet* out) {
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  if (committed_only) snapshot->curcid = FirstCommandId;
  SpiSession spi = ConnectSpi();
  Datum args[6] = {Int32GetDatum(def.id), TimestampTzGetDatum(since), TimestampTzGetDatum(until),
                   0, 0, 0};
  int deltas = def.durability == Durability::kTransactional ? 1 : 0;
  // live: the key's cutoff and retention follow the other arguments (2 more).
  int live = KeysExpire(def) ? 1 : 0;
  Datum cutoff = TimestampTzGetDatum(live ? KeyCutoff(def) : 0);
  Datum retain = live ? PointerGetDatum(&def.retain) : (Datum)0;
  SPIPlanPtr plan;
  if (keys == nullptr) {
    static const Oid types[5] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
                                 INTERVALOID};
    args[3] = cutoff;
    args[4] = retain;
    plan = since != DT_NOBEGIN ? KeptPlan(&plan_all_buckets[deltas][live],
                                          kAllBucketsSql[live][deltas], 3 + 2 * live, types)
                               : KeptPlan(&plan_all[deltas][live], kAllSql[live][deltas],
                                          3 + 2 * live, types);
  } else if (nkeys == 1) {
    static const Oid types[6] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID,
                                 TIMESTAMPTZOID, INTERVALOID};
    args[3] = Int64GetDatum(keys[0]);
    args[4] = cutoff;
    args[5] = retain;
    plan = KeptPlan(&plan_key[deltas][live], kKeySql[live][deltas], 4 + 2 * live, types);
  } else {
    static const Oid types[6] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8ARRAYOID,
                                 TIMESTAMPTZOID, INTERVALOID};
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nkeys + 1)));
    for (int i = 0; i < nkeys; i++) datums[i] = Int64GetDatum(keys[i]);
    args[3] = PointerGetDatum(construct_array(datums, nkeys, INT8OID, 8, true, TYPALIGN_DOUBLE));
    args[4] = cutoff;
    args[5] = retain;
    plan = KeptPlan(&plan_keys[deltas][live], kKeysSql[live][deltas], 4 + 2 * live, types);
  }
  int rc = SPI_execute_snapshot(plan, args, nullptr, snapshot, InvalidSnapshot, true, false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_sketches failed: %d", rc);
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) continue;
    bytea* stored = DatumGetByteaPP(d);
    UnionSketchBytes(def, stored, out);
  }
  FinishSpi(spi);
  UnregisterSnapshot(snapshot);
}

namespace {

// The arrays of rows' columns, as the statements unnest them; `counts` left out when null.
void RowArrays(const SketchRow* rows, int n, Datum* args) {
  auto* counters = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* keys = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* buckets = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* sketches = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; i++) {
    counters[i] = Int32GetDatum(rows[i].counter);
    keys[i] = Int64GetDatum(rows[i].key);
    buckets[i] = TimestampTzGetDatum(rows[i].bucket);
    sketches[i] = PointerGetDatum(rows[i].sketch);
  }
  args[0] = PointerGetDatum(construct_array(counters, n, INT4OID, 4, true, TYPALIGN_INT));
  args[1] = PointerGetDatum(construct_array(keys, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
  args[2] = PointerGetDatum(construct_array(buckets, n, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE));
  args[3] = PointerGetDatum(construct_array(sketches, n, BYTEAOID, -1, false, TYPALIGN_INT));
}

}  // namespace

void WriteSketchRows(const SketchRow* rows, int n) {
  if (n == 0) return;
  auto* counts = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* written = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; i++) {
    counts[i] = Int64GetDatum(rows[i].count);
    written[i] = TimestampTzGetDatum(rows[i].written_at);
  }
  Datum arrays[4];
  RowArrays(rows, n, arrays);
  Datum args[6] = {
      arrays[0], arrays[1], arrays[2],
      PointerGetDatum(construct_array(counts, n, INT8OID, 8, true, TYPALIGN_DOUBLE)), arrays[3],
      PointerGetDatum(construct_array(written, n, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE))};
  static const Oid types[6] = {INT4ARRAYOID, INT8ARRAYOID,  TIMESTAMPTZARRAYOID,
                               INT8ARRAYOID, BYTEAARRAYOID, TIMESTAMPTZARRAYOID};
  // The key_values row first (its triggers keep the sums and the filter of stored keys), then
  // the sketch, each an upsert. The buffer's sketch holds the stored one (loaded from it, and
  // only the flusher writes a buffered counter's rows), but for a key whose expiry emptied it:
  // it replaces the stored one, so that an expired key's elements do not come back.
  SPIPlanPtr plan = KeptPlan(
      &plan_write,
      "WITH v AS (INSERT INTO slotted_counter.key_values AS t "
      "(counter, key, bucket, value, written_at) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($4), pg_catalog.unnest($6) "
      "ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "
      "SET value = excluded.value, updated_at = pg_catalog.now(), "
      "written_at = GREATEST(t.written_at, excluded.written_at)) "
      "INSERT INTO slotted_counter.key_sketches AS s (counter, key, bucket, sketch) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($5) ON CONFLICT ON CONSTRAINT key_sketches_pkey DO UPDATE "
      "SET sketch = excluded.sketch",
      6, types, PlanChoice::kCustom);
  if (SPI_execute_plan(plan, args, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.key_sketches failed");
}

void InsertSketchDeltas(const SketchRow* rows, int n) {
  if (n == 0) return;
  Datum args[4];
  RowArrays(rows, n, args);
  static const Oid types[4] = {INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, BYTEAARRAYOID};
  SPIPlanPtr plan = KeptPlan(
      &plan_insert_deltas,
      "INSERT INTO slotted_counter.sketch_deltas (counter, key, bucket, sketch, written_at) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($4), pg_catalog.clock_timestamp()",
      4, types, PlanChoice::kCustom);
  if (SPI_execute_plan(plan, args, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.sketch_deltas failed");
}

int64 FoldSketchDeltas(const int32* ids, int nids) {
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nids + 1)));
  for (int i = 0; i < nids; i++) datums[i] = Int32GetDatum(ids[i]);
  Datum arg = PointerGetDatum(construct_array(datums, nids, INT4OID, 4, true, TYPALIGN_INT));
  Oid type = INT4ARRAYOID;
  // First the stored sketches of keys that had expired when their first commit to fold came (an
  // unbucketed counter with a retention: that commit `retain` or more after the key's last
  // write, on the UTC calendar): the commits count from an empty set.
  SPIPlanPtr expire = KeptPlan(
      &plan_fold_expired,
      "DELETE FROM slotted_counter.key_sketches k USING (SELECT counter, key, bucket, "
      "pg_catalog.min(written_at) AS first_at FROM slotted_counter.sketch_deltas "
      "WHERE counter OPERATOR(pg_catalog.=) ANY ($1) GROUP BY counter, key, bucket) g, "
      "slotted_counter.key_values v, slotted_counter.counters c "
      "WHERE k.counter OPERATOR(pg_catalog.=) g.counter AND k.key OPERATOR(pg_catalog.=) g.key "
      "AND k.bucket OPERATOR(pg_catalog.=) g.bucket AND v.counter OPERATOR(pg_catalog.=) g.counter "
      "AND v.key OPERATOR(pg_catalog.=) g.key AND v.bucket OPERATOR(pg_catalog.=) g.bucket "
      "AND c.id OPERATOR(pg_catalog.=) g.counter AND c.bucket IS NULL AND c.retain IS NOT NULL "
      "AND g.first_at OPERATOR(pg_catalog.>=) pg_catalog.timezone('UTC', "
      "pg_catalog.timezone('UTC', v.written_at) OPERATOR(pg_catalog.+) c.retain)",
      1, &type, PlanChoice::kCustom);
  if (SPI_execute_plan(expire, &arg, nullptr, false, 0) != SPI_OK_DELETE)
    elog(ERROR, "folding slotted_counter.sketch_deltas failed");
  // The rows of the locked counters (and those of counters whose drop committed), each key's
  // union into its key_sketches row, and that row's estimate into key_values, written at its
  // last commit: the rows a commit adds meanwhile stay for the next fold.
  SPIPlanPtr plan = KeptPlan(
      &plan_fold,
      "WITH orphans AS (DELETE FROM slotted_counter.sketch_deltas d WHERE NOT EXISTS "
      "(SELECT FROM slotted_counter.counters c WHERE c.id OPERATOR(pg_catalog.=) d.counter)), "
      "d AS (DELETE FROM slotted_counter.sketch_deltas WHERE counter OPERATOR(pg_catalog.=) "
      "ANY ($1) RETURNING counter, key, bucket, sketch, written_at), "
      "g AS (SELECT counter, key, bucket, slotted_counter.sketch_union_agg(sketch) AS sketch, "
      "pg_catalog.max(written_at) AS last_at FROM d GROUP BY counter, key, bucket), "
      "s AS (INSERT INTO slotted_counter.key_sketches AS t (counter, key, bucket, sketch) "
      "SELECT counter, key, bucket, sketch FROM g ORDER BY counter, key, bucket "
      "ON CONFLICT ON CONSTRAINT key_sketches_pkey DO UPDATE "
      "SET sketch = slotted_counter.sketch_union(t.sketch, excluded.sketch) "
      "RETURNING counter, key, bucket, slotted_counter.sketch_count(sketch) AS n) "
      "INSERT INTO slotted_counter.key_values AS v (counter, key, bucket, value, written_at) "
      "SELECT s.counter, s.key, s.bucket, s.n, g.last_at FROM s JOIN g "
      "ON g.counter OPERATOR(pg_catalog.=) s.counter AND g.key OPERATOR(pg_catalog.=) s.key "
      "AND g.bucket OPERATOR(pg_catalog.=) s.bucket ON CONFLICT ON CONSTRAINT key_values_pkey "
      "DO UPDATE SET value = excluded.value, updated_at = pg_catalog.now(), "
      "written_at = GREATEST(v.written_at, excluded.written_at)",
      1, &type, PlanChoice::kCustom);
  if (SPI_execute_plan(plan, &arg, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "folding slotted_counter.sketch_deltas failed");
  return int64(SPI_processed);
}

}  // namespace sc
