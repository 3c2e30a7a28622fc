// retention.cpp: counters that keep their values for a time only.
//
// A counter's `retain` (sc_create, sc_alter_retention; a column of slotted_counter.counters) is
// applied by its database's flusher, after a committed flush, every 10 seconds and at every
// sc_rollup (ExpireRetained), in transactions of its own:
//   - Bucketed: the buckets that ended `retain` ago or more are dropped with the semantics of
//     sc_drop_buckets, by the same code (bucketed.cpp: DropBuckets, its lock on the counter's row
//     and its purge of the buffer at commit). Reads leave them out from the moment they expire
//     (RetainedRange), gone or not.
//   - Unbucketed: a key expires when its last write is `retain` ago or more (written_at in
//     slotted_counter.key_values, Entry::last_write in the buffer: definitions/expiry.hpp). Every
//     read leaves it out from that moment on, and a write counts from 0 (protocol.hpp: expiry);
//     this pass only deletes the rows, when they have no unfolded deltas. A row must neither
//     outlive its entry nor be loaded while it goes: per partition, under the partition lock
//     EXCLUSIVE, the flusher removes the clean entries of its candidates (an entry written since
//     its last flush keeps its key: it was written lately) and holds the partition against loads
//     (core/through_holds.hpp); for a batch (whole partitions, at most 16 of the 128 and about
//     1,000 keys) it deletes the rows whose written_at is still old, commits, and drops the
//     holds. A write that comes meanwhile waits for the hold, then loads the key anew: from 0 if
//     the row went. So no write is lost to a deletion: it lands before (the key stays) or after
//     (the key starts again from 0), and either way it counts from 0 on an expired key.
// A deletion's commit need not wait for its WAL to reach disk: a crash that loses it brings the
// old row back, which the next pass deletes again, and any later flush's commit writes it out.
#include <algorithm>

#include "functions/retention.hpp"
#include "definitions/text_keys.hpp"

#include "definitions/arguments.hpp"
#include "functions/bucketed.hpp"
#include "buffer/buffer.hpp"
#include "definitions/counter_ref.hpp"
#include "functions/once.hpp"
#include "definitions/privileges.hpp"
#include "definitions/changes.hpp"
#include "shared/flusher_slots.hpp"
#include "spi.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace sc {

namespace {

constexpr long kPassMs = 10000;
// Keys looked at per unbucketed counter per pass; more wait for the next pass.
constexpr int kKeysPerPass = 100000;
// Keys and buffer partitions per deletion: the partitions are held against loads until its
// transaction commits, so a batch spans at most an eighth of them.
constexpr int kBatchKeys = 1000;
constexpr uint32 kBatchPartitions = kPartitions / 8;
// 1,000 years, in each of an interval's units.
constexpr int32 kMaxMonths = 12 * 1000;
constexpr int32 kMaxDays = 366 * 1000;
constexpr int64 kMaxMicros = int64(366) * 1000 * USECS_PER_DAY;

TimestampTz last_pass = 0;
MemoryContext pass_context = nullptr;

SPIPlanPtr plan_counters = nullptr;
SPIPlanPtr plan_candidates = nullptr;
SPIPlanPtr plan_stored_before = nullptr;
SPIPlanPtr plan_lock = nullptr;
SPIPlanPtr plan_expire[2] = {nullptr, nullptr};  // [with the deltas]
SPIPlanPtr plan_expire_sketches = nullptr;

void BeginPassTransaction() {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  SPI_connect();
  PushActiveSnapshot(GetTransactionSnapshot());
}

void EndPassTransaction() {
  SPI_finish();
  PopActiveSnapshot();
  CommitTransactionCommand();
  MemoryContextSwitchTo(pass_context);
}

// The ids of this database's counters that have a retention, in pass_context; returns how many.
int RetainedCounters(int32** ids) {
  *ids = nullptr;
  SPIPlanPtr plan = KeptPlan(&plan_counters,
                             "SELECT id FROM slotted_counter.counters WHERE retain IS NOT NULL "
                             "ORDER BY id",
                             0, nullptr);
  if (SPI_execute_plan(plan, nullptr, nullptr, true, 0) != SPI_OK_SELECT)
    elog(ERROR, "reading slotted_counter.counters failed");
  int n = int(SPI_processed);
  *ids = static_cast<int32*>(MemoryContextAlloc(pass_context, sizeof(int32) * (n + 1)));
  for (int i = 0; i < n; i++) {
    bool isnull;
    (*ids)[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
                                            &isnull));
  }
  return n;
}

// Whether the tables hold a bucket of the counter that starts before `before`.
bool StoredBefore(int32 id, TimestampTz before) {
  static const Oid types[2] = {INT4OID, TIMESTAMPTZOID};
  SPIPlanPtr plan = KeptPlan(
      &plan_stored_before,
      "SELECT EXISTS (SELECT FROM slotted_counter.key_values "
      "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET
      " AND bucket OPERATOR(pg_catalog.<) $2) OR EXISTS (SELECT FROM slotted_counter.deltas "
      "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket OPERATOR(pg_catalog.<) $2)",
      2, types);
  Datum args[2] = {Int32GetDatum(id), TimestampTzGetDatum(before)};
  if (SPI_execute_plan(plan, args, nullptr, true, 1) != SPI_OK_SELECT)
    elog(ERROR, "reading slotted_counter.key_values failed");
  bool isnull;
  return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

// A bucketed counter: drops its expired buckets, as sc_drop_buckets would, in one transaction.
int64 ExpireBuckets(int32 id) {
  BeginPassTransaction();
  int64 dropped = 0;
  const CounterDef* found = FindCounter(id);
  if (found != nullptr && found->retains && found->bucketed) {
    CounterDef def = *found;
    TimestampTz before = ExpiredBefore(def, GetCurrentTimestamp());
    // Only when there is something to drop: the drop locks the counter's row.
    if (StoredBefore(id, before)) dropped = DropBuckets(def, before);
  }
  EndPassTransaction();
  return dropped;
}

// An unbucketed counter's key that may have expired, with where it lives in the buffer.
struct Candidate {
  uint32 partition;
  uint32 hash;
  int64 key;
};

// Up to kKeysPerPass keys of an unbucketed counter whose rows were last written before
// `before`, sorted by partition, in pass_context; returns how many.
int Candidates(const CounterDef& def, TimestampTz before, Candidate** out) {
  static const Oid types[3] = {INT4OID, TIMESTAMPTZOID, INT4OID};
  SPIPlanPtr plan = KeptPlan(
      &plan_candidates,
      "SELECT key FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET
      " AND written_at OPERATOR(pg_catalog.<) $2 LIMIT $3",
      3, types);
  Datum args[3] = {Int32GetDatum(def.id), TimestampTzGetDatum(before),
                   Int32GetDatum(kKeysPerPass)};
  if (SPI_execute_plan(plan, args, nullptr, true, 0) != SPI_OK_SELECT)
    elog(ERROR, "reading slotted_counter.key_values failed");
  int n = int(SPI_processed);
  auto* candidates =
      static_cast<Candidate*>(MemoryContextAlloc(pass_context, sizeof(Candidate) * (n + 1)));
  for (int i = 0; i < n; i++) {
    bool isnull;
    int64 key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
                                            &isnull));
    uint32 hash = HashCounterKey(CounterKey{MyDatabaseId, def.id, key, kNoBucket});
    candidates[i] = Candidate{CounterTable::PartitionOf(hash), hash, key};
  }
  std::sort(candidates, candidates + n, [](const Candidate& a, const Candidate& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.key < b.key;
  });
  *out = candidates;
  return n;
}

// Deletes the rows of `keys` that are still older than `before` and have no unfolded deltas,
// unless a transaction is dropping the counter; returns how many.
int64 DeleteExpired(const CounterDef& def, TimestampTz before, const int64* keys, int n) {
  static const Oid lock_type = INT4OID;
  SPIPlanPtr lock = KeptPlan(&plan_lock,
                             "SELECT FROM slotted_counter.counters "
                             "WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE SKIP LOCKED",
                             1, &lock_type);
  Datum id = Int32GetDatum(def.id);
  if (SPI_execute_plan(lock, &id, nullptr, false, 1) != SPI_OK_SELECT)
    elog(ERROR, "locking the counter failed");
  if (SPI_processed == 0) return 0;
  // A key out of the buffer has no unfolded deltas (counter_table.hpp: Entry::commit_epoch),
  // except while loads must read them (after a restart, until a fold of every commit): only then
  // are they looked at, in one hashed scan.
  bool with_deltas = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  static const Oid types[3] = {INT4OID, TIMESTAMPTZOID, INT8ARRAYOID};
  // A distinct counter's keys: their sketches go with their rows, but those a commit not yet
  // folded wrote to (newer than the row says).
  SPIPlanPtr plan = def.distinct ? KeptPlan(
      &plan_expire_sketches,
      "WITH t AS (DELETE FROM slotted_counter.key_values t "
      "WHERE t.counter OPERATOR(pg_catalog.=) $1 AND t.bucket OPERATOR(pg_catalog.=) "
      SC_NO_BUCKET " AND t.key OPERATOR(pg_catalog.=) ANY ($3) "
      "AND t.written_at OPERATOR(pg_catalog.<) $2 AND NOT EXISTS (SELECT FROM "
      "slotted_counter.sketch_deltas d WHERE d.counter OPERATOR(pg_catalog.=) $1 "
      "AND d.key OPERATOR(pg_catalog.=) t.key AND d.bucket OPERATOR(pg_catalog.=) t.bucket) "
      "RETURNING t.key) "
      "DELETE FROM slotted_counter.key_sketches s USING t "
      "WHERE s.counter OPERATOR(pg_catalog.=) $1 AND s.bucket OPERATOR(pg_catalog.=) "
      SC_NO_BUCKET " AND s.key OPERATOR(pg_catalog.=) t.key",
      3, types) : KeptPlan(
      &plan_expire[with_deltas],
      with_deltas
          ? "DELETE FROM slotted_counter.key_values t WHERE t.counter OPERATOR(pg_catalog.=) $1 "
            "AND t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET
            " AND t.key OPERATOR(pg_catalog.=) ANY ($3) "
            "AND t.written_at OPERATOR(pg_catalog.<) $2 AND t.key NOT IN (SELECT d.key FROM "
            "slotted_counter.deltas d WHERE d.counter OPERATOR(pg_catalog.=) $1 "
            "AND d.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ")"
          : "DELETE FROM slotted_counter.key_values t WHERE t.counter OPERATOR(pg_catalog.=) $1 "
            "AND t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET
            " AND t.key OPERATOR(pg_catalog.=) ANY ($3) "
            "AND t.written_at OPERATOR(pg_catalog.<) $2",
      3, types);
  Datum* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int i = 0; i < n; i++) datums[i] = Int64GetDatum(keys[i]);
  Datum args[3] = {id, TimestampTzGetDatum(before),
                   PointerGetDatum(construct_array(datums, n, INT8OID, 8, true, TYPALIGN_DOUBLE))};
  if (SPI_execute_plan(plan, args, nullptr, false, 0) != SPI_OK_DELETE)
    elog(ERROR, "deleting expired keys failed");
  return int64(SPI_processed);
}

// The partitions a batch holds (first .. last of the sorted candidates' partitions).
struct HeldRange {
  uint32 first;
  uint32 last;
  bool any;
};

void DropHolds(int, Datum arg) {
  auto* held = reinterpret_cast<HeldRange*>(DatumGetPointer(arg));
  if (held->any)
    for (uint32 p = held->first; p <= held->last; p++) ReleaseExpiryHold(p);
  held->any = false;
}

// One batch of candidates (whole partitions, in partition order): out of the buffer and held
// (HoldForExpiry, a partition at a time), their old rows deleted in a transaction that commits
// before the holds go. Returns how many rows went.
int64 ExpireBatch(const CounterDef& def, TimestampTz before, const Candidate* batch, int n) {
  auto* keys = static_cast<CounterKey*>(palloc(sizeof(CounterKey) * n));
  auto* hashes = static_cast<uint32*>(palloc(sizeof(uint32) * n));
  auto* expirable = static_cast<bool*>(palloc(sizeof(bool) * n));
  auto* delete_keys = static_cast<int64*>(palloc(sizeof(int64) * n));
  for (int i = 0; i < n; i++) {
    keys[i] = CounterKey{MyDatabaseId, def.id, batch[i].key, kNoBucket};
    hashes[i] = batch[i].hash;
  }
  // Partitions without candidates in the range are held too: a hold is only a wait for loaders.
  HeldRange held{batch[0].partition, batch[n - 1].partition, true};
  int64 deleted = 0;
  // The holds go on any error, and on a FATAL exit, which no loader could otherwise outwait.
  PG_ENSURE_ERROR_CLEANUP(DropHolds, PointerGetDatum(&held));
  {
    for (uint32 p = held.first, i = 0; p <= held.last; p++) {
      uint32 end = i;
      while (end < uint32(n) && batch[end].partition == p) end++;
      HoldForExpiry(p, keys + i, hashes + i, int(end - i), expirable + i);
      i = end;
    }
    int ndelete = 0;
    for (int i = 0; i < n; i++)
      if (expirable[i]) delete_keys[ndelete++] = batch[i].key;
    if (ndelete > 0) {
      BeginPassTransaction();
      // A lost commit only brings old rows back (see the top of this file).
      (void)set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
                              GUC_ACTION_LOCAL, true, 0, false);
      deleted = DeleteExpired(def, before, delete_keys, ndelete);
      EndPassTransaction();
    }
  }
  PG_END_ENSURE_ERROR_CLEANUP(DropHolds, PointerGetDatum(&held));
  DropHolds(0, PointerGetDatum(&held));
  return deleted;
}

// An unbucketed counter: deletes the keys not written for its retention.
int64 ExpireKeys(int32 id) {
  BeginPassTransaction();
  const CounterDef* found = FindCounter(id);
  CounterDef def{};
  int n = 0;
  Candidate* candidates = nullptr;
  TimestampTz before = 0;
  if (found != nullptr && found->retains && !found->bucketed) {
    def = *found;
    before = ExpiredBefore(def, GetCurrentTimestamp());
    n = Candidates(def, before, &candidates);
  }
  EndPassTransaction();
  int64 deleted = 0;
  // Batches of whole partitions: up to kBatchPartitions of them and, beyond the first
  // partition's keys, up to kBatchKeys keys.
  for (int first = 0; first < n;) {
    int end = first;
    while (end < n &&
           ((end > first && candidates[end].partition == candidates[end - 1].partition) ||
            (end - first < kBatchKeys &&
             candidates[end].partition < candidates[first].partition + kBatchPartitions)))
      end++;
    deleted += ExpireBatch(def, before, candidates + first, end - first);
    first = end;
  }
  return deleted;
}

// One counter's expiry; an error is logged, and leaves the counter to the next pass.
void ExpireCounter(int32 id, bool bucketed) {
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    if (bucketed)
      (void)ExpireBuckets(id);
    else
      (void)ExpireKeys(id);
  }
  PG_CATCH();
  {
    // Not in the failed transaction's memory, which the abort frees.
    char what[64];
    snprintf(what, sizeof(what), "drop the expired values of counter %d", id);
    AbortAndLog(context, what, "The flusher tries again in its next pass.");
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

}  // namespace

void CheckRetention(const Interval* retain) {
  if (retain->month < 0 || retain->day < 0 || retain->time < 0 ||
      (retain->month == 0 && retain->day == 0 && retain->time == 0))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("retention must be positive"),
                    errdetail("retain is how long values are kept, for example '90 days' or "
                              "'1 hour'; NULL keeps them forever.")));
  if (retain->month > kMaxMonths || retain->day > kMaxDays || retain->time > kMaxMicros)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("retention must be at most 1000 years"),
                    errhint("NULL keeps values forever.")));
}

bool ExpireRetained(bool now) {
  static bool retaining = false;
  TimestampTz start = GetCurrentTimestamp();
  if (!now && !TimestampDifferenceExceeds(last_pass, start, kPassMs)) return retaining;
  last_pass = start;
  if (pass_context == nullptr)
    pass_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter retention",
                                         ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(pass_context);
  MemoryContext context = MemoryContextSwitchTo(pass_context);
  int n = 0;
  int32* ids = nullptr;
  bool* bucketed = nullptr;
  PG_TRY();
  {
    BeginPassTransaction();
    n = RetainedCounters(&ids);
    // Request ids past the dedupe window go in the same pass, as do the text keys of counters
    // whose creation rolled back.
    ForgetOldRequests();
    ForgetAbortedKeys();
    bucketed = static_cast<bool*>(MemoryContextAllocZero(pass_context, sizeof(bool) * (n + 1)));
    for (int i = 0; i < n; i++) {
      const CounterDef* def = FindCounter(ids[i]);
      bucketed[i] = def != nullptr && def->bucketed;
    }
    EndPassTransaction();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(pass_context);
    EmitErrorReport();
    FlushErrorState();
    AbortCurrentTransaction();
    n = 0;
  }
  PG_END_TRY();
  MemoryContextSwitchTo(pass_context);
  for (int i = 0; i < n; i++) ExpireCounter(ids[i], bucketed[i]);
  MemoryContextSwitchTo(context);
  retaining = n > 0;
  return retaining;
}

}  // namespace sc

using namespace sc;

Datum AlterRetention(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_alter_retention()");
  PreventCommandIfReadOnly("sc_alter_retention()");
  RequireArguments(fcinfo, names);
  const CounterDef* def = CounterArgument(fcinfo, 0, kOwn);
  if (def->limiter) ReportKind(*def, "sc_alter_retention()");  // its retention is its tolerance
  int32 id = def->id;
  bool retained = def->retains && !def->bucketed;
  bool retains = !PG_ARGISNULL(1);
  if (retains) CheckRetention(PG_GETARG_INTERVAL_P(1));
  Oid types[2] = {INT4OID, INTERVALOID};
  Datum args[2] = {Int32GetDatum(id), retains ? PG_GETARG_DATUM(1) : (Datum)0};
  UpdateCounterRow(id,
                   retains ? "UPDATE slotted_counter.counters SET retain = $2 "
                             "WHERE id OPERATOR(pg_catalog.=) $1"
                           : "UPDATE slotted_counter.counters SET retain = NULL "
                             "WHERE id OPERATOR(pg_catalog.=) $1",
                   retains ? 2 : 1, types, args);
  // Writes of a counter whose keys never expired carry no time (definitions/expiry.hpp): its
  // values in the buffer count as written now, for the rest of this transaction and, once more
  // at its commit, for everyone.
  if (retains && !retained) {
    StampCounter(MyDatabaseId, id, GetCurrentTimestamp());
    NoteRetentionSet(id);
  }
  // The rest of this transaction reads with the new retention (def is not used after this).
  ForgetCachedCounters();
  // The flusher expires what is kept no longer: one that left for idleness starts again (and,
  // with a retention in the database, stays), as a write would start it.
  if (retains) (void)EnsureFlusher();
  PG_RETURN_VOID();
}

SC_ENTRY_POINT(sc_alter_retention, AlterRetention)
