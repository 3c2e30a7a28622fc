// once.cpp: sc_incr_once, an increment that applies once per request id.
//
// A request id is kept per counter in slotted_counter.requests (counter, request_id, key, bucket,
// result, applied_at) for slotted_counter.dedupe_window; a call finds it there (or, for a
// buffered counter, in shared memory) and returns the first call's result instead of counting.
//   - Transactional counter: the call adds its pending delta and inserts the id's row in the
//     caller's transaction, so both commit or neither. A concurrent call with the same id waits
//     on the row's unique index for the first transaction: if that commits, this one takes back
//     its pending delta and returns the first result; if it rolls back, this one applies.
//   - Buffered counter: the increment lands in the buffer at the call, so the id must reach the
//     table with the flush that writes the increment: it waits in shared memory, owned by the
//     call while it looks in the table and adds (kApplying: concurrent calls with the same id
//     wait for it), then pending until that flush (request_ids.hpp has the protocol). A crash
//     loses the id with the increment; a retry then applies once.
// Either looks in the table only if the filter of stored keys says the id may be there: a new id
// costs no probe (shared/stored_keys.hpp; the triggers on requests add each inserted id).
#include "functions/once.hpp"

#include "buffer/buffer.hpp"
#include "definitions/catalog.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/request_ids.hpp"
#include "shared/stored_keys.hpp"
#include "settings.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"
#include "transactions/transactional.hpp"

namespace sc {

namespace {

// How long a call waits for an entry of the request id table before it fails.
constexpr int kIdRoomWaitMs = 10000;

SPIPlanPtr plan_claim = nullptr;
SPIPlanPtr plan_forget = nullptr;

int64 WindowMicros() { return int64(settings.dedupe_window) * USECS_PER_SEC; }

// The columns of slotted_counter.requests (counter, request_id, key, bucket, result, applied_at),
// as the table numbers them.
constexpr AttrNumber kCounterColumn = 1;
constexpr AttrNumber kIdColumn = 2;
constexpr AttrNumber kResultColumn = 5;
constexpr AttrNumber kAppliedAtColumn = 6;

struct StoredRow {
  int64 result;
  TimestampTz applied_at;
};

void CopyStoredRow(HeapTuple tuple, TupleDesc desc, void* arg) {
  auto* out = static_cast<StoredRow*>(arg);
  bool isnull;
  out->result = DatumGetInt64(heap_getattr(tuple, kResultColumn, desc, &isnull));
  out->applied_at = DatumGetTimestampTz(heap_getattr(tuple, kAppliedAtColumn, desc, &isnull));
}

// Whether the id may have a row in requests: not if the filter of stored keys says it never had
// one (shared/stored_keys.hpp), which spares a new id the probe of StoredResult.
bool MayHaveRow(int32 counter, const text* id) {
  return !StoredKeysInUse(MyDatabaseId) ||
         StoredBytesMayExist(kRequestsTable, counter, VARDATA_ANY(id), int(VARSIZE_ANY_EXHDR(id)),
                             ExtensionRelation("key_values"));
}

// The result of the id's row (and when it was applied) if that was at or after `since`, as of
// the latest commit (and this transaction's own rows): a probe of the primary key, without SQL.
bool StoredResult(int32 counter, text* id, TimestampTz since, int64* result,
                  TimestampTz* applied_at = nullptr) {
  ScanKeyData keys[2];
  ScanKeyEntryInitialize(&keys[0], 0, kCounterColumn, BTEqualStrategyNumber, InvalidOid,
                         InvalidOid, F_INT4EQ, Int32GetDatum(counter));
  ScanKeyEntryInitialize(&keys[1], 0, kIdColumn, BTEqualStrategyNumber, InvalidOid,
                         C_COLLATION_OID, F_TEXTEQ, PointerGetDatum(id));
  StoredRow row{0, 0};
  if (!ReadLatestRow("requests", "requests_pkey", keys, 2, CopyStoredRow, &row) ||
      row.applied_at < since)
    return false;
  *result = row.result;
  if (applied_at != nullptr) *applied_at = row.applied_at;
  return true;
}

// Inserts the id's row in this transaction (or takes over one older than the window); false if
// a row of the window is there (committed by another transaction meanwhile, which this one
// waited for, or inserted by this one).
bool ClaimRequest(int32 counter, text* id, int64 key, int64 bucket, int64 result,
                  TimestampTz at) {
  SpiSession spi = ConnectSpi();
  static const Oid types[7] = {INT4OID, TEXTOID,        INT8OID,    TIMESTAMPTZOID,
                               INT8OID, TIMESTAMPTZOID, INTERVALOID};
  SPIPlanPtr claim = KeptPlan(
      &plan_claim,
      "INSERT INTO slotted_counter.requests AS r (counter, request_id, key, bucket, result, "
      "applied_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (counter, request_id) DO UPDATE "
      "SET key = excluded.key, bucket = excluded.bucket, result = excluded.result, "
      "applied_at = excluded.applied_at WHERE r.applied_at OPERATOR(pg_catalog.<) "
      "(excluded.applied_at OPERATOR(pg_catalog.-) $7)",
      7, types);
  Interval window{WindowMicros(), 0, 0};
  Datum args[7] = {Int32GetDatum(counter),     PointerGetDatum(id),
                   Int64GetDatum(key),         TimestampTzGetDatum(bucket),
                   Int64GetDatum(result),      TimestampTzGetDatum(at),
                   IntervalPGetDatum(&window)};
  if (SPI_execute_plan(claim, args, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.requests failed");
  bool claimed = SPI_processed == 1;
  FinishSpi(spi);
  return claimed;
}

int64 TransactionalOnce(const CounterDef& def, int64 key, int64 bucket, int64 delta, text* id) {
  TimestampTz now = GetCurrentTimestamp();
  int64 result;
  // Looked up first, with the latest snapshot: a retry of an id that another transaction applied
  // since this one's snapshot returns its result (an INSERT ... ON CONFLICT would lock the row,
  // wait for other retries, and fail with 40001 under REPEATABLE READ).
  if (MayHaveRow(def.id, id) && StoredResult(def.id, id, now - WindowMicros(), &result))
    return result;
  CounterDef copy = def;
  int64 value = TransactionalIncrement(copy, key, bucket, delta);
  if (ClaimRequest(def.id, id, key, bucket, value, now)) return value;
  // Applied by another transaction that committed while this one waited for it: this delta goes
  // (in two steps when it is the one bigint whose negation is not one), and the first call's
  // result is the answer.
  if (delta == PG_INT64_MIN) {
    (void)TransactionalIncrement(copy, key, bucket, PG_INT64_MAX);
    (void)TransactionalIncrement(copy, key, bucket, 1);
  } else {
    (void)TransactionalIncrement(copy, key, bucket, -delta);
  }
  if (!StoredResult(def.id, id, DT_NOBEGIN, &result))
    elog(ERROR, "request id of counter \"%s\" vanished", def.name);
  return result;
}

void AbandonOwnedId(int, Datum index) {
  AbandonRequestId(shared->request_ids, DatumGetUInt32(index));
}

// The call owns the id's entry `index` until the id is known or added (the entry goes on any
// error): its result in requests if it has a row since the window's start, else the increment.
int64 ApplyOwnedId(const CounterDef& def, int64 key, int64 bucket, int64 delta, text* id,
                   uint32 index, TimestampTz now) {
  int64 result;
  PG_ENSURE_ERROR_CLEANUP(AbandonOwnedId, UInt32GetDatum(index));
  {
    TimestampTz applied_at;
    if (MayHaveRow(def.id, id) &&
        StoredResult(def.id, id, now - WindowMicros(), &result, &applied_at))
      KnownRequestId(shared->request_ids, index, result, applied_at);
    else
      result = BufferIncrementOnce(def, key, bucket, delta, index);
  }
  PG_END_ENSURE_ERROR_CLEANUP(AbandonOwnedId, UInt32GetDatum(index));
  return result;
}

int64 BufferedOnce(const CounterDef& def, int64 key, int64 bucket, int64 delta, text* id) {
  RequestIdTable* ids = shared->request_ids;
  const char* bytes = VARDATA_ANY(id);
  int len = int(VARSIZE_ANY_EXHDR(id));
  TimestampTz full_since = 0;
  for (;;) {
    TimestampTz now = GetCurrentTimestamp();
    int64 result;
    uint32 index;
    bool flush_due;
    switch (LookUpRequestId(ids, MyDatabaseId, def.id, bytes, len, now, WindowMicros(), &result,
                            &index, &flush_due)) {
      case IdLookup::kKnown:
        return result;
      case IdLookup::kBusy:
        SleepAs(Wait::kRequestId, 200);
        CHECK_FOR_INTERRUPTS();
        continue;
      case IdLookup::kFull:
        if (full_since == 0) full_since = now;
        if (TimestampDifferenceExceeds(full_since, now, kIdRoomWaitMs))
          ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                          errmsg("no room for the request id of counter \"%s\"", def.name),
                          errdetail("This database's share of the %d request ids of buffered "
                                    "sc_incr_once calls stayed unflushed for %d seconds.",
                                    settings.max_request_ids, kIdRoomWaitMs / 1000),
                          errhint("Raise slotted_counter.max_request_ids, and check that this "
                                  "database's flushes succeed.")));
        // No id is free for this database (none at all, or it holds its share): its own ids
        // leave shared memory with its next flush, which it has now. The wait shows in
        // pg_stat_activity as SlottedCounterRequestId (wait_events.hpp).
        AskForFlush(EnsureFlusher());
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1,
                        WaitEventOf(Wait::kRequestId));
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        continue;
      case IdLookup::kOwned:
        if (flush_due) AskForFlush(EnsureFlusher());
        break;
    }
    return ApplyOwnedId(def, key, bucket, delta, id, index, now);
  }
}

}  // namespace

int64 IncrementOnce(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                    const text* request_id) {
  int len = int(VARSIZE_ANY_EXHDR(request_id));
  if (len == 0 || len > kMaxRequestIdLen)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("request_id must be 1 to %d bytes long", kMaxRequestIdLen),
                    errdetail("It is %d bytes long.", len)));
  // A detoasted, unpacked copy: it goes into SPI arguments.
  text* id = cstring_to_text_with_len(VARDATA_ANY(request_id), len);
  EnsureFlusherFast();
  int64 result = def.durability == Durability::kTransactional
                     ? TransactionalOnce(def, key, bucket, delta, id)
                     : BufferedOnce(def, key, bucket, delta, id);
  EnsureFlusherFast(true);
  return result;
}

void ForgetOldRequests() {
  static const Oid type = TIMESTAMPTZOID;
  SPIPlanPtr plan = KeptPlan(&plan_forget,
                             "DELETE FROM slotted_counter.requests "
                             "WHERE applied_at OPERATOR(pg_catalog.<) $1",
                             1, &type);
  Datum since = TimestampTzGetDatum(GetCurrentTimestamp() - WindowMicros());
  // Through the index on applied_at: the old rows are few beside the table.
  int nest_level = PlannerSettingsOff({"enable_seqscan"});
  if (SPI_execute_plan(plan, &since, nullptr, false, 0) != SPI_OK_DELETE)
    elog(ERROR, "deleting old request ids failed");
  PlannerSettingsBack(nest_level);
}

}  // namespace sc
