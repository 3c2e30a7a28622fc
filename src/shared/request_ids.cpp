// request_ids.cpp: the request ids of buffered sc_incr_once calls waiting for their flush (the
// protocol: request_ids.hpp). Parts of a chained hash table of fixed capacity in shared memory;
// every function takes a part's lock EXCLUSIVE for a few instructions and a look-up (a flush's
// take, for a chunk of a part at a time). An entry's index, outside this file, names its part
// and its place in it (IndexOf).
#include <algorithm>

#include "core/fair_share.hpp"
#include "shared/request_ids.hpp"

namespace sc {

namespace {

constexpr uint32 kNoEntry = UINT32_MAX;

uint32* Heads(RequestIdPart* t) {
  return reinterpret_cast<uint32*>(reinterpret_cast<char*>(t) + MAXALIGN(sizeof(RequestIdPart)));
}

RequestIdEntry* Entries(RequestIdPart* t) {
  return reinterpret_cast<RequestIdEntry*>(reinterpret_cast<char*>(Heads(t)) +
                                           MAXALIGN(sizeof(uint32) * t->nbuckets));
}

uint32 HashOf(Oid db, int32 counter, const char* id, int len) {
  uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(id), len);
  h = hash_combine(h, murmurhash32(uint32(counter)));
  return hash_combine(h, murmurhash32(db));
}

uint32 NBuckets(int capacity) {
  uint32 n = 1;
  while (n < uint32(capacity)) n <<= 1;
  return n;
}

// How many parts a table of `capacity` ids has: a power of two, each part at least kMinPartIds
// (one for a small table), at most kIdParts.
uint32 NParts(int capacity) {
  uint32 n = 1;
  while (n < kIdParts && uint32(capacity) / (n * 2) >= kMinPartIds) n <<= 1;
  return n;
}

// The capacity of part p: the table's split evenly, the remainder to the first parts.
uint32 PartCapacity(int capacity, uint32 nparts, uint32 p) {
  return uint32(capacity) / nparts + (p < uint32(capacity) % nparts ? 1 : 0);
}

Size PartSize(uint32 capacity) {
  Size size = MAXALIGN(sizeof(RequestIdPart));
  size = add_size(size, MAXALIGN(mul_size(sizeof(uint32), NBuckets(int(capacity)))));
  return MAXALIGN(add_size(size, mul_size(sizeof(RequestIdEntry), capacity)));
}

// The part an id's hash names (the low bits pick the bucket in it).
uint32 PartOf(const RequestIdTable* t, uint32 hash) { return (hash >> 24) & (t->nparts - 1); }

// An entry's index outside this file: its part in the top bits, its place in the part below.
constexpr int kPartShift = 26;
static_assert(10000000 < (1u << kPartShift) && kIdParts <= (1u << (32 - kPartShift)),
              "every place of the largest table (max_request_ids, module.cpp) fits below the part");
uint32 IndexOf(uint32 part, uint32 place) { return (part << kPartShift) | place; }
uint32 PartOfIndex(uint32 index) { return index >> kPartShift; }
uint32 PlaceOfIndex(uint32 index) { return index & ((uint32(1) << kPartShift) - 1); }

// How many entries a flush's take looks at under one hold of a part's lock.
constexpr uint32 kTakeChunk = 1024;

bool Unflushed(uint32 state) {
  return state == kIdApplying || state == kIdPending || state == kIdTaken;
}

// db's cell in holders, or (with take) a free one made db's; nullptr if none.
IdHolder* HolderOf(RequestIdPart* t, Oid db, bool take) {
  IdHolder* free_cell = nullptr;
  for (IdHolder& h : t->holders) {
    if (h.db == db && h.unflushed > 0) return &h;
    if (h.unflushed == 0 && free_cell == nullptr) free_cell = &h;
  }
  if (!take || free_cell == nullptr) return nullptr;
  free_cell->db = db;
  return free_cell;
}

// Every change of an entry's state: db's count of unflushed ids follows.
// Returns how many unflushed ids the entry's database holds in the part now, if the change
// counted it (0 otherwise).
uint32 SetState(RequestIdPart* t, RequestIdEntry& e, uint32 state) {
  bool was = Unflushed(e.state), is = Unflushed(state);
  t->pending += (state == kIdPending ? 1 : 0) - (e.state == kIdPending ? 1 : 0);
  e.state = state;
  if (was == is) return 0;
  IdHolder* h = HolderOf(t, e.db, is);
  if (h == nullptr) return 0;  // beyond the cells: not counted
  if (is) {
    h->unflushed++;
  } else {
    Assert(h->unflushed > 0);
    h->unflushed--;
  }
  return h->unflushed;
}

// The part as db sees it under the fair share (core/fair_share.hpp).
ShareView ViewOfPart(RequestIdPart* t, Oid db) {
  Holding holdings[kIdHolders];
  int n = 0;
  for (const IdHolder& h : t->holders)
    if (h.unflushed > 0) holdings[n++] = Holding{h.db, h.unflushed};
  return ViewOf(holdings, size_t(n), db, t->capacity, PoolKind::kHeldUntilDone);
}


void Unlink(RequestIdPart* t, uint32 index) {
  RequestIdEntry* es = Entries(t);
  uint32* link = &Heads(t)[es[index].hash & (t->nbuckets - 1)];
  while (*link != kNoEntry && *link != index) link = &es[*link].next;
  if (*link == index) *link = es[index].next;
}

void Free(RequestIdPart* t, uint32 index) {
  RequestIdEntry* es = Entries(t);
  Unlink(t, index);
  SetState(t, es[index], kIdFree);
  es[index].next = t->free_head;
  t->free_head = index;
  t->used--;
}

// A free entry, or a kDurable one (its id is in the table) taken from its chain, for the database
// that sees the part as `view`; kNoEntry if none, or none that it may take.
uint32 TakeEntry(RequestIdPart* t, const ShareView& view) {
  RequestIdEntry* es = Entries(t);
  if (!MayTakeFree(view, 1)) return kNoEntry;
  if (t->free_head != kNoEntry) {
    uint32 index = t->free_head;
    t->free_head = es[index].next;
    t->used++;
    return index;
  }
  if (!t->durable_possible) return kNoEntry;
  for (uint32 n = 0; n < t->capacity; n++) {
    uint32 index = t->clock;
    t->clock = (t->clock + 1) % t->capacity;
    if (es[index].state == kIdDurable) {
      Unlink(t, index);
      return index;
    }
  }
  t->durable_possible = false;
  return kNoEntry;
}

IdLookup PartLookUp(RequestIdPart* t, uint32 hash, Oid db, int32 counter, const char* id, int len,
                    TimestampTz now, int64 window_us, int64* result, uint32* index,
                    bool* flush_due) {
  RequestIdEntry* es = Entries(t);
  IdLookup outcome = IdLookup::kOwned;
  *flush_due = false;
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  uint32 found = kNoEntry;
  for (uint32 i = Heads(t)[hash & (t->nbuckets - 1)]; i != kNoEntry; i = es[i].next)
    if (es[i].hash == hash && es[i].db == db && es[i].counter == counter && es[i].len == len &&
        memcmp(es[i].id, id, len) == 0) {
      found = i;
      break;
    }
  bool expired = found != kNoEntry && es[found].state != kIdApplying &&
                 es[found].applied_at < now - window_us;
  if (found != kNoEntry && es[found].state == kIdApplying) {
    outcome = IdLookup::kBusy;
  } else if (found != kNoEntry && es[found].state == kIdTaken && expired) {
    outcome = IdLookup::kBusy;  // until its flush settles it
  } else if (found != kNoEntry && !expired) {
    *result = es[found].result;
    outcome = IdLookup::kKnown;
  } else {
    // Not known, or known too long ago: this call applies it.
    // db's share is the same before and after its take: it is counted a party either way.
    ShareView view = ViewOfPart(t, db);
    uint32 e = found != kNoEntry ? found : TakeEntry(t, view);
    if (e == kNoEntry) {
      outcome = IdLookup::kFull;
    } else {
      if (found == kNoEntry) {
        es[e].hash = hash;
        es[e].state = kIdFree;  // counted as db's below, whatever it held before
        es[e].db = db;
        es[e].counter = counter;
        es[e].len = uint16(len);
        memcpy(es[e].id, id, len);
        es[e].id[len] = '\0';
        uint32* head = &Heads(t)[hash & (t->nbuckets - 1)];
        es[e].next = *head;
        *head = e;
      }
      uint32 held = SetState(t, es[e], kIdApplying);
      es[e].owner_pid = MyProcPid;
      *index = e;
      // Half its share reached with this take: a flush now writes the ids before the part fills.
      *flush_due = held == std::max<uint64>(view.share / 2, 1);
    }
  }
  LWLockRelease(t->lock);
  return outcome;
}

void PartKnown(RequestIdPart* t, uint32 index, int64 result, TimestampTz applied_at) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  e.result = result;
  e.applied_at = applied_at;
  SetState(t, e, kIdDurable);
  t->durable_possible = true;
  LWLockRelease(t->lock);
}

void PartApplied(RequestIdPart* t, uint32 index, int64 key, int64 bucket, int64 result,
                 TimestampTz at) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  e.key = key;
  e.bucket = bucket;
  e.result = result;
  e.applied_at = at;
  SetState(t, e, kIdPending);
  LWLockRelease(t->lock);
}

void PartAbandon(RequestIdPart* t, uint32 index) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  if (e.state == kIdApplying && e.owner_pid == MyProcPid) Free(t, index);
  LWLockRelease(t->lock);
}

// What a flush's take found in one part before it marks anything (PartSurvey): how many ids of
// its database are pending there, and those on keys the step did not claim, in index order,
// each with whether its key holds nothing unflushed.
struct OtherId {
  uint32 index;
  bool settled;
};
struct PartSurveyed {
  int n;             // pending ids of db, claimed keys or not (at most this many are marked)
  OtherId* others;   // palloc'd, nothers of them
  int nothers;
};

bool PendingOf(const RequestIdEntry& e, Oid db) { return e.state == kIdPending && e.db == db; }

bool Claimed(const RequestIdEntry& e, Oid db, const CounterKey* keys, int nkeys) {
  return std::binary_search(keys, keys + nkeys, CounterKey{uint32(db), e.counter, e.key, e.bucket},
                            KeyBefore);
}

// Counts the part's pending ids of db and asks settled() of those on unclaimed keys (with no
// lock of the table held: the buffer's partition locks come after the apply lock, as in a
// call). Allocates; marks nothing. No id of db turns kPending meanwhile (the caller holds db's
// apply lock); one may go (a drop): fewer are then marked than counted.
PartSurveyed PartSurvey(RequestIdPart* t, Oid db, const CounterKey* keys, int nkeys,
                        bool (*settled)(const CounterKey& key)) {
  RequestIdEntry* es = Entries(t);
  PartSurveyed survey{0, nullptr, 0};
  // A part with no pending id (of any database) has none to give: most parts, most flushes, where
  // sc_incr_once is not called.
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  uint32 pending = t->pending;
  LWLockRelease(t->lock);
  if (pending == 0) return survey;
  // One pass: db's pending ids are at most the part's now, and none of db's turns kPending
  // meanwhile, so there is room for every one on an unclaimed key.
  survey.others = static_cast<OtherId*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(OtherId) * pending));
  auto* other_keys = static_cast<CounterKey*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(CounterKey) * pending));
  for (uint32 first = 0; first < t->capacity; first += kTakeChunk) {
    uint32 end = Min(t->capacity, first + kTakeChunk);
    LWLockAcquire(t->lock, LW_EXCLUSIVE);
    for (uint32 i = first; i < end; i++) {
      if (!PendingOf(es[i], db)) continue;
      survey.n++;
      if (Claimed(es[i], db, keys, nkeys) || uint32(survey.nothers) == pending) continue;
      other_keys[survey.nothers] = CounterKey{uint32(db), es[i].counter, es[i].key, es[i].bucket};
      survey.others[survey.nothers++] = OtherId{i, false};
    }
    LWLockRelease(t->lock);
  }
  Assert(uint32(survey.n) <= pending);
  for (int j = 0; j < survey.nothers; j++) survey.others[j].settled = settled(other_keys[j]);
  pfree(other_keys);
  if (survey.nothers == 0) {
    pfree(survey.others);
    survey.others = nullptr;
  }
  return survey;
}

// Marks kTaken the part's pending ids of db that are on claimed keys or on settled ones (as
// surveyed), at most `room` of them, and copies each into taken[] with its text in ids (room
// texts of kMaxRequestIdLen + 1 bytes). Allocates nothing and cannot fail. Returns how many.
int PartMark(RequestIdPart* t, uint32 part, Oid db, const CounterKey* keys, int nkeys,
             const PartSurveyed& survey, TakenRequestId* taken, char* ids, int room) {
  RequestIdEntry* es = Entries(t);
  auto settled_other = [&](uint32 i) {
    const OtherId* o = std::lower_bound(
        survey.others, survey.others + survey.nothers, i,
        [](const OtherId& x, uint32 index) { return x.index < index; });
    return o != survey.others + survey.nothers && o->index == i && o->settled;
  };
  int copied = 0;
  for (uint32 first = 0; first < t->capacity && copied < room; first += kTakeChunk) {
    uint32 end = Min(t->capacity, first + kTakeChunk);
    LWLockAcquire(t->lock, LW_EXCLUSIVE);
    for (uint32 i = first; i < end && copied < room; i++) {
      RequestIdEntry& e = es[i];
      if (!PendingOf(e, db) || !(Claimed(e, db, keys, nkeys) || settled_other(i))) continue;
      e.state = kIdTaken;  // unflushed still: db's count stays
      t->pending--;
      e.owner_pid = MyProcPid;
      char* copy = ids + size_t(copied) * (kMaxRequestIdLen + 1);
      memcpy(copy, e.id, e.len + 1);
      taken[copied++] = TakenRequestId{IndexOf(part, i), e.counter, e.key,       e.bucket,
                                       e.result,         e.applied_at, copy};
    }
    LWLockRelease(t->lock);
  }
  return copied;
}

void PartSettle(RequestIdPart* t, const TakenRequestId* taken, int n, bool committed) {
  RequestIdEntry* es = Entries(t);
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (int i = 0; i < n; i++) {
    RequestIdEntry& e = es[PlaceOfIndex(taken[i].index)];
    if (e.state == kIdTaken) SetState(t, e, committed ? kIdDurable : kIdPending);
  }
  if (committed && n > 0) t->durable_possible = true;
  LWLockRelease(t->lock);
}

uint32 PartCopyUnflushed(RequestIdPart* t, RequestIdEntry* out) {
  const RequestIdEntry* es = Entries(t);
  uint32 n = 0;
  for (uint32 i = 0; i < t->capacity; i++)
    if (es[i].state == kIdPending || es[i].state == kIdTaken) out[n++] = es[i];
  return n;
}

bool PartRestore(RequestIdPart* t, uint32 hash, const RequestIdEntry& saved) {
  Assert(saved.state == kIdPending || saved.state == kIdTaken);
  RequestIdEntry* es = Entries(t);
  if (t->free_head == kNoEntry) return false;
  uint32 e = t->free_head;  // the start's restore: every saved id goes back, shares or not
  t->free_head = es[e].next;
  t->used++;
  es[e] = saved;
  es[e].hash = hash;
  es[e].state = kIdFree;
  SetState(t, es[e], kIdPending);
  es[e].owner_pid = 0;
  uint32* head = &Heads(t)[es[e].hash & (t->nbuckets - 1)];
  es[e].next = *head;
  *head = e;
  return true;
}

uint32 PartUnflushed(RequestIdPart* t, Oid db) {
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  IdHolder* h = HolderOf(t, db, false);
  uint32 n = h != nullptr ? h->unflushed : 0;
  LWLockRelease(t->lock);
  return n;
}

void PartForget(RequestIdPart* t, Oid db, int32 counter) {
  RequestIdEntry* es = Entries(t);
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (uint32 i = 0; i < t->capacity; i++)
    if (es[i].state != kIdFree && es[i].db == db && (counter == 0 || es[i].counter == counter) &&
        es[i].state != kIdApplying && es[i].state != kIdTaken)
      Free(t, i);
  LWLockRelease(t->lock);
}

}  // namespace

Size RequestIdTableSize(int capacity) {
  uint32 nparts = NParts(capacity);
  Size size = MAXALIGN(sizeof(RequestIdTable));
  for (uint32 p = 0; p < nparts; p++)
    size = add_size(size, PartSize(PartCapacity(capacity, nparts, p)));
  return size;
}

RequestIdTable* CreateRequestIdTable(void* mem, int capacity, LWLockPadded* part_locks,
                                     LWLockPadded* apply_locks) {
  auto* table = static_cast<RequestIdTable*>(mem);
  for (int i = 0; i < kApplyLocks; i++) table->apply_locks[i] = &apply_locks[i].lock;
  table->capacity = uint32(capacity);
  table->nparts = NParts(capacity);
  char* next = static_cast<char*>(mem) + MAXALIGN(sizeof(RequestIdTable));
  for (uint32 p = 0; p < kIdParts; p++) table->parts[p] = nullptr;
  for (uint32 p = 0; p < table->nparts; p++) {
    auto* t = reinterpret_cast<RequestIdPart*>(next);
    table->parts[p] = t;
    t->lock = &part_locks[p].lock;
    for (IdHolder& h : t->holders) h = IdHolder{InvalidOid, 0};
    t->capacity = PartCapacity(capacity, table->nparts, p);
    t->nbuckets = NBuckets(int(t->capacity));
    t->clock = 0;
    t->used = 0;
    t->pending = 0;
    t->durable_possible = false;
    for (uint32 b = 0; b < t->nbuckets; b++) Heads(t)[b] = kNoEntry;
    RequestIdEntry* es = Entries(t);
    for (uint32 i = 0; i < t->capacity; i++) {
      memset(static_cast<void*>(&es[i]), 0, offsetof(RequestIdEntry, id));
      es[i].state = kIdFree;
      es[i].next = i + 1 < t->capacity ? i + 1 : kNoEntry;
    }
    t->free_head = t->capacity > 0 ? 0 : kNoEntry;
    next += PartSize(t->capacity);
  }
  return table;
}

IdLookup LookUpRequestId(RequestIdTable* t, Oid db, int32 counter, const char* id, int len,
                         TimestampTz now, int64 window_us, int64* result, uint32* index,
                         bool* flush_due) {
  uint32 hash = HashOf(db, counter, id, len);
  uint32 part = PartOf(t, hash);
  uint32 place = 0;
  IdLookup outcome = PartLookUp(t->parts[part], hash, db, counter, id, len, now, window_us, result,
                                &place, flush_due);
  if (outcome == IdLookup::kOwned) *index = IndexOf(part, place);
  return outcome;
}

void KnownRequestId(RequestIdTable* t, uint32 index, int64 result, TimestampTz applied_at) {
  PartKnown(t->parts[PartOfIndex(index)], PlaceOfIndex(index), result, applied_at);
}

void AppliedRequestId(RequestIdTable* t, uint32 index, int64 key, int64 bucket, int64 result,
                      TimestampTz at) {
  PartApplied(t->parts[PartOfIndex(index)], PlaceOfIndex(index), key, bucket, result, at);
}

void AbandonRequestId(RequestIdTable* t, uint32 index) {
  PartAbandon(t->parts[PartOfIndex(index)], PlaceOfIndex(index));
}

int TakePendingRequestIds(RequestIdTable* t, Oid db, const CounterKey* keys, int nkeys,
                          bool (*settled)(const CounterKey& key), TakenRequestId** out) {
  // Every part surveyed and everything allocated first, then the marks (which cannot fail): an
  // error leaves no id taken that the step does not know of.
  PartSurveyed surveys[kIdParts];
  int n = 0;
  for (uint32 p = 0; p < t->nparts; p++) {
    surveys[p] = PartSurvey(t->parts[p], db, keys, nkeys, settled);
    n += surveys[p].n;
  }
  *out = nullptr;
  if (n == 0) return 0;
  auto* taken = static_cast<TakenRequestId*>(palloc(sizeof(TakenRequestId) * n));
  char* ids = static_cast<char*>(palloc(size_t(n) * (kMaxRequestIdLen + 1)));
  int copied = 0;
  for (uint32 p = 0; p < t->nparts; p++)
    if (surveys[p].n > 0)
      copied += PartMark(t->parts[p], p, db, keys, nkeys, surveys[p], taken + copied,
                         ids + size_t(copied) * (kMaxRequestIdLen + 1), surveys[p].n);
  for (uint32 p = 0; p < t->nparts; p++)
    if (surveys[p].others != nullptr) pfree(surveys[p].others);
  *out = taken;
  return copied;
}

void SettleRequestIds(RequestIdTable* t, const TakenRequestId* taken, int n, bool committed) {
  // A run of the same part at a time (TakePendingRequestIds returns them in part order).
  for (int first = 0; first < n;) {
    uint32 part = PartOfIndex(taken[first].index);
    int end = first + 1;
    while (end < n && PartOfIndex(taken[end].index) == part) end++;
    PartSettle(t->parts[part], taken + first, end - first, committed);
    first = end;
  }
}

uint32 CopyUnflushedRequestIds(const RequestIdTable* t, RequestIdEntry* out) {
  uint32 n = 0;
  for (uint32 p = 0; p < t->nparts; p++) n += PartCopyUnflushed(t->parts[p], out + n);
  return n;
}

bool RestoreRequestId(RequestIdTable* t, const RequestIdEntry& saved) {
  uint32 hash = HashOf(saved.db, saved.counter, saved.id, saved.len);
  return PartRestore(t->parts[PartOf(t, hash)], hash, saved);
}

uint32 UnflushedRequestIds(RequestIdTable* t, Oid db) {
  uint32 n = 0;
  for (uint32 p = 0; p < t->nparts; p++) n += PartUnflushed(t->parts[p], db);
  return n;
}

void ForgetRequestIds(RequestIdTable* t, Oid db, int32 counter) {
  for (uint32 p = 0; p < t->nparts; p++) PartForget(t->parts[p], db, counter);
}

}  // namespace sc
