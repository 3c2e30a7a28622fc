// rank_indexes.cpp: the rank indexes of sc_rank in a DSA area (the protocol: rank_indexes.hpp).
#include "buffer/rank_indexes.hpp"

#include "core/fair_share.hpp"
#include "definitions/expiry.hpp"
#include "definitions/guards.hpp"
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

uint64 LimitBytes() { return uint64(settings.rank_memory) * 1024 * 1024; }

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
    if (pg_atomic_read_u64(&shared->rank_indexes->bytes) + bytes > LimitBytes()) return 0;
    dsa_pointer p = dsa_allocate_extended(a, bytes, DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
    return DsaPointerIsValid(p) ? uint64_t(p) : 0;
  }
  void Free(uint64_t handle) { dsa_free(a, dsa_pointer(handle)); }
  void* Resolve(uint64_t handle) { return dsa_get_address(a, dsa_pointer(handle)); }
};

// Runs change(index, alloc) on slot s (under its lock EXCLUSIVE), accounting for the bytes it
// takes or gives back; marked broken meanwhile, so that an error halfway leaves it unused. The
// area is attached before any lock is taken (Area takes the registry lock).
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
  pg_atomic_write_u64(&s.bytes, s.index.Bytes());
  s.state = kRankReady;
  return ok;
}

// Frees slot i's index and leaves the slot `next`: kRankFree, or kRankRefused for its counter
// (wanting `want` bytes). Under both locks, taken by the caller.
void ClearLocked(dsa_area* a, RankIndexSlot& s, RankState next, uint64 want = 0) {
  // An index that holds anything was built in the area, which the caller attached.
  if (a != nullptr && (s.index.Size() > 0 || s.index.Bytes() > 0)) {
    (void)ChangeIndex(a, s, [&](DsaAllocator& alloc) {
      s.index.Destroy(alloc);
      return true;
    });
  }
  s.state = next;
  s.want = want;
  if (next == kRankFree) {
    s.db = InvalidOid;
    s.counter = 0;
    s.owner = InvalidOid;
  }
  s.built_at = GetCurrentTimestamp();
}

// Frees slot i if it is still (db, counter)'s, as ClearLocked. Takes both locks.
void FreeSlot(int i, Oid db, int32 counter, RankState next = kRankFree, uint64 want = 0) {
  RankIndexes* r = shared->rank_indexes;
  RankIndexSlot& s = r->slots[i];
  // Attach the area to free what was built in it, never make one to free a slot.
  dsa_area* a = Area(false);
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  LWLockAcquire(s.lock, LW_EXCLUSIVE);
  if (s.state != kRankFree && s.db == db && s.counter == counter) ClearLocked(a, s, next, want);
  LWLockRelease(s.lock);
  LWLockRelease(r->lock);
}

// ---- the fair shares (the protocol in rank_indexes.hpp), all under the registry lock ----

// A slot that holds its place and its index's bytes (a refused one is a note, a free one none).
bool Holds(const RankIndexSlot& s) {
  return s.state == kRankWanted || s.state == kRankReady || s.state == kRankBroken;
}

uint64 AmountOf(RankIndexSlot& s, bool bytes) {
  return bytes ? pg_atomic_read_u64(&s.bytes) : 1;
}

// What each database holds (roles_of InvalidOid), or each role within database roles_of: slots,
// or bytes. Returns how many parties.
int Holdings(bool bytes, Oid roles_of, Holding* out) {
  RankIndexes* r = shared->rank_indexes;
  int n = 0;
  for (RankIndexSlot& s : r->slots) {
    if (!Holds(s) || (roles_of != InvalidOid && s.db != roles_of)) continue;
    uint64 party = roles_of != InvalidOid ? s.owner : s.db;
    int j = 0;
    while (j < n && out[j].party != party) j++;
    if (j == n) out[n++] = Holding{party, 0};
    out[j].held += AmountOf(s, bytes);
  }
  return n;
}

// The pool (slots, or bytes) as database db sees it, and as role owner within db sees db's part:
// its share, or what it holds if more.
struct Views {
  ShareView db;
  ShareView role;
};
Views ViewsOf(bool bytes, Oid db, Oid owner) {
  Holding h[kRankSlots];
  uint64 capacity = bytes ? LimitBytes() : uint64(kRankSlots);
  Views v;
  v.db = ViewOf(h, size_t(Holdings(bytes, InvalidOid, h)), db, capacity, PoolKind::kTakesBack);
  v.role = ViewOf(h, size_t(Holdings(bytes, db, h)), owner, Max(v.db.share, v.db.held),
                  PoolKind::kTakesBack);
  return v;
}

// The slot (db, owner) may take back for `want` more (slots or bytes), other than `except`: the
// least recently used of a database above its share, if db is within its own; else of a role of
// db above its share, if owner is within its own; -1 if none.
int VictimFor(bool bytes, Oid db, Oid owner, uint64 want, int except) {
  RankIndexes* r = shared->rank_indexes;
  Views v = ViewsOf(bytes, db, owner);
  for (int level = 0; level < 2; level++) {
    bool roles = level == 1;
    if (!MayTakeBack(roles ? v.role : v.db, want)) continue;
    uint64 share = roles ? v.role.share : v.db.share;
    Holding h[kRankSlots];
    int n = Holdings(bytes, roles ? db : InvalidOid, h);
    int victim = -1;
    uint64 oldest = 0;
    for (int i = 0; i < kRankSlots; i++) {
      RankIndexSlot& s = r->slots[i];
      if (i == except || !Holds(s) || AmountOf(s, bytes) == 0 || (roles && s.db != db)) continue;
      uint64 party = roles ? s.owner : s.db;
      bool above = false;
      for (int j = 0; j < n; j++)
        if (h[j].party == party) above = AboveShare(h[j].held, share);
      uint64 used = pg_atomic_read_u64(&s.used_at);
      if (above && (victim < 0 || used < oldest)) {
        victim = i;
        oldest = used;
      }
    }
    if (victim >= 0) return victim;
  }
  return -1;
}

// Frees indexes of parties above their share until `want` more bytes fit in rank_memory, for
// slot `mine` of (db, owner), within its share; whether they fit. Takes the victims' locks.
bool MakeRoomLocked(dsa_area* a, Oid db, Oid owner, uint64 want, int mine) {
  RankIndexes* r = shared->rank_indexes;
  while (pg_atomic_read_u64(&r->bytes) + want > LimitBytes()) {
    // Within its share by what it holds (an index being built again holds its old contents
    // meanwhile) and what it wants.
    int victim = VictimFor(true, db, owner, want, mine);
    if (victim < 0) return false;
    RankIndexSlot& s = r->slots[victim];
    LWLockAcquire(s.lock, LW_EXCLUSIVE);
    ClearLocked(a, s, kRankFree);
    LWLockRelease(s.lock);
  }
  return true;
}

// Whether a refused index of (db, owner) wanting `want` bytes would now fit: free, or to be made
// room for within its share.
bool WouldFit(Oid db, Oid owner, uint64 want) {
  if (pg_atomic_read_u64(&shared->rank_indexes->bytes) + want <= LimitBytes()) return true;
  Views v = ViewsOf(true, db, owner);
  return MayTakeBack(v.db, want) || MayTakeBack(v.role, want);
}

SPIPlanPtr plan_build = nullptr;

SPIPlanPtr plan_build_lock = nullptr;

// Builds slot i's index of (db, counter) from the stored values of its counter (in the current
// transaction), unless the slot was taken back meanwhile. Not while a large commit of the counter
// writes its rows (transactions/large_commit.hpp: it holds the counter FOR UPDATE, and forgets
// the index): the slot stays wanted, for the next pass; its rows are read after the lock, in a
// snapshot of their own.
void BuildSlot(int i, Oid db, int32 counter) {
  static const Oid type = INT4OID;
  SPIPlanPtr lock = KeptPlan(&plan_build_lock,
                             "SELECT FROM slotted_counter.counters "
                             "WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE SKIP LOCKED",
                             1, &type);
  Datum id = Int32GetDatum(counter);
  if (SPI_execute_plan(lock, &id, nullptr, false, 1) != SPI_OK_SELECT)
    elog(ERROR, "locking the counter failed");
  if (SPI_processed == 0) return;
  SPIPlanPtr plan = KeptPlan(&plan_build,
                             "SELECT key, value FROM slotted_counter.key_values "
                             "WHERE counter OPERATOR(pg_catalog.=) $1 "
                             "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " "
                             "AND value OPERATOR(pg_catalog.<>) 0",
                             1, &type);
  Datum arg = Int32GetDatum(counter);
  if (SPI_execute_plan(plan, &arg, nullptr, false, 0) != SPI_OK_SELECT)
    elog(ERROR, "reading slotted_counter.key_values failed");
  uint64 n = SPI_processed;
  auto* keys = static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * (n + 1)));
  auto* values = static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * (n + 1)));
  for (uint64 j = 0; j < n; j++) {
    if ((j & 65535) == 0) CHECK_FOR_INTERRUPTS();
    bool isnull;
    keys[j] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1, &isnull));
    values[j] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 2, &isnull));
  }
  uint64 want = RankIndex::BuildBytes(n);
  RankIndexes* r = shared->rank_indexes;
  RankIndexSlot& s = r->slots[i];
  dsa_area* a = Area(true);
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  bool mine = s.db == db && s.counter == counter &&
              (s.state == kRankWanted || s.state == kRankReady);
  bool built = false;
  if (mine) {
    (void)MakeRoomLocked(a, db, s.owner, want, i);
    LWLockAcquire(s.lock, LW_EXCLUSIVE);
    built = ChangeIndex(a, s, [&](DsaAllocator& alloc) {
      return s.index.Build(alloc, keys, values, size_t(n));
    });
    s.built_at = GetCurrentTimestamp();
    if (!built) ClearLocked(a, s, kRankRefused, want);
    LWLockRelease(s.lock);
  }
  LWLockRelease(r->lock);
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

// A slot that nobody holds: a free one, or else the oldest refusal; -1 if none. Under the
// registry lock.
int UnheldSlot() {
  RankIndexes* r = shared->rank_indexes;
  int found = -1;
  for (int i = 0; i < kRankSlots; i++) {
    const RankIndexSlot& s = r->slots[i];
    if (s.state == kRankFree) return i;
    if (s.state == kRankRefused && (found < 0 || s.built_at < r->slots[found].built_at)) found = i;
  }
  return found;
}

// Claims a slot for def's counter as wanted (an unheld one, or one taken back under the fair
// share), and wakes the flusher. `refused`: the counter's refused slot, whose index would now
// fit, is wanted again instead.
void AskForIndex(const CounterDef& def, int refused = -1) {
  RankIndexes* r = shared->rank_indexes;
  Oid owner = GuardOwner(def.guard);
  dsa_area* a = Area(false);  // before the registry lock: a slot taken back frees its index
  bool claimed = false;
  LWLockAcquire(r->lock, LW_EXCLUSIVE);
  int i = SlotOf(MyDatabaseId, def.id);
  if (refused >= 0 && i == refused && r->slots[i].state == kRankRefused &&
      WouldFit(MyDatabaseId, r->slots[i].owner, r->slots[i].want)) {
    claimed = true;
  } else if (i < 0) {
    i = UnheldSlot();
    Views v = ViewsOf(false, MyDatabaseId, owner);
    if (i < 0 || !MayTakeFree(v.db, 1)) i = VictimFor(false, MyDatabaseId, owner, 1, -1);
    claimed = i >= 0;
  }
  if (claimed) {
    RankIndexSlot& s = r->slots[i];
    LWLockAcquire(s.lock, LW_EXCLUSIVE);
    if (s.state != kRankRefused || s.db != MyDatabaseId || s.counter != def.id)
      ClearLocked(a, s, kRankFree);
    s.db = MyDatabaseId;
    s.counter = def.id;
    s.owner = owner;
    s.state = kRankWanted;
    s.want = 0;
    pg_atomic_write_u64(&s.used_at, uint64(GetCurrentTimestamp()));
    LWLockRelease(s.lock);
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
  bool retry = state == kRankRefused && WouldFit(MyDatabaseId, r->slots[i].owner, r->slots[i].want);
  bool mapped = r->area != DSM_HANDLE_INVALID;
  LWLockRelease(r->lock);
  if (i < 0 || retry) {
    AskForIndex(def, i);
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
    int32 counter = updates[first].counter;
    while (end < n && updates[end].counter == counter) end++;
    LWLockAcquire(r->lock, LW_SHARED);
    int i = SlotOf(db, counter);
    LWLockRelease(r->lock);
    if (i >= 0) {
      RankIndexSlot& s = r->slots[i];
      dsa_area* a = Area(true);
      // A change over rank_memory makes room and is done again once (its updates again from the
      // first: a Set or Remove done twice leaves what it did once).
      for (int attempt = 0; attempt < 2; attempt++) {
        LWLockAcquire(s.lock, LW_EXCLUSIVE);
        bool ours = s.db == db && s.counter == counter && s.state == kRankReady;
        bool fits = !ours || ChangeIndex(a, s, [&](DsaAllocator& alloc) {
          for (int j = first; j < end; j++) {
            if (updates[j].value == 0)
              (void)s.index.Remove(alloc, updates[j].key);
            else if (!s.index.Set(alloc, updates[j].key, updates[j].value))
              return false;
          }
          return true;
        });
        uint64 held = s.index.Bytes();
        Oid owner = s.owner;
        LWLockRelease(s.lock);
        if (fits) break;
        // Room from the parties above their share, if this one is within its own by one growth
        // of its map more; otherwise the index goes (the tables answer), refused until that fits.
        uint64 more = held / 2 + 2 * uint64(kRankBlockValues) * sizeof(int64);
        bool room = false;
        if (attempt == 0) {
          LWLockAcquire(r->lock, LW_EXCLUSIVE);
          room = s.db == db && s.counter == counter && MakeRoomLocked(a, db, owner, more, i);
          LWLockRelease(r->lock);
        }
        if (!room) {
          FreeSlot(i, db, counter, kRankRefused, held + more);
          break;
        }
      }
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
  if (i >= 0) FreeSlot(i, db, counter);
}

void MaintainRankIndexes(Oid db, bool starting) {
  RankIndexes* r = shared->rank_indexes;
  TimestampTz now = GetCurrentTimestamp();
  // Counters change (dropped, given buckets or a retention) only with the catalog epoch: the
  // slots of db's counters (refusals included) are checked against the catalog when it moved.
  static uint64 checked_epoch = 0;
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  bool check = epoch != checked_epoch;
  int look[kRankSlots];
  int32 counters[kRankSlots];
  bool build[kRankSlots];
  int nlook = 0;
  for (int i = 0; i < kRankSlots; i++) {
    RankIndexSlot& s = r->slots[i];
    LWLockAcquire(r->lock, LW_SHARED);
    Oid slot_db = s.db;
    int32 counter = s.counter;
    uint32 state = s.state;
    TimestampTz used = TimestampTz(pg_atomic_read_u64(&s.used_at));
    TimestampTz built = s.built_at;
    LWLockRelease(r->lock);
    if (state == kRankFree) continue;
    // Any flusher frees an idle index (its database may have no flusher any more); only db's
    // flusher frees or builds the others.
    if (TimestampDifferenceExceeds(used, now, int(kIdleMs))) {
      FreeSlot(i, slot_db, counter);
      continue;
    }
    if (slot_db != db) continue;
    // A flusher that took over frees what the last one built (it cannot know what that one
    // applied), and builds what was asked for.
    if ((starting && state != kRankWanted) || state == kRankBroken ||
        (state == kRankRefused && TimestampDifferenceExceeds(built, now, int(kIdleMs)))) {
      FreeSlot(i, db, counter);
      continue;
    }
    bool due = state == kRankWanted ||
               (state == kRankReady && TimestampDifferenceExceeds(built, now, int(kIdleMs)));
    if (due || check) {
      look[nlook] = i;
      counters[nlook] = counter;
      build[nlook++] = due;
    }
  }
  if (nlook > 0) {
    StartTransactionCommand();
    SPI_connect();
    PushActiveSnapshot(GetTransactionSnapshot());
    for (int j = 0; j < nlook; j++) {
      const CounterDef* def = FindCounter(counters[j]);
      if (def == nullptr || def->bucketed || KeysExpire(*def))
        FreeSlot(look[j], db, counters[j]);
      else if (build[j])
        BuildSlot(look[j], db, counters[j]);
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
  }
  checked_epoch = epoch;
}

}  // namespace sc
