// load.cpp: entries in and out of the buffer: a miss takes an entry (free, or a clean one the
// clock sweep evicts, the database's fair share respected), links it as kLoading under the
// partition lock EXCLUSIVE, reads the stored value (stored.cpp) and marks it kResident; others
// who find it kLoading wait. Purges of dropped counters, buckets and databases, and the expiry's
// partition holds. The lock protocols are in core/protocol.hpp and core/through_holds.hpp.
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/request_ids.hpp"
#include "shared/shmem.hpp"
#include "shared/write_through.hpp"

namespace sc {

// Another backend is loading the entry: usually an index lookup away, but a load can wait for a
// user's lock on the values table, so back off up to a millisecond.
void WaitForLoad(int* waits) {
  SleepAs(Wait::kLoad, Min(1000L, 20L << Min(*waits, 6)));
  (*waits)++;
  CHECK_FOR_INTERRUPTS();
}

// How many entries one miss may look at for a clean one before writing through; the clock hand
// moves on, so the next miss goes on from there.
constexpr uint32 kSweepLimit = 1024;

// How long a commit waits for a free entry before it fails.
constexpr int kRoomWaitMs = 10000;

// How many entries awaiting a fold a sweep meets before it asks for one (TakeEntry).
constexpr uint32 kUnfoldedBeforeFold = 4;

// How long after a database under its share found no room the databases over theirs take no
// clean entry of their own (SharedState::room_wanted_at).
constexpr int64 kRoomWantedMs = 100;

bool DeltasFolded(const Entry& e) {
  uint32 epoch = e.commit_epoch.load(std::memory_order_relaxed);
  if (epoch == 0) return true;
  DatabaseSlot* slot = FindSlot(e.id.db);
  return slot != nullptr && Folded(slot, e.id.counter, epoch);
}

namespace {

// No entry was to be had: this database's flusher and those of the databases over their fair
// share are asked to flush now rather than at the end of their interval, so that their entries
// turn clean (buffered ones written, transactional ones folded), and evictable, sooner. A buffer
// too small for one interval's keys is flushed as often as its writers need, not once an interval.
void AskFlushersForRoom() {
  if (DatabaseSlot* own = FindSlot(MyDatabaseId)) AskForFlush(own);
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
// A free entry, or a clean one the clock sweep evicted; kNil if none (the flushers that can make
// room are asked to flush).
uint32 TakeEntry() {
  auto table = Table();
  uint64 evicted = 0;
  // A database over its share leaves the clean entries it has to one that wanted room lately.
  TimestampTz now = GetCurrentTimestamp();
  bool wanted = now - TimestampTz(pg_atomic_read_u64(&shared->room_wanted_at)) <
                    kRoomWantedMs * 1000 &&
                table.table().OverItsShare(MyDatabaseId);
  // Entries of committed transactional increments leave only once a flush folded their deltas:
  // a sweep that meets several asks for that flush now, before the buffer has no entry left,
  // so that the fold runs while the remaining entries are taken.
  uint32 unfolded = 0;
  auto may_evict = [&](const Entry& e) {
    if (DeltasFolded(e)) return true;
    unfolded++;
    return false;
  };
  uint32 index = table.TakeFreeOrClean(MyDatabaseId, wanted, kSweepLimit, may_evict, &evicted);
  if (evicted > 0) pg_atomic_fetch_add_u64(&shared->evictions, evicted);
  if (index != kNil && unfolded >= kUnfoldedBeforeFold)
    if (DatabaseSlot* own = FindSlot(MyDatabaseId)) AskForFlush(own);
  if (index == kNil) {
    if (!wanted && !table.table().OverItsShare(MyDatabaseId))
      pg_atomic_write_u64(&shared->room_wanted_at, uint64(now));
    AskFlushersForRoom();
  }
  return index;
}

// distinct: the counter's definition when its keys hold sketches (they borrow a block).
pg_noinline LoadResult LoadEntry(const CounterKey& k, uint32 hash, bool transactional,
                                 const CounterDef* distinct) {
  auto table = Table();
  uint64 epoch = CachedCatalogEpoch();
  // A buffered key is written only beside its sum entry (core/protocol.hpp: sums), which is
  // linked first, holding 0; a key resident already lacked only that: the caller writes it now.
  // A transactional key needs none: its commits leave value = flushed.
  if (!transactional && !table.HasSum(k, hash)) {
    uint32 spare = TakeEntry();
    if (spare == kNil) return LoadResult::kNoRoom;
    table.LinkSum(spare, k, hash);
    int64 ignored;
    if (table.ReadIfResident(k, hash, &ignored) != Probe::kMissing) return LoadResult::kLoaded;
  }
  uint32 index = TakeEntry();
  if (index == kNil) return LoadResult::kNoRoom;
  Loading loading;
  // Not while a batch or an expiry holds its partition (core/through_holds.hpp) or a
  // write-through of the key is pending (core/write_through_request.hpp).
  LoadStart start = BeginLoadUnlessHeld(table, shared->through_holds, index, k, hash, [&] {
    if (WriteThroughPendingFor(k)) return LoadStart::kRetry;
    return pg_atomic_read_u64(&shared->catalog_epoch) != epoch ? LoadStart::kStale
                                                               : LoadStart::kLinked;
  }, &loading);
  if (start == LoadStart::kRetry) return LoadResult::kRetry;
  if (start == LoadStart::kStale) return LoadResult::kStale;
  uint32 block = kNil;
  if (distinct != nullptr) {
    block = TakeSketchBlock(index, loading.generation, distinct->sketch);
    if (block == kNil) {
      table.AbandonLoad(loading);
      return LoadResult::kNoRoom;
    }
  }

  // Until it is resident, the entry is this backend's to remove, on an error or on a FATAL exit
  // (a terminated backend must not leave others waiting for its load forever).
  int64 stored = 0;
  int64 stamp = kNoWrite;
  uint64 row = 0;
  PG_ENSURE_ERROR_CLEANUP(AbandonLoad, PointerGetDatum(&loading));
  {
    stored = ReadStoredValue(k, transactional, true, &stamp, &row);
    if (distinct != nullptr) LoadStoredSketch(*distinct, k, block);
  }
  PG_END_ENSURE_ERROR_CLEANUP(AbandonLoad, PointerGetDatum(&loading));

  bool loaded = table.FinishLoad(
      loading, stored, [&] { return pg_atomic_read_u64(&shared->catalog_epoch) != epoch; },
      stamp, row);
  return loaded ? LoadResult::kLoaded : LoadResult::kStale;
}

}  // namespace

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
                    errhint(def.distinct ? "Raise slotted_counter.max_entries or "
                                           "slotted_counter.max_sketches."
                                         : "Raise slotted_counter.max_entries.")));
  AskForFlush(EnsureFlusher());
  WaitForLoad(waits);
}

// After a miss: tries to make k resident. False if no entry can be had; otherwise the caller
// probes again (after a wait if another backend is loading the key, with a fresh definition if a
// drop made the cached one stale).
bool MakeResident(CounterDef* def, const CounterKey& k, uint32 hash, int* waits) {
  // A limiter's keys have no deltas, whatever its durability: loaded as a buffered counter's.
  switch (LoadEntry(k, hash, def->durability == Durability::kTransactional && !def->limiter,
                    def->distinct ? def : nullptr)) {
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

void HoldForExpiry(uint32 p, const CounterKey* keys, const uint32* hashes, int n,
                   bool* expirable) {
  auto table = Table();
  HoldPartitionForExpiry(table, shared->through_holds, MyDatabaseId, p, keys, hashes, n,
                         expirable, DeltasFolded);
}

void ReleaseExpiryHold(uint32 p) { ReleaseHold(shared->through_holds, MyDatabaseId, p); }

void PurgeCounter(Oid db, int32 counter) {
  ForgetRequestIds(shared->request_ids, db, counter);
  if (SharedKeysOn()) SharedKeys().Purge(db, counter);
  FailRequests(db, counter);
  // Its keys' entries and their sum entries.
  Table().PurgeIf([&](const Entry& e) {
    return e.id.db == db && (e.id.counter == counter || e.id.counter == -counter);
  });
}

void StampCounter(Oid db, int32 counter, int64 stamp) {
  Table().RaiseStamps(
      [&](const Entry& e) { return e.id.db == db && e.id.counter == counter; }, stamp);
  // The next flush looks at the whole buffer: these entries were not noted in the ring.
  if (DatabaseSlot* slot = FindSlot(db)) MarkDirtyUntracked(slot);
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
    return e.id.db == db && (e.id.counter == counter || e.id.counter == -counter) &&
           e.id.bucket != kNoBucket && e.id.bucket < before;
  });
}

void PurgeDatabase(Oid db) {
  ForgetRequestIds(shared->request_ids, db, 0);
  if (SharedKeysOn()) SharedKeys().Purge(db, 0);
  FailRequests(db, 0);
  Table().PurgeIf([&](const Entry& e) { return e.id.db == db; });
}

uint32 PurgeCleanEntries(Oid db) { return uint32(Table().PurgeClean(db, DeltasFolded)); }

}  // namespace sc
