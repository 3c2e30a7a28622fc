// bucketed.cpp: counters with time buckets (the arithmetic: time_bucket.hpp).
//
// Each (key, bucket) of a bucketed counter is a value of its own: an entry of the buffer and a
// row of slotted_counter.key_values, like the one value of an unbucketed key. All buckets of a key
// share its buffer partition, so the resident ones are found with one partition scan.
//
// A read over a range of buckets takes the resident values from the buffer and every other
// bucket from the tables, in one query that leaves out the resident (key, bucket) pairs: each
// bucket is counted once, from shared memory if it is there (exact), else from the tables (which
// then hold all of it). A transactional counter adds this transaction's own pending deltas.
//
// sc_drop_buckets deletes the rows in the caller's transaction and notes the drop (xact.cpp),
// whose commit purges the buffer. It first locks the counter's row FOR UPDATE: the flusher,
// which locks the counters it flushes FOR KEY SHARE SKIP LOCKED, leaves the counter alone until
// the drop commits, and the registry of committing drops keeps it off the dropped entries until
// they are purged (shmem.hpp).
#include <algorithm>

#include "functions/bucketed.hpp"
#include "transactions/distinct_adds.hpp"

#include "buffer/buffer.hpp"
#include "definitions/expiry.hpp"
#include "definitions/changes.hpp"
#include "spi.hpp"
#include "transactions/transactional.hpp"

namespace sc {

namespace {

enum class Read { kSum, kSeries, kTop };

// [read][with the unfolded deltas][some keys (or all)]
SPIPlanPtr plans[3][2][2];

// The stored (key, bucket, v) rows of the counter in range that are not resident: from key_values,
// and for a transactional counter its committed deltas too.
char* StoredRows(bool transactional, bool some_keys) {
  const char* const kRows =
      "SELECT s.key, s.bucket, s.%s AS v FROM slotted_counter.%s s "
      "WHERE s.counter OPERATOR(pg_catalog.=) $1 AND s.bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET
      " AND s.bucket OPERATOR(pg_catalog.>=) $2 "
      "AND s.bucket OPERATOR(pg_catalog.<) $3 %s AND NOT EXISTS (SELECT FROM "
      "ROWS FROM (pg_catalog.unnest($5::pg_catalog.int8[]), "
      "pg_catalog.unnest($6::pg_catalog.timestamptz[])) AS r(key, bucket) "
      "WHERE r.key OPERATOR(pg_catalog.=) s.key AND r.bucket OPERATOR(pg_catalog.=) s.bucket)";
  const char* keys = some_keys ? "AND s.key OPERATOR(pg_catalog.=) ANY ($4::pg_catalog.int8[])"
                               : "";
  char* rows = psprintf(kRows, "value", "key_values", keys);
  if (transactional) rows = psprintf("%s UNION ALL %s", rows, psprintf(kRows, "delta", "deltas", keys));
  // The resident values and the pending deltas.
  return psprintf(
      "%s UNION ALL SELECT * FROM ROWS FROM (pg_catalog.unnest($7::pg_catalog.int8[]), "
      "pg_catalog.unnest($8::pg_catalog.timestamptz[]), pg_catalog.unnest($9::pg_catalog.int8[]))",
      rows);
}

SPIPlanPtr PlanFor(Read read, bool transactional, bool some_keys) {
  SPIPlanPtr& plan = plans[int(read)][transactional][some_keys];
  if (plan != nullptr) return plan;
  char* rows = StoredRows(transactional, some_keys);
  const char* sql = nullptr;
  switch (read) {
    case Read::kSum:
      sql = psprintf("SELECT COALESCE(pg_catalog.sum(v), 0)::pg_catalog.int8 FROM (%s) x", rows);
      break;
    case Read::kSeries:
      sql = psprintf(
          "SELECT bucket, pg_catalog.sum(v)::pg_catalog.int8 FROM (%s) x GROUP BY bucket "
          "HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 ORDER BY bucket",
          rows);
      break;
    case Read::kTop:
      sql = psprintf(
          "SELECT key, pg_catalog.sum(v)::pg_catalog.int8 FROM (%s) x GROUP BY key "
          "HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 ORDER BY 2 DESC, key LIMIT $10",
          rows);
      break;
  }
  Oid types[10] = {INT4OID,         TIMESTAMPTZOID,     TIMESTAMPTZOID, INT8ARRAYOID,
                   INT8ARRAYOID,    TIMESTAMPTZARRAYOID, INT8ARRAYOID,  TIMESTAMPTZARRAYOID,
                   INT8ARRAYOID,    INT4OID};
  return KeptPlan(&plan, sql, read == Read::kTop ? 10 : 9, types);
}

Datum Int8Array(const Datum* values, int64 n) {
  return PointerGetDatum(construct_array(const_cast<Datum*>(values), int(n), INT8OID, 8, true,
                                         TYPALIGN_DOUBLE));
}

Datum TimestampArray(const Datum* values, int64 n) {
  return PointerGetDatum(construct_array(const_cast<Datum*>(values), int(n), TIMESTAMPTZOID, 8,
                                         true, TYPALIGN_DOUBLE));
}

Datum* Datums(int64 n) { return static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1))); }

// What shared memory and this transaction know of the range, as arguments $5..$9: the resident
// (key, bucket) pairs to leave out of the stored rows, and the values to add instead (resident
// values, and this transaction's pending deltas).
void KnownValues(const CounterDef& def, const int64* keys, int nkeys, BucketRange range,
                 Datum* args) {
  BucketValue* resident;
  int64 nresident = BufferResidentBuckets(def, keys, nkeys, range.since, range.until, &resident);
  int64 *pending_keys = nullptr, *pending_buckets = nullptr, *pending_deltas = nullptr;
  int npending = def.durability == Durability::kTransactional
                     ? TransactionalPendingOf(def.id, &pending_keys, &pending_buckets,
                                              &pending_deltas)
                     : 0;
  Datum *ex_keys = Datums(nresident), *ex_buckets = Datums(nresident);
  Datum *add_keys = Datums(nresident + npending), *add_buckets = Datums(nresident + npending),
        *add_values = Datums(nresident + npending);
  int64 nex = 0, nadd = 0;
  for (int64 i = 0; i < nresident; i++) {
    // A bucket this transaction dropped is gone from its view of the tables already.
    if (BucketDroppedInThisTransaction(def.id, resident[i].bucket)) continue;
    ex_keys[nex] = Int64GetDatum(resident[i].key);
    ex_buckets[nex++] = Int64GetDatum(resident[i].bucket);
    add_keys[nadd] = Int64GetDatum(resident[i].key);
    add_buckets[nadd] = Int64GetDatum(resident[i].bucket);
    add_values[nadd++] = Int64GetDatum(resident[i].value);
  }
  for (int i = 0; i < npending; i++) {
    if (pending_buckets[i] < range.since || pending_buckets[i] >= range.until ||
        (keys != nullptr && !std::binary_search(keys, keys + nkeys, pending_keys[i])))
      continue;
    add_keys[nadd] = Int64GetDatum(pending_keys[i]);
    add_buckets[nadd] = Int64GetDatum(pending_buckets[i]);
    add_values[nadd++] = Int64GetDatum(pending_deltas[i]);
  }
  args[4] = Int8Array(ex_keys, nex);
  args[5] = TimestampArray(ex_buckets, nex);
  args[6] = Int8Array(add_keys, nadd);
  args[7] = TimestampArray(add_buckets, nadd);
  args[8] = Int8Array(add_values, nadd);
}

// Runs one range read; the caller reads SPI_tuptable and calls FinishSpi.
SpiSession RunRead(Read read, const CounterDef& def, const int64* keys, int nkeys,
                   BucketRange range, int limit) {
  Datum args[10];
  range = RetainedRange(def, range);
  KnownValues(def, keys, nkeys, range, args);
  args[0] = Int32GetDatum(def.id);
  args[1] = TimestampTzGetDatum(range.since);
  args[2] = TimestampTzGetDatum(range.until);
  Datum* key_datums = Datums(nkeys);
  for (int i = 0; i < nkeys; i++) key_datums[i] = Int64GetDatum(keys[i]);
  args[3] = Int8Array(key_datums, nkeys);
  args[9] = Int32GetDatum(limit);
  SpiSession spi = ConnectSpi();
  bool with_deltas = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  SPIPlanPtr plan = PlanFor(read, with_deltas, keys != nullptr);
  // Over every key, the stored rows are left out of the resident ones by a hashed anti-join: with
  // statistics that say the counter has a row or two (stale, or most rows unbucketed), a nested
  // loop would compare every stored row with every resident one.
  int nest_level = keys == nullptr ? PlannerSettingsOff({"enable_nestloop"}) : 0;
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 0);
  if (keys == nullptr) PlannerSettingsBack(nest_level);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  return spi;
}

// Copies column `column` of every result row into a palloc'd array of the caller's context.
int64* ResultColumn(MemoryContext context, int column) {
  auto* out = static_cast<int64*>(MemoryContextAlloc(context, sizeof(int64) * (SPI_processed + 1)));
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    out[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, column,
                                         &isnull));
  }
  return out;
}

}  // namespace

int64 BucketOf(const CounterDef& def, TimestampTz at) {
  int64 start;
  if (TIMESTAMP_NOT_FINITE(at) ||
      !BucketStart(def.width, at, MIN_TIMESTAMP, END_TIMESTAMP - 1, &start))
    ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
                    errmsg("timestamp out of range for the buckets of counter \"%s\"", def.name),
                    errdetail("A time to count at must be finite, and its bucket must start "
                              "within the range of timestamptz.")));
  return start;
}

BucketRange RangeArguments(FunctionCallInfo fcinfo, int since_arg, int until_arg) {
  BucketRange range = kAllBuckets;
  if (!PG_ARGISNULL(since_arg)) range.since = PG_GETARG_TIMESTAMPTZ(since_arg);
  if (!PG_ARGISNULL(until_arg)) range.until = PG_GETARG_TIMESTAMPTZ(until_arg);
  if (range.since > range.until)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("since must not be later than until"),
                    errdetail("since is inclusive and until exclusive.")));
  return range;
}

int64 RangeSum(const CounterDef& def, const int64* keys, int nkeys, BucketRange range) {
  if (nkeys == 0 || range.since == range.until) return 0;
  SpiSession spi = RunRead(Read::kSum, def, keys, nkeys, range, 0);
  bool isnull;
  int64 sum = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                          &isnull));
  FinishSpi(spi);
  return sum;
}

int64 RangeSeries(const CounterDef& def, int64 key, BucketRange range, int64** buckets,
                  int64** values) {
  SpiSession spi = RunRead(Read::kSeries, def, &key, 1, range, 0);
  int64 n = int64(SPI_processed);
  *buckets = ResultColumn(spi.caller, 1);
  *values = ResultColumn(spi.caller, 2);
  FinishSpi(spi);
  return n;
}

int RangeTop(const CounterDef& def, int n, BucketRange range, int64** keys, int64** values) {
  SpiSession spi = RunRead(Read::kTop, def, nullptr, 0, range, n);
  int count = int(SPI_processed);
  *keys = ResultColumn(spi.caller, 1);
  *values = ResultColumn(spi.caller, 2);
  FinishSpi(spi);
  return count;
}

TimestampTz ExpiredBefore(const CounterDef& def, TimestampTz now) {
  if (!def.retains) return DT_NOBEGIN;
  TimestampTz cutoff = Minus(now, def.retain);
  return def.bucketed ? BucketOf(def, cutoff) : cutoff;
}

BucketRange RetainedRange(const CounterDef& def, BucketRange range) {
  if (!def.retains) return range;
  TimestampTz before = ExpiredBefore(def, GetCurrentStatementStartTimestamp());
  if (range.since < before) range.since = Min(before, range.until);
  return range;
}

int64 DropBuckets(const CounterDef& def, TimestampTz before) {
  // This transaction's own increments of the dropped buckets go with them: undone by a pending
  // delta of their opposite, which ROLLBACK TO SAVEPOINT takes back with the drop.
  if (def.durability == Durability::kTransactional && def.distinct)
    DropPendingSketchBuckets(def.id, before);
  if (def.durability == Durability::kTransactional && !def.distinct) {
    int64 *keys, *buckets, *deltas;
    int n = TransactionalPendingOf(def.id, &keys, &buckets, &deltas);
    for (int i = 0; i < n; i++)
      if (buckets[i] < before) (void)TransactionalIncrement(def, keys[i], buckets[i], -deltas[i]);
  }

  SpiSession spi = ConnectSpi();
  Oid id_type = INT4OID;
  Datum id = Int32GetDatum(def.id);
  int rc = SPI_execute_with_args(
      "SELECT FROM slotted_counter.counters WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE", 1,
      &id_type, &id, nullptr, false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "locking the counter failed: %d", rc);
  if (SPI_processed == 0) ReportUnknownCounter(def.name);

  // Locked: no flush of the counter runs until this transaction ends, so what is resident now
  // is all the buffer holds of the dropped buckets beyond the rows.
  BucketValue* resident;
  int64 nresident = BufferResidentBuckets(def, nullptr, 0, DT_NOBEGIN, before, &resident);
  Datum *keys = Datums(nresident), *buckets = Datums(nresident);
  int64 n = 0;
  for (int64 i = 0; i < nresident; i++)
    if (resident[i].value != 0) {
      keys[n] = Int64GetDatum(resident[i].key);
      buckets[n++] = Int64GetDatum(resident[i].bucket);
    }
  Oid types[4] = {INT4OID, TIMESTAMPTZOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID};
  Datum args[4] = {id, TimestampTzGetDatum(before), Int8Array(keys, n), TimestampArray(buckets, n)};
  rc = ExecuteWithLatestSnapshot(
      "WITH t AS (DELETE FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET " AND bucket OPERATOR(pg_catalog.<) $2 "
      "RETURNING key, bucket), "
      "d AS (DELETE FROM slotted_counter.deltas WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.<) $2 RETURNING key, bucket), "
      "s AS (DELETE FROM slotted_counter.key_sketches WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET " AND bucket OPERATOR(pg_catalog.<) $2), "
      "sd AS (DELETE FROM slotted_counter.sketch_deltas WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.<) $2 RETURNING key, bucket) "
      "SELECT pg_catalog.count(*) FROM (SELECT key, bucket FROM t UNION SELECT key, bucket FROM d "
      "UNION SELECT key, bucket FROM sd "
      "UNION SELECT * FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4))) s",
      4, types, args);
  if (rc != SPI_OK_SELECT) elog(ERROR, "deleting old buckets failed: %d", rc);
  bool isnull;
  int64 dropped = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                              &isnull));
  FinishSpi(spi);
  NoteBucketsDropped(def.id, before);
  return dropped;
}

}  // namespace sc
