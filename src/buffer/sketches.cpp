// sketches.cpp: distinct counters in the buffer: the add (the hot path: the partition lock
// SHARED, find the entry, raise a register of its sketch), the block a key's load borrows and
// fills from slotted_counter.key_sketches, and the copies that reads, flushes and commits take.
// The rules of the blocks are in core/sketch_pool.hpp and core/sketch_block.hpp; those of the
// entries, in core/protocol.hpp.
#include <algorithm>

#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/shmem.hpp"
#include "definitions/sketch_rows.hpp"

namespace sc {

namespace {

inline SpinMutex BlockMutex(uint32 b) { return SpinMutex{&shared->sketch_locks[b]}; }

inline uint32 BlockOfResidentSketch(uint32 index) {
  return shared->sketches->BlockOfResident(index);
}

// Adds hash to the sketch of resident entry `index` (under its partition lock): true if it
// changed.
inline bool AddToBlock(uint32 index, uint64 hash) {
  SketchPool* pool = shared->sketches;
  uint32 b = pool->BlockOfResident(index);
  SpinMutex mutex = BlockMutex(b);
  return SketchAdd(pool->block(b), mutex, hash);
}

// Copies the sketch of entry `index` (kept by its caller) into out.
void CopyBlock(uint32 b, SketchSet* out) {
  SpinMutex mutex = BlockMutex(b);
  SketchSetCopyBlock(*out, shared->sketches->block(b), mutex);
}

}  // namespace

uint32 TakeSketchBlock(uint32 index, uint32 generation, const HllShape& shape) {
  SketchPool* pool = shared->sketches;
  CounterTable* table = shared->table;
  // Round the blocks: a sweep marks used entries unused (the clock's second chance), the next
  // evicts them; a third round for a block another loader took first.
  for (int round = 0; round < 3; round++) {
    uint32 b = pool->Take(*table, index, generation, shape);
    if (b != kNil) return b;
    bool evicted = false;
    pool->ForOwners(pool->blocks(), [&](uint32 entry, uint32 entry_generation) {
      evicted = entry != index &&
                Table().EvictIfIdle(entry, entry_generation, [](const Entry& e) {
                  return DeltasFolded(e);
                });
      return evicted;
    });
    if (evicted) pg_atomic_fetch_add_u64(&shared->evictions, 1);
  }
  if (DatabaseSlot* own = FindSlot(MyDatabaseId)) AskForFlush(own);
  return kNil;
}

void LoadStoredSketch(const CounterDef& def, const CounterKey& k, uint32 b) {
  auto* set = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  SketchSetInit(*set, def.sketch);
  int64 key = k.key;
  int64 until = k.bucket == DT_NOEND ? DT_NOEND : k.bucket + 1;
  UnionStoredSketches(def, &key, 1, k.bucket, until, true, set);
  SketchBlock& block = shared->sketches->block(b);
  SpinMutex mutex = BlockMutex(b);
  if (!set->dense) {
    for (uint64 i = 0; i < set->count; i++) (void)SketchAdd(block, mutex, uint64(set->hashes[i]));
  } else {
    HllRead dense{HllType::kFull, set->shape, nullptr, 0};
    (void)SketchUnion(block, mutex, dense, set->registers);
  }
  pfree(set);
}

namespace {

// The add's step: a counter whose keys expire stamps them, and empties an expired one first.
Probe AddStep(const CounterKey& k, uint32 h, uint64 hash, const HllShape& shape, Write w,
              bool* changed) {
  Dirtied dirtied;
  auto add = [&](uint32 index) { return AddToBlock(index, hash); };
  Probe probe =
      w.cutoff == kNeverExpires
          ? Table().SketchAddIfResident(k, h, changed, &dirtied, add)
          : Table().SketchAddIfResident(k, h, w, changed, &dirtied, add, [&](uint32 index) {
              (void)InitSketchBlock(shared->sketches->block(BlockOfResidentSketch(index)),
                                    shape);
            });
  NoteDirtied(dirtied);
  return probe;
}

}  // namespace

bool BufferSketchAdd(const CounterDef& counter, int64 key, int64 bucket, uint64 hash) {
  CounterKey k{MyDatabaseId, counter.id, key, bucket};
  uint32 h = HashCounterKey(k);
  bool changed = false;
  Write w = WriteNow(counter);
  HllShape shape = counter.sketch;
  if (likely(AddStep(k, h, hash, shape, w, &changed) == Probe::kFound)) return changed;
  CounterDef def = counter;  // as in BufferIncrement: a load may look the definition up again
  UntilResident(&def, k, h, "add to", [&] { return AddStep(k, h, hash, shape, w, &changed); });
  return changed;
}

bool BufferSketchOfEntry(const CounterKey& k, uint32 index, uint32 generation, SketchSet* out) {
  bool found = false;
  (void)Table().WithResident(k, HashCounterKey(k), [&](uint32 i, const Entry& e) {
    if (i != index || e.generation.load(std::memory_order_relaxed) != generation) return;
    uint32 b = shared->sketches->BlockOf(i, generation);
    if (b == kNil) return;
    CopyBlock(b, out);
    found = true;
  });
  return found;
}

bool BufferSketchLacks(const CounterDef& counter, int64 key, int64 bucket, uint64 hash) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 h = HashCounterKey(k);
  bool lacks = false;
  int64 cutoff = KeyCutoff(def);
  UntilResident(&def, k, h, "add to", [&] {
    return Table().WithResident(k, h, [&](uint32 index, const Entry& e) {
      // An expired key's sketch counts for nothing: every element is news.
      if (CounterTable::ExpiredValue(e, cutoff)) {
        lacks = true;
        return;
      }
      uint32 b = shared->sketches->BlockOfResident(index);
      SpinMutex mutex = BlockMutex(b);
      lacks = SketchLacks(shared->sketches->block(b), mutex, hash);
    });
  });
  return lacks;
}

bool IsSketchEntry(uint32 index, uint32 generation) {
  return shared->sketches->BlockOf(index, generation) != kNil;
}

int64 BufferSketchUnion(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                        int64 until, SketchSet* out) {
  bool wanted[kPartitions] = {};
  if (keys == nullptr) {
    for (uint32 p = 0; p < kPartitions; p++) wanted[p] = true;
  } else {
    for (int i = 0; i < nkeys; i++)
      wanted[CounterTable::PartitionOf(
          HashCounterKey(CounterKey{MyDatabaseId, def.id, keys[i], kNoBucket}))] = true;
  }
  auto* copy = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  int64 cutoff = KeyCutoff(def);
  int64 n = 0;
  for (uint32 p = 0; p < kPartitions; p++) {
    if (!wanted[p]) continue;
    Table().ForEachResident(p, [&](uint32 index, const Entry& e) {
      if (e.id.db != MyDatabaseId || e.id.counter != def.id || e.id.bucket < since ||
          e.id.bucket >= until ||
          (keys != nullptr && !std::binary_search(keys, keys + nkeys, e.id.key)) ||
          CounterTable::ExpiredValue(e, cutoff))
        return;
      CopyBlock(shared->sketches->BlockOfResident(index), copy);
      SketchSetUnion(*out, *copy);
      n++;
    });
  }
  pfree(copy);
  return n;
}

void BufferSketchAddIfResident(int32 counter, int64 key, int64 bucket, const uint64* hashes,
                               int n) {
  CounterKey k{MyDatabaseId, counter, key, bucket};
  (void)Table().WithResident(k, HashCounterKey(k), [&](uint32 index, const Entry&) {
    uint32 b = shared->sketches->BlockOfResident(index);
    SpinMutex mutex = BlockMutex(b);
    for (int i = 0; i < n; i++) (void)SketchAdd(shared->sketches->block(b), mutex, hashes[i]);
  });
}

}  // namespace sc
