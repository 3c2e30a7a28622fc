// request_ids.cpp: the request ids of buffered sc_incr_once calls waiting for their flush (the
// protocol: request_ids.hpp). A chained hash table of fixed capacity in shared memory; every
// function takes request_ids_lock EXCLUSIVE for a few instructions and a look-up.
#include <algorithm>

#include "shared/request_ids.hpp"

namespace sc {

namespace {

constexpr uint32 kNoEntry = UINT32_MAX;

uint32* Heads(RequestIdTable* t) {
  return reinterpret_cast<uint32*>(reinterpret_cast<char*>(t) + MAXALIGN(sizeof(RequestIdTable)));
}

RequestIdEntry* Entries(RequestIdTable* t) {
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

void Unlink(RequestIdTable* t, uint32 index) {
  RequestIdEntry* es = Entries(t);
  uint32* link = &Heads(t)[es[index].hash & (t->nbuckets - 1)];
  while (*link != kNoEntry && *link != index) link = &es[*link].next;
  if (*link == index) *link = es[index].next;
}

void Free(RequestIdTable* t, uint32 index) {
  RequestIdEntry* es = Entries(t);
  Unlink(t, index);
  es[index].state = kIdFree;
  es[index].next = t->free_head;
  t->free_head = index;
  t->used--;
}

// A free entry, or a kDurable one (its id is in the table) taken from its chain; kNoEntry if none.
uint32 TakeEntry(RequestIdTable* t) {
  RequestIdEntry* es = Entries(t);
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

}  // namespace

Size RequestIdTableSize(int capacity) {
  Size size = MAXALIGN(sizeof(RequestIdTable));
  size = add_size(size, MAXALIGN(mul_size(sizeof(uint32), NBuckets(capacity))));
  return add_size(size, mul_size(sizeof(RequestIdEntry), capacity));
}

RequestIdTable* CreateRequestIdTable(void* mem, int capacity, LWLock* lock, LWLock* apply_lock) {
  auto* t = static_cast<RequestIdTable*>(mem);
  t->lock = lock;
  t->apply_lock = apply_lock;
  t->capacity = uint32(capacity);
  t->nbuckets = NBuckets(capacity);
  t->clock = 0;
  t->used = 0;
  t->durable_possible = false;
  for (uint32 b = 0; b < t->nbuckets; b++) Heads(t)[b] = kNoEntry;
  RequestIdEntry* es = Entries(t);
  for (uint32 i = 0; i < t->capacity; i++) {
    memset(static_cast<void*>(&es[i]), 0, offsetof(RequestIdEntry, id));
    es[i].state = kIdFree;
    es[i].next = i + 1 < t->capacity ? i + 1 : kNoEntry;
  }
  t->free_head = t->capacity > 0 ? 0 : kNoEntry;
  return t;
}

IdLookup LookUpRequestId(RequestIdTable* t, Oid db, int32 counter, const char* id, int len, TimestampTz now,
                         int64 window_us, int64* result, uint32* index) {
  RequestIdEntry* es = Entries(t);
  uint32 hash = HashOf(db, counter, id, len);
  IdLookup outcome = IdLookup::kOwned;
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
    uint32 e = found != kNoEntry ? found : TakeEntry(t);
    if (e == kNoEntry) {
      outcome = IdLookup::kFull;
    } else {
      if (found == kNoEntry) {
        es[e].hash = hash;
        es[e].db = db;
        es[e].counter = counter;
        es[e].len = uint16(len);
        memcpy(es[e].id, id, len);
        es[e].id[len] = '\0';
        uint32* head = &Heads(t)[hash & (t->nbuckets - 1)];
        es[e].next = *head;
        *head = e;
      }
      es[e].state = kIdApplying;
      es[e].owner_pid = MyProcPid;
      *index = e;
    }
  }
  LWLockRelease(t->lock);
  return outcome;
}

void KnownRequestId(RequestIdTable* t, uint32 index, int64 result, TimestampTz applied_at) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  e.result = result;
  e.applied_at = applied_at;
  e.state = kIdDurable;
  t->durable_possible = true;
  LWLockRelease(t->lock);
}

void AppliedRequestId(RequestIdTable* t, uint32 index, int64 key, int64 bucket, int64 result,
                      TimestampTz at) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  e.key = key;
  e.bucket = bucket;
  e.result = result;
  e.applied_at = at;
  e.state = kIdPending;
  LWLockRelease(t->lock);
}

void AbandonRequestId(RequestIdTable* t, uint32 index) {
  RequestIdEntry& e = Entries(t)[index];
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  if (e.state == kIdApplying && e.owner_pid == MyProcPid) Free(t, index);
  LWLockRelease(t->lock);
}

int TakePendingRequestIds(RequestIdTable* t, Oid db, const CounterKey* keys, int nkeys,
                          TakenRequestId** out) {
  RequestIdEntry* es = Entries(t);
  auto wanted = [&](const RequestIdEntry& e) {
    CounterKey k{uint32(db), e.counter, e.key, e.bucket};
    return e.state == kIdPending && e.db == db &&
           std::binary_search(keys, keys + nkeys, k, KeyBefore);
  };
  // Counted, allocated, then marked and copied: nothing that can fail runs under the lock, and
  // no id is marked without its copy. No id of these keys turns kPending meanwhile (the caller
  // holds apply_lock EXCLUSIVE); one may go (a drop): fewer are marked than counted.
  int n = 0;
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (uint32 i = 0; i < t->capacity; i++)
    if (wanted(es[i])) n++;
  LWLockRelease(t->lock);
  *out = nullptr;
  if (n == 0) return 0;
  auto* taken = static_cast<TakenRequestId*>(palloc(sizeof(TakenRequestId) * n));
  char* ids = static_cast<char*>(palloc(size_t(n) * (kMaxRequestIdLen + 1)));
  int copied = 0;
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (uint32 i = 0; i < t->capacity && copied < n; i++) {
    RequestIdEntry& e = es[i];
    if (!wanted(e)) continue;
    e.state = kIdTaken;
    e.owner_pid = MyProcPid;
    char* copy = ids + size_t(copied) * (kMaxRequestIdLen + 1);
    memcpy(copy, e.id, e.len + 1);
    taken[copied++] = TakenRequestId{i, e.counter, e.key, e.bucket, e.result, e.applied_at, copy};
  }
  LWLockRelease(t->lock);
  *out = taken;
  return copied;
}

void SettleRequestIds(RequestIdTable* t, const TakenRequestId* taken, int n, bool committed) {
  RequestIdEntry* es = Entries(t);
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (int i = 0; i < n; i++)
    if (es[taken[i].index].state == kIdTaken)
      es[taken[i].index].state = committed ? kIdDurable : kIdPending;
  if (committed && n > 0) t->durable_possible = true;
  LWLockRelease(t->lock);
}

uint32 CopyUnflushedRequestIds(const RequestIdTable* t, RequestIdEntry* out) {
  const RequestIdEntry* es = Entries(const_cast<RequestIdTable*>(t));
  uint32 n = 0;
  for (uint32 i = 0; i < t->capacity; i++)
    if (es[i].state == kIdPending || es[i].state == kIdTaken) out[n++] = es[i];
  return n;
}

bool RestoreRequestId(RequestIdTable* t, const RequestIdEntry& saved) {
  Assert(saved.state == kIdPending || saved.state == kIdTaken);
  RequestIdEntry* es = Entries(t);
  if (t->free_head == kNoEntry) return false;
  uint32 e = TakeEntry(t);
  es[e] = saved;
  es[e].hash = HashOf(saved.db, saved.counter, saved.id, saved.len);
  es[e].state = kIdPending;
  es[e].owner_pid = 0;
  uint32* head = &Heads(t)[es[e].hash & (t->nbuckets - 1)];
  es[e].next = *head;
  *head = e;
  return true;
}

void ForgetRequestIds(RequestIdTable* t, Oid db, int32 counter) {
  RequestIdEntry* es = Entries(t);
  LWLockAcquire(t->lock, LW_EXCLUSIVE);
  for (uint32 i = 0; i < t->capacity; i++)
    if (es[i].state != kIdFree && es[i].db == db && (counter == 0 || es[i].counter == counter) &&
        es[i].state != kIdApplying && es[i].state != kIdTaken)
      Free(t, i);
  LWLockRelease(t->lock);
}

}  // namespace sc
