// totals.cpp: a counter's total over every key, from slotted_counter.counter_totals.
//
// A total is three parts: the sums of the rows (slotted_counter.counter_totals, one row per bucket,
// kept equal to the rows by the triggers of definitions/sums.cpp), the committed deltas not yet
// folded into rows (a transactional counter's), and what the buffer holds beyond the rows:
// value - flushed of each resident entry. A transactional commit is counted once: by its delta
// row, as its settle leaves value = flushed. A flush is counted once: readers read all three
// within a commit window (core/commit_window.hpp), so no flush commits and settles in between.
// Plus this transaction's own pending deltas. The sum is numeric in SQL: only the total must be
// a bigint.
#include "functions/totals.hpp"

#include "buffer/buffer.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"
#include "definitions/changes.hpp"
#include "transactions/transactional.hpp"

namespace sc {

namespace {

// [series][bucketed][with deltas]
SPIPlanPtr plans[2][2][2];

SPIPlanPtr PlanFor(bool series, bool bucketed, bool with_deltas) {
  SPIPlanPtr& plan = plans[series][bucketed][with_deltas];
  if (plan != nullptr) return plan;
  const char* in_range = bucketed ? "s.bucket OPERATOR(pg_catalog.>=) $2 "
                                    "AND s.bucket OPERATOR(pg_catalog.<) $3"
                                  : "s.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET;
  char* rows = psprintf(
      "SELECT s.bucket, s.value AS v FROM slotted_counter.counter_totals s "
      "WHERE s.counter OPERATOR(pg_catalog.=) $1 AND %s",
      in_range);
  if (with_deltas)
    rows = psprintf(
        "%s UNION ALL SELECT s.bucket, s.delta::pg_catalog.numeric FROM slotted_counter.deltas s "
        "WHERE s.counter OPERATOR(pg_catalog.=) $1 AND %s",
        rows, in_range);
  rows = psprintf(
      "%s UNION ALL SELECT r.b, r.v::pg_catalog.numeric OPERATOR(pg_catalog.-) "
      "r.f::pg_catalog.numeric FROM ROWS FROM (pg_catalog.unnest($4::pg_catalog.timestamptz[]), "
      "pg_catalog.unnest($5::pg_catalog.int8[]), pg_catalog.unnest($6::pg_catalog.int8[])) "
      "AS r(b, v, f) "
      "UNION ALL SELECT p.b, p.d::pg_catalog.numeric FROM ROWS FROM "
      "(pg_catalog.unnest($7::pg_catalog.timestamptz[]), pg_catalog.unnest($8::pg_catalog.int8[])) "
      "AS p(b, d)",
      rows);
  // NULL: out of bigint's range (the caller's 22003).
  const char* as_bigint =
      "CASE WHEN t OPERATOR(pg_catalog.>=) (-9223372036854775808)::pg_catalog.numeric "
      "AND t OPERATOR(pg_catalog.<=) 9223372036854775807::pg_catalog.numeric "
      "THEN t::pg_catalog.int8 END";
  const char* sql =
      series ? psprintf("SELECT bucket, %s FROM (SELECT u.bucket, pg_catalog.sum(u.v) AS t "
                        "FROM (%s) u GROUP BY u.bucket) x "
                        "WHERE t OPERATOR(pg_catalog.<>) 0 ORDER BY bucket",
                        as_bigint, rows)
             : psprintf("SELECT %s FROM (SELECT COALESCE(pg_catalog.sum(u.v), 0) AS t FROM (%s) u) x",
                        as_bigint, rows);
  static const Oid types[8] = {INT4OID,      TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZARRAYOID,
                               INT8ARRAYOID, INT8ARRAYOID,   TIMESTAMPTZARRAYOID, INT8ARRAYOID};
  return KeptPlan(&plan, sql, 8, types);
}

Datum Int8s(const int64* values, int64 n) {
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int64 i = 0; i < n; i++) datums[i] = Int64GetDatum(values[i]);
  return PointerGetDatum(construct_array(datums, int(n), INT8OID, 8, true, TYPALIGN_DOUBLE));
}

Datum Timestamps(const int64* values, int64 n) {
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int64 i = 0; i < n; i++) datums[i] = TimestampTzGetDatum(values[i]);
  return PointerGetDatum(
      construct_array(datums, int(n), TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE));
}

// Runs the read within a commit window, again until no flush committed during it; the caller
// reads SPI_tuptable and calls FinishSpi.
SpiSession ReadTotal(const CounterDef& def, BucketRange range, bool series) {
  range = RetainedRange(def, range);
  bool transactional = def.durability == Durability::kTransactional;
  // This transaction's own pending deltas in range (and not of a bucket it dropped).
  int64 *pending_keys = nullptr, *pending_buckets = nullptr, *pending_deltas = nullptr;
  int npending = transactional ? TransactionalPendingOf(def.id, &pending_keys, &pending_buckets,
                                                        &pending_deltas)
                               : 0;
  int64 nkept = 0;
  for (int i = 0; i < npending; i++)
    if (!def.bucketed ||
        (pending_buckets[i] >= range.since && pending_buckets[i] < range.until)) {
      pending_buckets[nkept] = pending_buckets[i];
      pending_deltas[nkept++] = pending_deltas[i];
    }
  Datum pending[2] = {Timestamps(pending_buckets, nkept), Int8s(pending_deltas, nkept)};
  CommitWindow& window = CommitWindowOf(MyDatabaseId);
  for (;;) {
    uint64 generation;
    if (!ReadStart(window, &generation)) {
      // A flush is between its commit and the end of its settle: a moment, mostly.
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1,
                      WaitEventOf(Wait::kCommitWindow));
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
      continue;
    }
    Unflushed unflushed = def.bucketed ? BufferUnflushed(def, range.since, range.until)
                                       : BufferUnflushed(def, kNoBucket, kNoBucket);
    // A bucket this transaction dropped is gone from its view of the tables already.
    int64 n = 0;
    for (int64 i = 0; i < unflushed.n; i++)
      if (!def.bucketed || !BucketDroppedInThisTransaction(def.id, unflushed.buckets[i])) {
        unflushed.buckets[n] = unflushed.buckets[i];
        unflushed.values[n] = unflushed.values[i];
        unflushed.flushed[n++] = unflushed.flushed[i];
      }
    Datum args[8] = {Int32GetDatum(def.id),
                     TimestampTzGetDatum(range.since),
                     TimestampTzGetDatum(range.until),
                     Timestamps(unflushed.buckets, n),
                     Int8s(unflushed.values, n),
                     Int8s(unflushed.flushed, n),
                     pending[0],
                     pending[1]};
    SpiSession spi = ConnectSpi();
    SPIPlanPtr plan = PlanFor(series, def.bucketed, transactional);
    int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot,
                                  true, false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counter_totals failed: %d", rc);
    if (ReadValid(window, generation)) return spi;
    FinishSpi(spi);
  }
}

[[noreturn]] void ReportTotalOutOfRange(const CounterDef& def) {
  ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                  errmsg("total of counter \"%s\" out of range", def.name)));
}

}  // namespace

int64 SumsTotal(const CounterDef& def, BucketRange range) {
  if (def.bucketed && range.since == range.until) return 0;
  SpiSession spi = ReadTotal(def, range, false);
  bool isnull;
  int64 total = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                            &isnull));
  FinishSpi(spi);
  if (isnull) ReportTotalOutOfRange(def);
  return total;
}

int64 SumsTotalSeries(const CounterDef& def, BucketRange range, int64** buckets,
                      int64** values) {
  Assert(def.bucketed);
  *buckets = *values = nullptr;
  if (range.since == range.until) return 0;
  SpiSession spi = ReadTotal(def, range, true);
  int64 n = int64(SPI_processed);
  *buckets = static_cast<int64*>(MemoryContextAlloc(spi.caller, sizeof(int64) * (n + 1)));
  *values = static_cast<int64*>(MemoryContextAlloc(spi.caller, sizeof(int64) * (n + 1)));
  bool out_of_range = false;
  for (int64 i = 0; i < n; i++) {
    bool isnull;
    (*buckets)[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
                                                &isnull));
    (*values)[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2,
                                               &isnull));
    out_of_range = out_of_range || isnull;
  }
  FinishSpi(spi);
  if (out_of_range) ReportTotalOutOfRange(def);
  return n;
}

}  // namespace sc
