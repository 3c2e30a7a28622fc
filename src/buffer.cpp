// buffer.cpp: where an increment goes (the lock protocol is written in shmem.hpp).
//
// Hit: the key's partition lock SHARED, find the entry, an atomic add; nothing else.
// Miss: take an entry (free, or a clean one evicted by the clock sweep), link it as kLoading
// under the partition lock EXCLUSIVE, read the key's stored value from slotted_counter.totals
// with the latest snapshot, then mark it kResident. Others who find a kLoading entry wait for it.
// No room (every entry dirty or busy): ask the flusher to apply the increment to the table in its
// own transaction (a write-through) and wait for the new value; the key stays non-resident, and
// no loader can link it while the request is pending.
#include <algorithm>

#include "buffer.hpp"

#include "buffer_internal.hpp"
#include "changes.hpp"
#include "checked_math.hpp"
#include "flusher_slots.hpp"
#include "request_ids.hpp"
#include "shmem.hpp"
#include "spi.hpp"
#include "write_through.hpp"

namespace sc {

bool StoredReadsNeedDeltas() {
  return RecoveryInProgress() || LoadsReadDeltas(FindSlot(MyDatabaseId));
}

void ReportOverflow(const CounterDef& def, int64 key, int64 value, int64 delta) {
  ReportValueOutOfRange(def.name,
                        psprintf("Key %lld holds %lld; adding %lld leaves the bigint range.",
                                 (long long)key, (long long)value, (long long)delta));
}

// Another backend is loading the entry: usually an index lookup away, but a load can wait for a
// user's lock on the values table, so back off up to a millisecond.
void WaitForLoad(int* waits) {
  pg_usleep(Min(1000L, 20L << Min(*waits, 6)));
  (*waits)++;
  CHECK_FOR_INTERRUPTS();
}

namespace {

// [transactional][bucketed]
SPIPlanPtr plan_stored[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};

const char* const kStoredSql[2][2] = {
    {"SELECT value FROM slotted_counter.totals WHERE counter OPERATOR(pg_catalog.=) $1 "
     "AND key OPERATOR(pg_catalog.=) $2 AND bucket IS NULL",
     "SELECT value FROM slotted_counter.totals WHERE counter OPERATOR(pg_catalog.=) $1 "
     "AND key OPERATOR(pg_catalog.=) $2 AND bucket OPERATOR(pg_catalog.=) $3"},
    // A transactional value is its totals row plus its committed, not yet folded deltas, read
    // in one snapshot (a fold moves rows from one to the other in one transaction).
    {"SELECT (COALESCE((SELECT value FROM slotted_counter.totals "
     "WHERE counter OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2 "
     "AND bucket IS NULL), 0) OPERATOR(pg_catalog.+) COALESCE((SELECT pg_catalog.sum(delta) "
     "FROM slotted_counter.deltas WHERE counter OPERATOR(pg_catalog.=) $1 "
     "AND key OPERATOR(pg_catalog.=) $2 AND bucket IS NULL), 0))::pg_catalog.int8",
     "SELECT (COALESCE((SELECT value FROM slotted_counter.totals "
     "WHERE counter OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2 "
     "AND bucket OPERATOR(pg_catalog.=) $3), 0) OPERATOR(pg_catalog.+) "
     "COALESCE((SELECT pg_catalog.sum(delta) FROM slotted_counter.deltas "
     "WHERE counter OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2 "
     "AND bucket OPERATOR(pg_catalog.=) $3), 0))::pg_catalog.int8"}};

// The value column of k's row in slotted_counter.totals, read in `snapshot` through the table's
// unique index (counter, key, bucket) without a query: the load of a key not seen before is this
// one index probe. It reads what the superuser's query would (no privilege check, no row
// security). False when the index is not as the scripts made it (dropped, invalid, rebuilt on
// other columns): the caller runs the query instead.
bool ReadTotalsRow(const CounterKey& k, Snapshot snapshot, int64* value) {
  Oid relid = ExtensionRelation("totals");
  if (!OidIsValid(relid)) return false;
  Relation rel = table_open(relid, AccessShareLock);
  // Looked up under the table's lock (which a DROP INDEX waits for), in the table's schema; and
  // opened only if it still exists (DROP INDEX CONCURRENTLY does not wait for that lock).
  Oid indexid = get_relname_relid("totals_counter_key_bucket", RelationGetNamespace(rel));
  Relation index = OidIsValid(indexid) ? try_relation_open(indexid, AccessShareLock) : nullptr;
  if (index == nullptr || index->rd_rel->relkind != RELKIND_INDEX) {
    if (index != nullptr) relation_close(index, NoLock);
    table_close(rel, NoLock);
    return false;
  }
  // The columns by name and type, from the relation's descriptor (no catalog lookups).
  static const char* const kNames[4] = {"counter", "key", "bucket", "value"};
  static const Oid kTypes[4] = {INT4OID, INT8OID, TIMESTAMPTZOID, INT8OID};
  AttrNumber columns[4] = {InvalidAttrNumber, InvalidAttrNumber, InvalidAttrNumber,
                           InvalidAttrNumber};
  TupleDesc desc = RelationGetDescr(rel);
  for (int a = 0; a < desc->natts; a++) {
    Form_pg_attribute att = TupleDescAttr(desc, a);
    for (int i = 0; i < 4 && !att->attisdropped; i++)
      if (att->atttypid == kTypes[i] && strcmp(NameStr(att->attname), kNames[i]) == 0)
        columns[i] = att->attnum;
  }
  AttrNumber value_column = columns[3];
  const FormData_pg_index* form = index->rd_index;
  bool usable = form->indrelid == relid && form->indisvalid && form->indisunique &&
                index->rd_rel->relam == BTREE_AM_OID && form->indnkeyatts == 3 &&
                value_column != InvalidAttrNumber;
  for (int i = 0; usable && i < 3; i++)
    usable = columns[i] != InvalidAttrNumber && form->indkey.values[i] == columns[i];
  if (usable) {
    ScanKeyData keys[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(k.counter));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(k.key));
    if (k.bucket == kNoBucket)
      ScanKeyEntryInitialize(&keys[2], SK_ISNULL | SK_SEARCHNULL, 3, InvalidStrategy, InvalidOid,
                             InvalidOid, InvalidOid, (Datum)0);
    else
      ScanKeyInit(&keys[2], 3, BTEqualStrategyNumber, F_TIMESTAMPTZ_EQ,
                  TimestampTzGetDatum(k.bucket));
    IndexScanDesc scan = index_beginscan(rel, index, snapshot, 3, 0);
    index_rescan(scan, keys, 3, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    *value = 0;
    if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
      bool isnull;
      Datum d = slot_getattr(slot, value_column, &isnull);
      if (!isnull) *value = DatumGetInt64(d);
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
  }
  // The locks stay until the end of the transaction, as a query's would.
  index_close(index, NoLock);
  table_close(rel, NoLock);
  return usable;
}

// The value the tables hold for k, as of the latest commit; 0 if none. committed_only: leave
// out this transaction's own uncommitted changes (its sc_drop_buckets), as a value linked into
// the shared buffer must be true for every session whatever this transaction does next.
int64 ReadStoredValue(const CounterKey& k, bool transactional, bool committed_only = false) {
  transactional = transactional && StoredReadsNeedDeltas();
  // A tuple this transaction inserted is visible from command curcid on, one it deleted until
  // then: from the first command, neither. Always on a registered copy: the latest snapshot
  // itself is static, and others may take it meanwhile.
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  if (committed_only) snapshot->curcid = FirstCommandId;
  int64 value = 0;
  if (transactional || !ReadTotalsRow(k, snapshot, &value)) {
    SpiSession spi = ConnectSpi();
    bool bucketed = k.bucket != kNoBucket;
    static const Oid types[3] = {INT4OID, INT8OID, TIMESTAMPTZOID};
    SPIPlanPtr plan = KeptPlan(&plan_stored[transactional][bucketed],
                               kStoredSql[transactional][bucketed], bucketed ? 3 : 2, types);
    Datum args[3] = {Int32GetDatum(k.counter), Int64GetDatum(k.key), Int64GetDatum(k.bucket)};
    int rc = SPI_execute_snapshot(plan, args, nullptr, snapshot, InvalidSnapshot, true, false, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.totals failed: %d", rc);
    if (SPI_processed == 1) {
      bool isnull;
      value = DatumGetInt64(
          SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    }
    FinishSpi(spi);
  }
  UnregisterSnapshot(snapshot);
  return value;
}

// How many entries one miss may look at for a clean one before writing through; the clock hand
// moves on, so the next miss goes on from there.
constexpr uint32 kSweepLimit = 1024;

// How long a commit waits for a free entry before it fails.
constexpr int kRoomWaitMs = 10000;

// How long after a database under its share found no room the databases over theirs take no
// clean entry of their own (SharedState::room_wanted_at).
constexpr int64 kRoomWantedMs = 100;

// Whether the deltas committed into a transactional entry are all in the values table (so that
// the entry may leave the buffer); always true for a buffered one. Under the entry's partition
// lock, exclusive.
bool DeltasFolded(const Entry& e) {
  uint32 epoch = e.commit_epoch.load(std::memory_order_relaxed);
  if (epoch == 0) return true;
  DatabaseSlot* slot = FindSlot(e.id.db);
  return slot != nullptr && Folded(slot, e.id.counter, epoch);
}

// No entry was to be had: the databases over their fair share are asked to flush now rather than
// at the end of their interval, so that their entries turn clean, and evictable, sooner.
void AskCrowdingFlushers() {
  uint32 crowding[kOccupancyCells];
  int n = shared->table->OverShare(MyDatabaseId, crowding, int(kOccupancyCells));
  for (int i = 0; i < n; i++)
    if (DatabaseSlot* slot = FindSlot(crowding[i])) AskForFlush(slot);
}

// Removes an entry this backend linked as kLoading and did not finish loading.
void AbandonLoad(int, Datum arg) {
  Table().AbandonLoad(*reinterpret_cast<const Loading*>(DatumGetPointer(arg)));
}

enum class LoadResult { kLoaded, kRetry, kStale, kNoRoom };

// Makes k resident with its stored value. kStale: a counter was dropped meanwhile, so the
// caller's definition must be looked up again before retrying.
// Not inlined into its callers, whose error cleanup would otherwise keep its locals across a
// longjmp.
pg_noinline LoadResult LoadEntry(const CounterKey& k, uint32 hash, bool transactional) {
  auto table = Table();
  uint64 epoch = CachedCatalogEpoch();
  uint64 evicted = 0;
  // A database over its share leaves the clean entries it has to one that wanted room lately.
  TimestampTz now = GetCurrentTimestamp();
  bool wanted = now - TimestampTz(pg_atomic_read_u64(&shared->room_wanted_at)) <
                    kRoomWantedMs * 1000 &&
                table.table().OverItsShare(MyDatabaseId);
  uint32 index = table.TakeFreeOrClean(MyDatabaseId, wanted, kSweepLimit, DeltasFolded, &evicted);
  if (evicted > 0) pg_atomic_fetch_add_u64(&shared->evictions, evicted);
  if (index == kNil) {
    if (!wanted && !table.table().OverItsShare(MyDatabaseId))
      pg_atomic_write_u64(&shared->room_wanted_at, uint64(now));
    AskCrowdingFlushers();
    return LoadResult::kNoRoom;
  }
  Loading loading;
  // Not while a write-through of the key is pending or a batch holds its partition (shmem.hpp).
  LoadStart start = table.BeginLoad(index, k, hash, [&] {
    if (WriteThroughPendingFor(k) ||
        pg_atomic_read_u32(ThroughHold(k.db, CounterTable::PartitionOf(hash))) != 0)
      return LoadStart::kRetry;
    return pg_atomic_read_u64(&shared->catalog_epoch) != epoch ? LoadStart::kStale
                                                               : LoadStart::kLinked;
  }, &loading);
  if (start == LoadStart::kRetry) return LoadResult::kRetry;
  if (start == LoadStart::kStale) return LoadResult::kStale;

  // Until it is resident, the entry is this backend's to remove, on an error or on a FATAL exit
  // (a terminated backend must not leave others waiting for its load forever).
  int64 stored = 0;
  PG_ENSURE_ERROR_CLEANUP(AbandonLoad, PointerGetDatum(&loading));
  {
    stored = ReadStoredValue(k, transactional, true);
  }
  PG_END_ENSURE_ERROR_CLEANUP(AbandonLoad, PointerGetDatum(&loading));

  bool loaded = table.FinishLoad(loading, stored, [&] {
    return pg_atomic_read_u64(&shared->catalog_epoch) != epoch;
  });
  return loaded ? LoadResult::kLoaded : LoadResult::kStale;
}

// No entry could be had for an operation that must not write through (a set, a commit): every
// entry is dirty or pinned. The flusher makes buffered entries clean and committers unpin
// theirs; entries that never go (committers waiting on each other for room) end the wait with
// an error after kRoomWaitMs rather than a hang.
void WaitForRoom(const CounterDef& def, const char* action, TimestampTz* since, int* waits) {
  if (*since == 0) *since = GetCurrentTimestamp();
  if (TimestampDifferenceExceeds(*since, GetCurrentTimestamp(), kRoomWaitMs))
    ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                    errmsg("no room in the slotted_counter buffer to %s counter \"%s\"", action,
                           def.name),
                    errdetail("All %u entries stayed dirty or held by committing transactions "
                              "for %d seconds.",
                              shared->table->capacity(), kRoomWaitMs / 1000),
                    errhint("Raise slotted_counter.max_entries.")));
  WakeFlusher(EnsureFlusher());
  WaitForLoad(waits);
}

// Has the flusher add delta to the stored value of the non-resident key k. *retry: k became
// resident meanwhile, add to the buffer instead.
int64 WriteThrough(const CounterDef& def, const CounterKey& k, uint32 hash, int64 delta,
                   bool* retry) {
  WriteThroughRequest* r = FreeRequest();
  // Under the key's exclusive partition lock, after checking it is not resident (shmem.hpp).
  auto table = Table();
  table.Exclusively(CounterTable::PartitionOf(hash), [&] {
    *retry = table.table().Find(k, hash) != kNil;
    if (!*retry) PublishRequest(r, k, delta, 0, DSM_HANDLE_INVALID);
  });
  if (*retry) return 0;

  RequestAnswer answer = AwaitAnswer(r, false, 0);
  if (answer.state == kRequestFailed) {
    if (answer.sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)
      ReportOverflow(def, k.key, BufferRead(def, k.key, k.bucket, false), delta);
    ReportUnknownCounter(def.name);
  }
  return answer.result;
}

// The hot path's steps (protocol.hpp), noting an entry that turned dirty after the lock.
inline Probe AddResident(const CounterKey& k, uint32 hash, int64 delta, int64* value,
                         bool* overflow) {
  Dirtied dirtied;
  Probe probe = Table().AddIfResident(k, hash, delta, value, overflow, &dirtied);
  NoteDirtied(dirtied);
  return probe;
}

Probe AddResidentWithin(const CounterKey& k, uint32 hash, int64 delta, Bounds bounds,
                        int64* value, bool* refused) {
  Dirtied dirtied;
  Probe probe = Table().AddIfResidentWithin(k, hash, delta, bounds, value, refused, &dirtied);
  NoteDirtied(dirtied);
  return probe;
}

inline Probe ExchangeResident(const CounterKey& k, uint32 hash, int64 new_value,
                              int64* old_value) {
  Dirtied dirtied;
  Probe probe = Table().ExchangeIfResident(k, hash, new_value, old_value, &dirtied);
  NoteDirtied(dirtied);
  return probe;
}

inline Probe ReadResident(const CounterKey& k, uint32 hash, int64* value) {
  return Table().ReadIfResident(k, hash, value);
}

}  // namespace

// After a miss: tries to make k resident. False if no entry can be had; otherwise the caller
// probes again (after a wait if another backend is loading the key, with a fresh definition if a
// drop made the cached one stale).
bool MakeResident(CounterDef* def, const CounterKey& k, uint32 hash, int* waits) {
  switch (LoadEntry(k, hash, def->durability == Durability::kTransactional)) {
    case LoadResult::kLoaded:
      return true;
    case LoadResult::kRetry:
      WaitForLoad(waits);
      return true;
    case LoadResult::kStale:
      *def = *GetCounter(def->id);
      return true;
    case LoadResult::kNoRoom:
      return false;
  }
  return true;
}

namespace {

// BufferIncrement of a key that was not resident at the first probe. Out of line, so that the
// hot path's frame holds only what a resident key needs.
pg_noinline int64 IncrementNotResident(const CounterDef& counter, const CounterKey& k,
                                       uint32 hash, int64 delta) {
  int64 key = k.key;
  int64 value;
  bool overflow;
  // Loading may look the definition up again (after a drop made it stale), which can free the
  // one the caller passed; work on a copy.
  CounterDef def = counter;
  int waits = 0;
  for (;;) {
    Probe probe = AddResident(k, hash, delta, &value, &overflow);
    if (probe == Probe::kFound) {
      if (overflow) ReportOverflow(def, key, value, delta);
      return value;
    }
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!MakeResident(&def, k, hash, &waits)) {
      // The flusher would wait for this transaction's own lock on the counter's row.
      if (BucketsDroppedInThisTransaction(def.id))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("no room in the slotted_counter buffer for counter \"%s\"",
                               def.name),
                        errdetail("The buffer is full, and this transaction holds the counter "
                                  "for sc_drop_buckets, so the flusher cannot write the "
                                  "increment through."),
                        errhint("Count in a transaction of its own.")));
      bool retry;
      value = WriteThrough(def, k, hash, delta, &retry);
      if (!retry) return value;
    }
  }
}

}  // namespace

int64 BufferIncrement(const CounterDef& counter, int64 key, int64 bucket, int64 delta) {
  CounterKey k{MyDatabaseId, counter.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int64 value;
  bool overflow;
  if (likely(AddResident(k, hash, delta, &value, &overflow) == Probe::kFound)) {
    if (unlikely(overflow)) ReportOverflow(counter, key, value, delta);
    return value;
  }
  return IncrementNotResident(counter, k, hash, delta);
}

namespace {

// Calls at_resident() (a step on k's resident entry) until it finds the entry resident: waits for
// a load in progress, loads the key, and with no room waits for the flusher (an error after
// kRoomWaitMs naming `action`). For the writes that are never written through.
template <typename AtResident>
void UntilResident(CounterDef* def, const CounterKey& k, uint32 hash, const char* action,
                   AtResident&& at_resident) {
  int waits = 0;
  TimestampTz no_room_since = 0;
  for (;;) {
    Probe probe = at_resident();
    if (probe == Probe::kFound) return;
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!MakeResident(def, k, hash, &waits)) WaitForRoom(*def, action, &no_room_since, &waits);
  }
}

}  // namespace

bool BufferIncrementWithin(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                           Bounds bounds, int64* value) {
  CounterDef def = counter;  // as in BufferIncrement
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  bool refused = false;
  UntilResident(&def, k, hash, "count into",
                [&] { return AddResidentWithin(k, hash, delta, bounds, value, &refused); });
  // Leaving bigint is an error, as for any increment, not a refusal by the bounds.
  int64 sum;
  if (refused && __builtin_add_overflow(*value, delta, &sum))
    ReportOverflow(def, key, *value, delta);
  return !refused;
}

int64 BufferIncrementOnce(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                          uint32 id_index) {
  CounterDef def = counter;  // as in BufferIncrement
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  RequestIdTable* ids = shared->request_ids;
  int64 value = 0;
  bool overflow = false;
  // Not written through: the increment must be in the buffer, for the flush that writes it to
  // write the id too. The add and the id's kPending are one section under apply_lock SHARED
  // (request_ids.hpp).
  UntilResident(&def, k, hash, "count into", [&] {
    LWLockAcquire(ids->apply_lock, LW_SHARED);
    Probe probe = AddResident(k, hash, delta, &value, &overflow);
    if (probe == Probe::kFound && !overflow)
      AppliedRequestId(ids, id_index, key, bucket, value, GetCurrentTimestamp());
    LWLockRelease(ids->apply_lock);
    return probe;
  });
  if (overflow) ReportOverflow(def, key, value, delta);
  return value;
}

int64 BufferSet(const CounterDef& counter, int64 key, int64 bucket, int64 value) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  // A set is not written through: it waits for the flusher to make room.
  int64 old = 0;
  UntilResident(&def, k, hash, "set", [&] { return ExchangeResident(k, hash, value, &old); });
  return old;
}

int64 BufferRead(const CounterDef& counter, int64 key, int64 bucket, bool load) {
  CounterKey k{MyDatabaseId, counter.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int64 value;
  if (ReadResident(k, hash, &value) == Probe::kFound) return value;
  CounterDef def = counter;  // as in BufferIncrement
  bool transactional = def.durability == Durability::kTransactional;
  int waits = 0;
  for (;;) {
    Probe probe = ReadResident(k, hash, &value);
    if (probe == Probe::kFound) return value;
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!load || !MakeResident(&def, k, hash, &waits)) return ReadStoredValue(k, transactional);
  }
}

// [transactional]: the stored values of many unbucketed keys, in one snapshot.
SPIPlanPtr plan_stored_many[2] = {nullptr, nullptr};

const char* const kStoredManySql[2] = {
    "SELECT k.key, COALESCE((SELECT value FROM slotted_counter.totals t "
    "WHERE t.counter OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) k.key "
    "AND t.bucket IS NULL), 0) FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY "
    "AS k(key, n) ORDER BY k.n",
    "SELECT k.key, (COALESCE((SELECT value FROM slotted_counter.totals t "
    "WHERE t.counter OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) k.key "
    "AND t.bucket IS NULL), 0) OPERATOR(pg_catalog.+) COALESCE((SELECT pg_catalog.sum(d.delta) "
    "FROM slotted_counter.deltas d WHERE d.counter OPERATOR(pg_catalog.=) $1 "
    "AND d.key OPERATOR(pg_catalog.=) k.key AND d.bucket IS NULL), 0))::pg_catalog.int8 "
    "FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS k(key, n) ORDER BY k.n"};

void BufferReadMany(const CounterDef& def, const int64* keys, int n, int64* values) {
  bool transactional = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  // Keys in the buffer are read from shared memory; the others with one query.
  auto* missing = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  auto* slot_of = static_cast<int*>(palloc(sizeof(int) * (n + 1)));
  int nmissing = 0;
  for (int i = 0; i < n; i++) {
    CounterKey k{MyDatabaseId, def.id, keys[i], kNoBucket};
    uint32 hash = HashCounterKey(k);
    int waits = 0;
    for (;;) {
      Probe probe = ReadResident(k, hash, &values[i]);
      if (probe == Probe::kMissing) {
        slot_of[nmissing] = i;
        missing[nmissing++] = Int64GetDatum(keys[i]);
      }
      if (probe != Probe::kLoading) break;
      WaitForLoad(&waits);
    }
  }
  if (nmissing == 0) return;
  SpiSession spi = ConnectSpi();
  static const Oid types[2] = {INT4OID, INT8ARRAYOID};
  SPIPlanPtr plan =
      KeptPlan(&plan_stored_many[transactional], kStoredManySql[transactional], 2, types);
  Datum args[2] = {Int32GetDatum(def.id), PointerGetDatum(construct_array(
                                              missing, nmissing, INT8OID, 8, true, TYPALIGN_DOUBLE))};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 0);
  if (rc != SPI_OK_SELECT || SPI_processed != uint64(nmissing))
    elog(ERROR, "reading slotted_counter.totals failed: %d", rc);
  for (int j = 0; j < nmissing; j++) {
    bool isnull;
    values[slot_of[j]] =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 2, &isnull));
  }
  FinishSpi(spi);
}

// [transactional]: the n largest stored values of the counter other than 0 (a key that reads 0
// is not ranked, as sc_series leaves out such buckets); those of resident keys are left out
// afterwards (a key's stored value is stale while it is resident).
SPIPlanPtr plan_top_stored[2] = {nullptr, nullptr};

const char* const kTopStoredSql[2] = {
    "SELECT key, value FROM slotted_counter.totals WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket IS NULL AND value OPERATOR(pg_catalog.<>) 0 ORDER BY value DESC, key LIMIT $2",
    "SELECT key, pg_catalog.sum(v)::pg_catalog.int8 AS value FROM ("
    "SELECT key, value AS v FROM slotted_counter.totals WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket IS NULL UNION ALL SELECT key, delta FROM slotted_counter.deltas "
    "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket IS NULL) s "
    "GROUP BY key HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 ORDER BY 2 DESC, key "
    "LIMIT $2"};

int64 BufferTopCandidates(const CounterDef& def, int64 n, int64 extra, KeyValue** out) {
  bool transactional = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  auto table = Table();
  // Every resident key of the counter, with its exact value. Entries linked during the scan can
  // fill the array; then scan again with room for all of them (a key left out would be reported
  // with its stored value, not its exact one).
  int64 space = int64(table.table().used()) + 64;
  KeyValue* resident;
  int64 nresident;
  for (;;) {
    resident = static_cast<KeyValue*>(
        MemoryContextAllocHuge(CurrentMemoryContext, sizeof(KeyValue) * space));
    nresident = 0;
    bool full = false;
    for (uint32 p = 0; p < kPartitions && !full; p++) {
      CHECK_FOR_INTERRUPTS();
      table.ForEachResident(p, [&](uint32, const Entry& e) {
        if (e.id.db != MyDatabaseId || e.id.counter != def.id || e.id.bucket != kNoBucket) return;
        if (nresident == space) {
          full = true;
          return;
        }
        resident[nresident++] = KeyValue{e.id.key, e.value.load(std::memory_order_acquire)};
      });
    }
    if (!full) break;
    pfree(resident);
    space = int64(table.table().capacity()) + 1;
  }
  auto* resident_keys = static_cast<int64*>(palloc(sizeof(int64) * (nresident + 1)));
  for (int64 i = 0; i < nresident; i++) resident_keys[i] = resident[i].key;
  std::sort(resident_keys, resident_keys + nresident);

  // The n largest stored values of the other keys are among the n + nresident largest stored.
  SpiSession spi = ConnectSpi();
  static const Oid types[2] = {INT4OID, INT8OID};
  SPIPlanPtr plan = KeptPlan(&plan_top_stored[transactional], kTopStoredSql[transactional], 2,
                             types);
  Datum args[2] = {Int32GetDatum(def.id), Int64GetDatum(n + nresident)};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.totals failed: %d", rc);
  int64 nstored = int64(SPI_processed);
  // The result outlives the session: in the caller's context (SPI_finish frees SPI's).
  auto* all = static_cast<KeyValue*>(MemoryContextAllocHuge(
      spi.caller, sizeof(KeyValue) * (nresident + Min(nstored, n) + extra + 1)));
  // A resident key that reads 0 is not ranked, but its stored row is stale: it stays in
  // resident_keys, which leaves that row out below.
  int64 count = 0;
  for (int64 i = 0; i < nresident; i++)
    if (resident[i].value != 0) all[count++] = resident[i];
  for (int64 j = 0, taken = 0; j < nstored && taken < n; j++) {
    if ((j & 4095) == 0) CHECK_FOR_INTERRUPTS();
    bool isnull;
    HeapTuple tup = SPI_tuptable->vals[j];
    int64 key = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
    if (std::binary_search(resident_keys, resident_keys + nresident, key)) continue;
    all[count++] = KeyValue{key, DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2,
                                                             &isnull))};
    taken++;
  }
  FinishSpi(spi);
  *out = all;
  return count;
}

int64 BufferResidentBuckets(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                            int64 until, BucketValue** out) {
  CounterTable* t = shared->table;
  // The partitions to scan, in order, each once.
  auto* partitions = static_cast<uint32*>(palloc(sizeof(uint32) * kPartitions));
  int npartitions = 0;
  if (keys == nullptr) {
    for (uint32 p = 0; p < kPartitions; p++) partitions[npartitions++] = p;
  } else {
    bool wanted[kPartitions] = {};
    for (int i = 0; i < nkeys; i++)
      wanted[CounterTable::PartitionOf(
          HashCounterKey(CounterKey{MyDatabaseId, def.id, keys[i], kNoBucket}))] = true;
    for (uint32 p = 0; p < kPartitions; p++)
      if (wanted[p]) partitions[npartitions++] = p;
  }
  // Entries linked during the scan can fill the array; then scan again with twice the room.
  int64 space = keys == nullptr ? int64(t->used()) + 64 : 64;
  for (;;) {
    auto* values = static_cast<BucketValue*>(
        MemoryContextAllocHuge(CurrentMemoryContext, sizeof(BucketValue) * space));
    int64 n = 0;
    bool full = false;
    for (int i = 0; i < npartitions && !full; i++) {
      Table().ForEachResident(partitions[i], [&](uint32, const Entry& e) {
        if (full || e.id.db != MyDatabaseId || e.id.counter != def.id ||
            e.id.bucket < since || e.id.bucket >= until ||
            (keys != nullptr && !std::binary_search(keys, keys + nkeys, e.id.key)))
          return;
        if (n == space) {
          full = true;
          return;
        }
        values[n++] = BucketValue{e.id.key, e.id.bucket, e.value.load(std::memory_order_acquire)};
      });
    }
    if (!full) {
      *out = values;
      return n;
    }
    pfree(values);
    space = Min(space * 2, int64(t->capacity()) + 1);
  }
}

void BufferReserve(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                   Bounds bounds, Reservation* out) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int waits = 0;
  TimestampTz no_room_since = 0;
  for (;;) {
    int64 committed = 0;
    switch (Table().ReserveIfResident(k, hash, delta, out, &committed, bounds)) {
      case Reserve::kReserved:
        return;
      case Reserve::kOverflow:
        ReportOverflow(def, key, committed, delta);
        return;
      case Reserve::kOutOfBounds:
        ereport(ERROR,
                (errcode(ERRCODE_CHECK_VIOLATION),
                 errmsg("bounded increment of counter \"%s\" would leave its bounds", def.name),
                 errdetail("Key %lld is %lld as committed; this transaction adds %lld, and its "
                           "bounded increments allow values in [%s, %s] whatever the "
                           "transactions committing with it do. Nothing of this transaction "
                           "is committed.",
                           (long long)key, (long long)committed, (long long)delta,
                           bounds.lower == INT64_MIN ? "-infinity"
                                                     : psprintf("%lld", (long long)bounds.lower),
                           bounds.upper == INT64_MAX ? "infinity"
                                                     : psprintf("%lld", (long long)bounds.upper))));
        return;
      case Reserve::kLoading:
        WaitForLoad(&waits);
        break;
      case Reserve::kMissing:
        if (!MakeResident(&def, k, hash, &waits))
          WaitForRoom(def, "commit", &no_room_since, &waits);
        break;
    }
  }
}

void BufferSettle(const Reservation& r, bool committed) {
  // The commit is visible by now, so a fold that takes this epoch (or a later one) sees it.
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  uint32 epoch = slot != nullptr ? pg_atomic_read_u32(&slot->fold_epoch) : UINT32_MAX;
  bool ours = Table().SettleReservation(r, committed, epoch);
  // A drop purged the entry meanwhile (a bucket drop keeps deltas committed after its DELETE):
  // this commit's deltas now belong to a key that is not resident.
  if (!ours && committed && slot != nullptr) RequireDeltaReads(slot);
}

void HoldForExpiry(uint32 p, const CounterKey* keys, const uint32* hashes, int n,
                   bool* expirable) {
  Table().UnlinkForExpiry(p, keys, hashes, n, expirable, DeltasFolded, [p] {
    pg_atomic_fetch_add_u32(ThroughHold(MyDatabaseId, p), 1);
  });
}

void ReleaseExpiryHold(uint32 p) { pg_atomic_fetch_sub_u32(ThroughHold(MyDatabaseId, p), 1); }

void PurgeCounter(Oid db, int32 counter) {
  ForgetRequestIds(shared->request_ids, db, counter);
  FailRequests(db, counter);
  Table().PurgeIf([&](const Entry& e) { return e.id.db == db && e.id.counter == counter; });
}

void PurgeBuckets(Oid db, int32 counter, int64 before) {
  // Commits into the dropped buckets after the drop's DELETE keep their deltas, whose entries
  // this purge removes: loads read the deltas until the next fold.
  if (DatabaseSlot* slot = FindSlot(db)) RequireDeltaReads(slot);
  // An entry that a committing transaction holds (a reservation) stays, emptied: that
  // transaction's deltas row, inserted before (and so not seen by) the drop's DELETE, survives,
  // and its settle adds the delta to 0. (Removed, the entry could be loaded again before that
  // commit is visible.) One pinned only by a buffered batch goes: the batch's adds and undo
  // check the generation and leave it alone.
  Table().PurgeIfUnreserved([&](const Entry& e) {
    return e.id.db == db && e.id.counter == counter && e.id.bucket != kNoBucket &&
           e.id.bucket < before;
  });
}

void PurgeDatabase(Oid db) {
  ForgetRequestIds(shared->request_ids, db, 0);
  FailRequests(db, 0);
  Table().PurgeIf([&](const Entry& e) { return e.id.db == db; });
}

uint32 PurgeCleanEntries(Oid db) { return uint32(Table().PurgeClean(db, DeltasFolded)); }

}  // namespace sc
