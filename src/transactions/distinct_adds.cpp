// distinct_adds.cpp: a transactional distinct counter's adds belong to their transaction
// (distinct_adds.hpp).
//
// A call keeps the element's hash, with its key and nesting level, in an array in
// TopTransactionContext; a subtransaction's rollback drops those of its level and deeper, its
// commit hands them to its parent. At pre-commit the sketch of each key's own adds goes into
// slotted_counter.sketch_deltas, a row per key (append-only, as deltas: no committer waits for
// another's lock, and a transaction adds to any number of keys); the flusher folds the rows into
// key_sketches (sketch_rows.hpp). A read of a transactional counter unions key_sketches, the
// unfolded rows and the resident sketch, so it misses no commit. After the commit, the hashes go
// into the keys' resident sketches, if resident (no wait, no pin: a load under way or to come
// reads the committed rows), for sc_add's answer. A transaction with adds cannot be prepared.
#include <algorithm>

#include "buffer/buffer.hpp"
#include "definitions/expiry.hpp"
#include "definitions/sketch_rows.hpp"
#include "spi.hpp"
#include "transactions/distinct_adds.hpp"

namespace sc {

namespace {

// level: the nesting level that added it; dropped: the level of the sc_drop_buckets that
// dropped its bucket since (0: none), undone with that subtransaction.
struct PendingAdd {
  int32 counter;
  int64 key;
  int64 bucket;
  uint64 hash;
  int level;
  int dropped;
};

PendingAdd* pending = nullptr;
int npending = 0;
int capacity = 0;

// Each add's place in pending, by (counter, key, bucket, hash): whether an element is pending
// is one look-up, not a pass over every add (a transaction may add millions).
struct AddKey {
  int32 counter;
  int32 unused;  // zero, so that the key's bytes are all its own
  int64 key;
  int64 bucket;
  uint64 hash;
};
struct AddPlace {
  AddKey id;
  int index;
};
HTAB* places = nullptr;

AddKey KeyOf(int32 counter, int64 key, int64 bucket, uint64 hash) {
  AddKey k;
  memset(&k, 0, sizeof(k));
  k.counter = counter;
  k.key = key;
  k.bucket = bucket;
  k.hash = hash;
  return k;
}

void Place(int index) {
  const PendingAdd& p = pending[index];
  AddKey k = KeyOf(p.counter, p.key, p.bucket, p.hash);
  static_cast<AddPlace*>(hash_search(places, &k, HASH_ENTER, nullptr))->index = index;
}

// The places of pending's adds, made again (after they moved).
void PlaceAll() {
  HASHCTL ctl;
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = sizeof(AddKey);
  ctl.entrysize = sizeof(AddPlace);
  ctl.hcxt = TopTransactionContext;
  if (places != nullptr) hash_destroy(places);
  places = hash_create("slotted_counter pending adds", Max(npending, 64), &ctl,
                       HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  for (int i = 0; i < npending; i++) Place(i);
}

// The adds were written at pre-commit (pending sorted by key then), to go into the buffer at
// the commit.
bool committing = false;

bool SameKey(const PendingAdd& a, const PendingAdd& b) {
  return a.counter == b.counter && a.key == b.key && a.bucket == b.bucket;
}

bool Before(const PendingAdd& a, const PendingAdd& b) {
  if (a.counter != b.counter) return a.counter < b.counter;
  if (a.key != b.key) return a.key < b.key;
  if (a.bucket != b.bucket) return a.bucket < b.bucket;
  return a.hash < b.hash;
}

bool Pending(int32 counter, int64 key, int64 bucket, uint64 hash) {
  if (places == nullptr) return false;
  AddKey k = KeyOf(counter, key, bucket, hash);
  auto* place = static_cast<AddPlace*>(hash_search(places, &k, HASH_FIND, nullptr));
  return place != nullptr && pending[place->index].dropped == 0;
}

// Moves the adds not dropped to the front of pending, in order; returns how many.
int Live() {
  int kept = 0;
  for (int i = 0; i < npending; i++)
    if (pending[i].dropped == 0) pending[kept++] = pending[i];
  return kept;
}

void Forget() {
  pending = nullptr;
  places = nullptr;  // both in TopTransactionContext, which goes with the transaction
  npending = capacity = 0;
  committing = false;
}

}  // namespace

bool TransactionalSketchAdd(const CounterDef& def, int64 key, int64 bucket, uint64 hash) {
  if (npending == capacity) {
    int grown = capacity == 0 ? 64 : capacity * 2;
    if (pending == nullptr)
      pending = static_cast<PendingAdd*>(
          MemoryContextAlloc(TopTransactionContext, sizeof(PendingAdd) * grown));
    else
      pending = static_cast<PendingAdd*>(repalloc_huge(pending, sizeof(PendingAdd) * grown));
    capacity = grown;
  }
  // A hash the transaction added before changes nothing; one the committed sketch has neither.
  // The resident sketch of a counter whose keys expire cannot tell (commits do not stamp it): every
  // element is kept, and the fold's union drops what is there already.
  bool changes = !Pending(def.id, key, bucket, hash) &&
                 (KeysExpire(def) || BufferSketchLacks(def, key, bucket, hash));
  if (changes) {
    if (places == nullptr) PlaceAll();
    pending[npending] = PendingAdd{def.id, key, bucket, hash, GetCurrentTransactionNestLevel(), 0};
    Place(npending++);
  }
  return changes;
}

void DropPendingSketchBuckets(int32 counter, int64 before) {
  int level = GetCurrentTransactionNestLevel();
  for (int i = 0; i < npending; i++)
    if (pending[i].counter == counter && pending[i].bucket < before && pending[i].dropped == 0)
      pending[i].dropped = level;
}

void UnionPendingSketches(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                          int64 until, SketchSet* out) {
  for (int i = 0; i < npending; i++) {
    const PendingAdd& p = pending[i];
    if (p.counter != def.id || p.dropped != 0 || p.bucket < since || p.bucket >= until) continue;
    if (keys != nullptr && !std::binary_search(keys, keys + nkeys, p.key)) continue;
    (void)SketchSetAdd(*out, p.hash);
  }
}

void SketchesPreCommit() {
  npending = Live();
  if (npending == 0) return;
  std::sort(pending, pending + npending, Before);
  int groups = 0;
  for (int i = 0; i < npending; i++)
    if (i == 0 || !SameKey(pending[i - 1], pending[i])) groups++;
  auto* rows = static_cast<SketchRow*>(palloc(sizeof(SketchRow) * groups));
  auto* set = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  int nrows = 0;
  for (int i = 0; i < npending;) {
    int end = i + 1;
    while (end < npending && SameKey(pending[i], pending[end])) end++;
    const CounterDef* def = FindCounter(pending[i].counter);
    if (def == nullptr) ReportDroppedSinceCounted(psprintf("%d", pending[i].counter));
    SketchSetInit(*set, def->sketch);
    for (int j = i; j < end; j++) (void)SketchSetAdd(*set, pending[j].hash);
    rows[nrows++] =
        SketchRow{def->id, pending[i].key, pending[i].bucket, 0, SketchBytes(*set), 0};
    i = end;
  }
  // At pre-commit no statement's snapshot is active any more.
  PushActiveSnapshot(GetTransactionSnapshot());
  SpiSession spi = ConnectSpi();
  InsertSketchDeltas(rows, nrows);
  FinishSpi(spi);
  PopActiveSnapshot();
  committing = true;
}

void SketchesPrePrepare() {
  if (npending > 0)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("cannot PREPARE a transaction that added to a distinct counter")));
}

void SketchesEnd(bool committed) {
  // The keys' resident sketches take the committed elements (sorted by key at pre-commit), so
  // that sc_add answers from them what the transaction's successors see.
  if (committed && committing)
    for (int i = 0; i < npending;) {
      int end = i + 1;
      while (end < npending && SameKey(pending[i], pending[end])) end++;
      uint64 hashes[64];
      for (int j = i; j < end;) {
        int n = 0;
        for (; n < 64 && j < end; n++, j++) hashes[n] = pending[j].hash;
        BufferSketchAddIfResident(pending[i].counter, pending[i].key, pending[i].bucket, hashes,
                                  n);
      }
      i = end;
    }
  Forget();
}

void SketchesSubEnd(bool committed, int level) {
  int kept = 0;
  for (int i = 0; i < npending; i++) {
    PendingAdd& p = pending[i];
    // A drop of the subtransaction: its parent's, or undone.
    if (p.dropped >= level) p.dropped = committed ? level - 1 : 0;
    if (p.level < level) {
      pending[kept++] = p;
    } else if (committed) {
      p.level = level - 1;
      pending[kept++] = p;
    }
  }
  if (kept != npending) {
    npending = kept;
    if (places != nullptr) PlaceAll();
  }
}

}  // namespace sc
