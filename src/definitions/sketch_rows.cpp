// sketch_rows.cpp: the rows of slotted_counter.key_sketches (sketch_rows.hpp): the stored
// sketches that loads and reads union, and the writes of flushes and commits, with their
// key_values rows.
#include "definitions/sketch_rows.hpp"

#include "spi.hpp"

namespace sc {

namespace {

// [deltas]: the stored sketches of a buffered counter's keys (key_sketches), and of a
// transactional one's (with its unfolded sketch_deltas); for one key, a group, every key.
SPIPlanPtr plan_key[2] = {nullptr, nullptr};
SPIPlanPtr plan_keys[2] = {nullptr, nullptr};
SPIPlanPtr plan_all[2] = {nullptr, nullptr};
SPIPlanPtr plan_all_buckets[2] = {nullptr, nullptr};

#define SC_SKETCHES_OF(table, keys)                                                               \
  "SELECT sketch FROM slotted_counter." table " WHERE counter OPERATOR(pg_catalog.=) $1 "        \
  "AND bucket OPERATOR(pg_catalog.>=) $2 AND bucket OPERATOR(pg_catalog.<) $3" keys
#define SC_SKETCH_ROWS(keys)                                                                      \
  { SC_SKETCHES_OF("key_sketches", keys),                                                         \
    SC_SKETCHES_OF("key_sketches", keys) " UNION ALL " SC_SKETCHES_OF("sketch_deltas", keys) }
const char* const kAllSql[2] = SC_SKETCH_ROWS("");
// Every key of a range that leaves out -infinity (an unbucketed key's): by the index of buckets.
const char* const kAllBucketsSql[2] =
    SC_SKETCH_ROWS(" AND bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET);
const char* const kKeySql[2] = SC_SKETCH_ROWS(" AND key OPERATOR(pg_catalog.=) $4");
const char* const kKeysSql[2] =
    SC_SKETCH_ROWS(" AND key OPERATOR(pg_catalog.=) ANY ($4::pg_catalog.int8[])");

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
  Datum args[4] = {Int32GetDatum(def.id), TimestampTzGetDatum(since), TimestampTzGetDatum(until),
                   0};
  int deltas = def.durability == Durability::kTransactional ? 1 : 0;
  SPIPlanPtr plan;
  if (keys == nullptr) {
    static const Oid types[3] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
    plan = since != DT_NOBEGIN
               ? KeptPlan(&plan_all_buckets[deltas], kAllBucketsSql[deltas], 3, types)
               : KeptPlan(&plan_all[deltas], kAllSql[deltas], 3, types);
  } else if (nkeys == 1) {
    static const Oid types[4] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID};
    args[3] = Int64GetDatum(keys[0]);
    plan = KeptPlan(&plan_key[deltas], kKeySql[deltas], 4, types);
  } else {
    static const Oid types[4] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8ARRAYOID};
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nkeys + 1)));
    for (int i = 0; i < nkeys; i++) datums[i] = Int64GetDatum(keys[i]);
    args[3] = PointerGetDatum(construct_array(datums, nkeys, INT8OID, 8, true, TYPALIGN_DOUBLE));
    plan = KeptPlan(&plan_keys[deltas], kKeysSql[deltas], 4, types);
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
  for (int i = 0; i < n; i++) counts[i] = Int64GetDatum(rows[i].count);
  Datum arrays[4];
  RowArrays(rows, n, arrays);
  Datum args[5] = {arrays[0], arrays[1], arrays[2],
                   PointerGetDatum(construct_array(counts, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
                   arrays[3]};
  static const Oid types[5] = {INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID,
                               BYTEAARRAYOID};
  // The key_values row first (its triggers keep the sums and the filter of stored keys), then
  // the sketch, each an upsert. The buffer's sketch holds the stored one: its estimate is the
  // union's.
  SPIPlanPtr plan = KeptPlan(
      &plan_write,
      "WITH v AS (INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($4) ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "
      "SET value = excluded.value, updated_at = pg_catalog.now(), "
      "written_at = pg_catalog.now()) "
      "INSERT INTO slotted_counter.key_sketches AS s (counter, key, bucket, sketch) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($5) ON CONFLICT ON CONSTRAINT key_sketches_pkey DO UPDATE "
      "SET sketch = slotted_counter.sketch_union(s.sketch, excluded.sketch)",
      5, types, PlanChoice::kCustom);
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
      "INSERT INTO slotted_counter.sketch_deltas (counter, key, bucket, sketch) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($4)",
      4, types, PlanChoice::kCustom);
  if (SPI_execute_plan(plan, args, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.sketch_deltas failed");
}

int64 FoldSketchDeltas(const int32* ids, int nids) {
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nids + 1)));
  for (int i = 0; i < nids; i++) datums[i] = Int32GetDatum(ids[i]);
  Datum arg = PointerGetDatum(construct_array(datums, nids, INT4OID, 4, true, TYPALIGN_INT));
  Oid type = INT4ARRAYOID;
  // The rows of the locked counters (and those of counters whose drop committed), each key's
  // union into its key_sketches row, and that row's estimate into key_values: the rows a commit
  // adds meanwhile stay for the next fold.
  SPIPlanPtr plan = KeptPlan(
      &plan_fold,
      "WITH orphans AS (DELETE FROM slotted_counter.sketch_deltas d WHERE NOT EXISTS "
      "(SELECT FROM slotted_counter.counters c WHERE c.id OPERATOR(pg_catalog.=) d.counter)), "
      "d AS (DELETE FROM slotted_counter.sketch_deltas WHERE counter OPERATOR(pg_catalog.=) "
      "ANY ($1) RETURNING counter, key, bucket, sketch), "
      "g AS (SELECT counter, key, bucket, slotted_counter.sketch_union_agg(sketch) AS sketch "
      "FROM d GROUP BY counter, key, bucket), "
      "s AS (INSERT INTO slotted_counter.key_sketches AS t (counter, key, bucket, sketch) "
      "SELECT counter, key, bucket, sketch FROM g ORDER BY counter, key, bucket "
      "ON CONFLICT ON CONSTRAINT key_sketches_pkey DO UPDATE "
      "SET sketch = slotted_counter.sketch_union(t.sketch, excluded.sketch) "
      "RETURNING counter, key, bucket, slotted_counter.sketch_count(sketch) AS n) "
      "INSERT INTO slotted_counter.key_values AS v (counter, key, bucket, value) "
      "SELECT counter, key, bucket, n FROM s ON CONFLICT ON CONSTRAINT key_values_pkey "
      "DO UPDATE SET value = excluded.value, updated_at = pg_catalog.now(), "
      "written_at = pg_catalog.now()",
      1, &type, PlanChoice::kCustom);
  if (SPI_execute_plan(plan, &arg, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "folding slotted_counter.sketch_deltas failed");
  return int64(SPI_processed);
}

}  // namespace sc
