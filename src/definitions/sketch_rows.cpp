// sketch_rows.cpp: the rows of slotted_counter.key_sketches (sketch_rows.hpp): the stored
// sketches that loads and reads union, and the writes of flushes and commits, with their
// key_values rows.
#include "definitions/sketch_rows.hpp"

#include "spi.hpp"

namespace sc {

namespace {

SPIPlanPtr plan_key = nullptr;
SPIPlanPtr plan_keys = nullptr;
SPIPlanPtr plan_all = nullptr;

#define SC_SKETCH_ROWS                                                                            \
  "SELECT sketch FROM slotted_counter.key_sketches WHERE counter OPERATOR(pg_catalog.=) $1 "     \
  "AND bucket OPERATOR(pg_catalog.>=) $2 AND bucket OPERATOR(pg_catalog.<) $3"

SPIPlanPtr plan_write = nullptr;

}  // namespace

void UnionStoredSketch(const CounterDef& def, const bytea* stored, SketchSet* out) {
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
  SPIPlanPtr plan;
  if (keys == nullptr) {
    static const Oid types[3] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
    plan = KeptPlan(&plan_all, SC_SKETCH_ROWS, 3, types);
  } else if (nkeys == 1) {
    static const Oid types[4] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID};
    args[3] = Int64GetDatum(keys[0]);
    plan = KeptPlan(&plan_key, SC_SKETCH_ROWS " AND key OPERATOR(pg_catalog.=) $4", 4, types);
  } else {
    static const Oid types[4] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8ARRAYOID};
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nkeys + 1)));
    for (int i = 0; i < nkeys; i++) datums[i] = Int64GetDatum(keys[i]);
    args[3] = PointerGetDatum(construct_array(datums, nkeys, INT8OID, 8, true, TYPALIGN_DOUBLE));
    plan = KeptPlan(&plan_keys,
                    SC_SKETCH_ROWS " AND key OPERATOR(pg_catalog.=) ANY ($4::pg_catalog.int8[])",
                    4, types);
  }
  int rc = SPI_execute_snapshot(plan, args, nullptr, snapshot, InvalidSnapshot, true, false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_sketches failed: %d", rc);
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) continue;
    bytea* stored = DatumGetByteaPP(d);
    UnionStoredSketch(def, stored, out);
  }
  FinishSpi(spi);
  UnregisterSnapshot(snapshot);
}

bytea* StoredSketch(const SketchSet& s) {
  uint64 len = SketchSetStoredBytes(s);
  auto* out = static_cast<bytea*>(palloc0(VARHDRSZ + len));
  SET_VARSIZE(out, VARHDRSZ + len);
  SketchSetWrite(s, reinterpret_cast<uint8*>(VARDATA(out)));
  return out;
}

void WriteSketchRows(const SketchRow* rows, int n) {
  if (n == 0) return;
  auto* counters = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* keys = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* buckets = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* counts = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* sketches = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; i++) {
    counters[i] = Int32GetDatum(rows[i].counter);
    keys[i] = Int64GetDatum(rows[i].key);
    buckets[i] = TimestampTzGetDatum(rows[i].bucket);
    counts[i] = Int64GetDatum(rows[i].count);
    sketches[i] = PointerGetDatum(rows[i].sketch);
  }
  Datum args[5] = {
      PointerGetDatum(construct_array(counters, n, INT4OID, 4, true, TYPALIGN_INT)),
      PointerGetDatum(construct_array(keys, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(buckets, n, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(counts, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(sketches, n, BYTEAOID, -1, false, TYPALIGN_INT))};
  static const Oid types[5] = {INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID,
                               BYTEAARRAYOID};
  // The key_values row first (its triggers keep the sums and the filter of stored keys), then
  // the sketch, each an upsert: the value never goes down (a commit's estimate may miss a
  // concurrent commit's elements; the union does not).
  SPIPlanPtr plan = KeptPlan(
      &plan_write,
      "WITH v AS (INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($4) ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "
      "SET value = GREATEST(t.value, excluded.value), updated_at = pg_catalog.now(), "
      "written_at = pg_catalog.now()) "
      "INSERT INTO slotted_counter.key_sketches AS s (counter, key, bucket, sketch) "
      "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
      "pg_catalog.unnest($5) ON CONFLICT ON CONSTRAINT key_sketches_pkey DO UPDATE "
      "SET sketch = slotted_counter.sketch_union(s.sketch, excluded.sketch)",
      5, types, PlanChoice::kCustom);
  // With the latest snapshot: a row another commit wrote after this transaction's snapshot (under
  // REPEATABLE READ) is the one to union with.
  if (SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, false, true,
                           0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.key_sketches failed");
}

}  // namespace sc
