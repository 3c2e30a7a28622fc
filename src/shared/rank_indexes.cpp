// rank_indexes.cpp: the rank indexes of sc_rank in a DSA area (the protocol: rank_indexes.hpp).
#include "shared/rank_indexes.hpp"

#include "definitions/expiry.hpp"
#include "settings.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"

namespace sc {

namespace {

// An index not used for this long goes; a ready one is built again after it (a flusher that
// failed between a commit and its updates leaves no error for longer than that).
constexpr int64 kIdleMs = 10 * 60 * 1000;

// This process's mapping of the area.
dsa_area* area = nullptr;

// The area, attached (or, with create, made) in this process; nullptr if there is none yet.
dsa_area* Area(bool create) {
  if (area != nullptr) return area;
  RankIndexes* r = shared->rank_indexes;
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  if (r->area == DSM_HANDLE_INVALID && create) {
    area = dsa_create(r->tranche);
    dsa_pin(area);
    dsa_pin_mapping(area);
    r->area = dsa_get_handle(area);
  }
  dsa_handle handle = r->area;
  LWLockRelease(r->lock);
  if (area == nullptr && handle != DSM_HANDLE_INVALID) {
    area = dsa_attach(handle);
    dsa_pin_mapping(area);
  }
  MemoryContextSwitchTo(old);
  return area;
}

// core/rank_index.hpp's allocator over the area, within slotted_counter.rank_memory for all
// indexes together.
struct DsaAllocator {
  dsa_area* a;

  uint64_t Allocate(size_t bytes) {
    uint64 limit = uint64(settings.rank_memory) * 1024 * 1024;
    if (pg_atomic_read_u64(&shared->rank_indexes->bytes) + bytes > limit) return 0;
    dsa_pointer p = dsa_allocate_extended(a, bytes, DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
    return DsaPointerIsValid(p) ? uint64_t(p) : 0;
  }
  void Free(uint64_t handle) { dsa_free(a, dsa_pointer(handle)); }
  void* Resolve(uint64_t handle) { return dsa_get_address(a, dsa_pointer(handle)); }
};

// Runs change(index, alloc) on slot s (the flusher's, under its lock EXCLUSIVE), accounting for
// the bytes it takes or gives back; marked broken meanwhile, so that an error halfway leaves it
// unused. The area is attached before any lock is taken (Area takes the registry lock).
template <typename Change>
bool ChangeIndex(dsa_area* a, RankIndexSlot& s, Change&& change) {
  DsaAllocator alloc{a};
  uint64 before = s.index.Bytes();
  s.state = kRankBroken;
  bool ok = change(alloc);
  int64 grown = int64(s.index.Bytes()) - int64(before);
  if (grown >= 0)
    pg_atomic_fetch_add_u64(&shared->rank_indexes->bytes, uint64(grown));
  else
    pg_atomic_fetch_sub_u64(&shared->rank_indexes->bytes, uint64(-grown));
  s.state = kRankReady;
  return ok;
}

// Frees slot i's index and the slot (or leaves the slot kRankRefused: over the memory limit,
// not to be asked for again until it goes as idle). Takes both locks.
void FreeSlot(int i, RankState next = kRankFree) {
  RankIndexes* r = shared->rank_indexes;
  RankIndexSlot& s = r->slots[i];
  // An index that holds anything was built in the area: attach it, never make one to free a slot.
  dsa_area* a = Area(false);
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  LWLockAcquire(s.lock, LW_EXCLUSIVE);
  if (a != nullptr && (s.index.Size() > 0 || s.index.Bytes() > 0)) {
    (void)ChangeIndex(a, s, [&](DsaAllocator& alloc) {
      s.index.Destroy(alloc);
      return true;
    });
  }
  s.state = next;
  if (next == kRankFree) {
    s.db = InvalidOid;
    s.counter = 0;
  }
  s.built_at = GetCurrentTimestamp();
  LWLockRelease(s.lock);
  LWLockRelease(r->lock);
}

SPIPlanPtr plan_build = nullptr;

// Builds slot i's index from the stored values of its counter (in the current transaction).
void BuildSlot(int i, int32 counter) {
  static const Oid type = INT4OID;
  SPIPlanPtr plan = KeptPlan(&plan_build,
                             "SELECT key, value FROM slotted_counter.totals "
                             "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket IS NULL "
                             "AND value OPERATOR(pg_catalog.<>) 0",
                             1, &type);
  Datum arg = Int32GetDatum(counter);
  if (SPI_execute_plan(plan, &arg, nullptr, true, 0) != SPI_OK_SELECT)
    elog(ERROR, "reading slotted_counter.totals failed");
  uint64 n = SPI_processed;
  auto* keys = static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * (n + 1)));
  auto* values = static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * (n + 1)));
  for (uint64 j = 0; j < n; j++) {
    if ((j & 65535) == 0) CHECK_FOR_INTERRUPTS();
    bool isnull;
    keys[j] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1, &isnull));
    values[j] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 2, &isnull));
  }
  RankIndexSlot& s = shared->rank_indexes->slots[i];
  dsa_area* a = Area(true);
  LWLockAcquire(shared->rank_indexes->lock, LW_EXCLUSIVE);
  LWLockAcquire(s.lock, LW_EXCLUSIVE);
  bool built = ChangeIndex(a, s, [&](DsaAllocator& alloc) {
    return s.index.Build(alloc, keys, values, size_t(n));
  });
  s.built_at = GetCurrentTimestamp();
  LWLockRelease(s.lock);
  LWLockRelease(shared->rank_indexes->lock);
  if (!built) FreeSlot(i, kRankRefused);
  pfree(keys);
  pfree(values);
}

// The slot of (db, counter) that is not free, or -1; under the registry lock.
int SlotOf(Oid db, int32 counter) {
  RankIndexes* r = shared->rank_indexes;
  for (int i = 0; i < kRankSlots; i++)
    if (r->slots[i].state != kRankFree && r->slots[i].db == db && r->slots[i].counter == counter)
      return i;
  return -1;
}

// Claims a free slot for def's counter as wanted, and wakes the flusher.
void AskForIndex(const CounterDef& def) {
  RankIndexes* r = shared->rank_indexes;
  bool claimed = false;
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  if (SlotOf(MyDatabaseId, def.id) < 0) {
    for (int i = 0; i < kRankSlots && !claimed; i++) {
      RankIndexSlot& s = r->slots[i];
      if (s.state != kRankFree) continue;
      s.db = MyDatabaseId;
      s.counter = def.id;
      s.state = kRankWanted;
      pg_atomic_write_u64(&s.used_at, uint64(GetCurrentTimestamp()));
      claimed = true;
    }
  }
  LWLockRelease(r->lock);
  if (claimed)
    if (DatabaseSlot* slot = EnsureFlusher()) WakeFlusher(slot);
}

}  // namespace

bool RankFromIndex(const CounterDef& def, int64 key, int64 value, int64* above) {
  RankIndexes* r = shared->rank_indexes;
  LWLockAcquire(r->lock, LW_SHARED);
  int i = SlotOf(MyDatabaseId, def.id);
  uint32 state = i >= 0 ? r->slots[i].state : kRankFree;
  bool mapped = r->area != DSM_HANDLE_INVALID;
  LWLockRelease(r->lock);
  if (i < 0) {
    AskForIndex(def);
    return false;
  }
  if (state != kRankReady || !mapped) return false;
  DsaAllocator alloc{Area(false)};
  RankIndexSlot& s = r->slots[i];
  bool answered = false;
  LWLockAcquire(s.lock, LW_SHARED);
  // (db, counter, state) change under both locks: under this one they stay as read here.
  if (s.db == MyDatabaseId && s.counter == def.id && s.state == kRankReady) {
    uint64 greater = s.index.CountGreater(alloc, value);
    int64 stored = 0;
    if (s.index.Find(alloc, key, &stored) && stored > value) greater--;
    *above = int64(greater);
    answered = true;
  }
  LWLockRelease(s.lock);
  if (answered) pg_atomic_write_u64(&s.used_at, uint64(GetCurrentTimestamp()));
  return answered;
}

bool RankIndexed(Oid db, int32 counter) {
  RankIndexes* r = shared->rank_indexes;
  for (int i = 0; i < kRankSlots; i++) {
    const RankIndexSlot& s = r->slots[i];
    // Read without the lock: a slot that turns ready after this misses nothing, as the flusher
    // that builds it is the one asking.
    if (s.db == db && s.counter == counter && s.state == kRankReady) return true;
  }
  return false;
}

int ReadyRankIndexes(Oid db) {
  RankIndexes* r = shared->rank_indexes;
  int ready = 0;
  LWLockAcquire(r->lock, LW_SHARED);
  for (int i = 0; i < kRankSlots; i++)
    if (r->slots[i].db == db && r->slots[i].state == kRankReady) ready++;
  LWLockRelease(r->lock);
  return ready;
}

bool AnyRankIndex(Oid db) {
  RankIndexes* r = shared->rank_indexes;
  for (int i = 0; i < kRankSlots; i++)
    if (r->slots[i].db == db && r->slots[i].state == kRankReady) return true;
  return false;
}

namespace {

void ApplyUpdates(Oid db, const RankUpdate* updates, int n) {
  RankIndexes* r = shared->rank_indexes;
  for (int first = 0; first < n;) {
    int end = first;
    while (end < n && updates[end].counter == updates[first].counter) end++;
    LWLockAcquire(r->lock, LW_SHARED);
    int i = SlotOf(db, updates[first].counter);
    LWLockRelease(r->lock);
    if (i >= 0) {
      RankIndexSlot& s = r->slots[i];
      dsa_area* a = Area(true);
      LWLockAcquire(s.lock, LW_EXCLUSIVE);
      bool fits = true;
      if (s.db == db && s.counter == updates[first].counter && s.state == kRankReady)
        fits = ChangeIndex(a, s, [&](DsaAllocator& alloc) {
          for (int j = first; j < end; j++) {
            if (updates[j].value == 0)
              (void)s.index.Remove(alloc, updates[j].key);
            else if (!s.index.Set(alloc, updates[j].key, updates[j].value))
              return false;
          }
          return true;
        });
      LWLockRelease(s.lock);
      // Over the memory limit: the index goes (the tables answer).
      if (!fits) FreeSlot(i, kRankRefused);
    }
    first = end;
  }
}

}  // namespace

// After a commit, outside any transaction: an error (a segment of the area that cannot be
// mapped) leaves the index it was changing kRankBroken, which no reader uses and the next
// maintenance frees; it is logged, and the flush that called stays committed.
void ApplyRankUpdates(Oid db, const RankUpdate* updates, int n) {
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    ApplyUpdates(db, updates, n);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    LWLockReleaseAll();
    EmitErrorReport();
    FlushErrorState();
  }
  PG_END_TRY();
}

void ForgetRankIndex(Oid db, int32 counter) {
  RankIndexes* r = shared->rank_indexes;
  LWLockAcquire(r->lock, LW_SHARED);
  int i = SlotOf(db, counter);
  LWLockRelease(r->lock);
  if (i >= 0) FreeSlot(i);
}

void MaintainRankIndexes(Oid db, bool starting) {
  RankIndexes* r = shared->rank_indexes;
  TimestampTz now = GetCurrentTimestamp();
  // Counters change (dropped, given buckets or a retention) only with the catalog epoch: the
  // ready indexes are checked against the catalog when it moved.
  static uint64 checked_epoch = 0;
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  bool check = epoch != checked_epoch;
  int look[kRankSlots];
  bool build[kRankSlots];
  int nlook = 0;
  for (int i = 0; i < kRankSlots; i++) {
    RankIndexSlot& s = r->slots[i];
    LWLockAcquire(r->lock, LW_SHARED);
    Oid slot_db = s.db;
    uint32 state = s.state;
    TimestampTz used = TimestampTz(pg_atomic_read_u64(&s.used_at));
    TimestampTz built = s.built_at;
    LWLockRelease(r->lock);
    if (state == kRankFree) continue;
    // Any flusher frees an idle index (its database may have no flusher any more); only db's
    // flusher frees or builds the others.
    if (TimestampDifferenceExceeds(used, now, int(kIdleMs))) {
      FreeSlot(i);
      continue;
    }
    if (slot_db != db) continue;
    // A flusher that took over frees what the last one built (it cannot know what that one
    // applied), and builds what was asked for.
    if ((starting && state != kRankWanted) || state == kRankBroken ||
        (state == kRankRefused && TimestampDifferenceExceeds(built, now, int(kIdleMs)))) {
      FreeSlot(i);
      continue;
    }
    bool due = state == kRankWanted ||
               (state == kRankReady && TimestampDifferenceExceeds(built, now, int(kIdleMs)));
    if (due || (check && state == kRankReady)) {
      look[nlook] = i;
      build[nlook++] = due;
    }
  }
  if (nlook > 0) {
    StartTransactionCommand();
    SPI_connect();
    PushActiveSnapshot(GetTransactionSnapshot());
    for (int j = 0; j < nlook; j++) {
      int i = look[j];
      int32 counter = r->slots[i].counter;
      const CounterDef* def = FindCounter(counter);
      if (def == nullptr || def->bucketed || KeysExpire(*def))
        FreeSlot(i);
      else if (build[j])
        BuildSlot(i, counter);
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
  }
  checked_epoch = epoch;
}

}  // namespace sc
