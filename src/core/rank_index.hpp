// rank_index.hpp: the index behind sc_rank: one counter's keys with their values, and the values
// in order, so that "how many keys have a larger value than this one" costs O(log n).
//
// Pure C++ (no PostgreSQL header). The server keeps one RankIndex per counter in dynamic shared
// memory (DSA); the unit tests over a handle table that moves every allocation between calls.
// Rules, every one of them:
//   - Memory is the caller's: every call that touches it takes an Allocator with
//     `uint64_t Allocate(size_t bytes)` (0: over budget or out of memory), `void Free(uint64_t)`
//     and `void* Resolve(uint64_t)` (8-byte aligned; it must not fail, nor raise an error, for a
//     handle allocated and not freed). Nothing here stores an address: DSA maps an area at a
//     different address in each process, so the root and every block refer to memory by handle
//     only, and a pointer from Resolve lives for one call. The root (RankIndex) is plain data
//     that may live in DSA too: Init makes it empty (allocating nothing), Destroy frees all it
//     holds. Nothing here allocates from the heap, throws or holds an object with a destructor.
//   - Locking is the caller's: one writer (the flusher) calls Set, Remove, Build and Destroy under
//     the index's LWLock held exclusive; readers call Find, CountGreater, Rank, Size, Bytes and
//     Inconsistency under it held shared. A reader writes nothing, not even a cache.
//   - A Set or Build that cannot allocate returns false and leaves every byte of the index (root
//     and allocations) as it was: it allocates all it needs before it changes anything. Remove
//     allocates nothing and cannot fail; neither can Init, Destroy or the readers.
//   - Values are signed 64-bit integers ordered as such: INT64_MIN, negatives, 0 and INT64_MAX are
//     ordinary values, and so is every key (the caller decides which keys to store).
//     CountGreater(v) is the number of keys whose value is strictly larger than v, so keys with
//     equal values share a rank: Rank(key) = 1 + CountGreater(value of key).
//
// Layout. The map: open addressing with linear probing over `capacity` 16-byte slots (key,
// value); a slot whose key is kRankEmptyKey is empty, and the key kRankEmptyKey itself lives in
// the root (has_empty_key, empty_key_value). Removal shifts the probe run back (no tombstones).
// The map grows by half when more than 17/20 of its slots would be full; it never shrinks.
// The multiset: the values in ascending order, cut into blocks of at most block_values sorted
// values (one allocation each, exactly block_values * 8 bytes), and a directory (one allocation)
// of each block's first value, handle and count, plus a Fenwick tree over the counts.
// Invariants (Inconsistency checks them all): the blocks in directory order, concatenated, are
// the values sorted; every block holds 1..block_values values; any two adjacent blocks hold more
// than block_values / 2 together (so blocks are on average over a quarter full); the counts add
// up to Size(); the multiset holds the keys' values, one per key.
//   Set of a value into a full block splits it in halves; a Remove that leaves a block and a
//   neighbour with block_values / 2 or fewer merges them. A value's block is the last one whose
//   first value is <= it (the first block for values below every block).
//
// Why 512 values a block: a block is then 4 KB, one DSA size class with nothing around it; an
// insert or removal moves on average half of a block's values (~1.4 KB, tens of ns); and
// 1,000,000 keys make about 2,700 blocks (72% full after random Sets, 75% after Build), so the
// directory is ~115 KB and the split or merge that rebuilds its Fenwick tree (O(blocks)) comes
// about once per 370 Sets of new keys (random values).
//
// Cost, n keys, b blocks (1,000,000 keys: b ~ 2,700):
//   Find: O(1) expected: one hash, 2.4 slots on average at the map's load of 0.74 (3.8 at the
//     most, 0.85); a key not there reads its whole probe run (8 slots at 0.74, 23 at 0.85).
//   CountGreater / Rank: O(log n): a binary search of the directory's first values (12 steps at
//     1M keys), one of a block (9 steps) and a Fenwick prefix sum (12 steps): ~35 comparisons and
//     additions over three cache-missing reads (slot, directory, block), no allocation.
//   Set / Remove: O(log n + block_values), plus O(b) on a split or merge, plus O(n) on a map
//     growth (amortised O(1): each key is moved twice on average).
//   Build: O(n log n) for the sort, one allocation per block.
// Measured once at 1M random keys (-O2, one core, a throwaway program): Set of a new key 390 ns,
// Rank 390 ns (~2.5M calls/s; sc_rank needs 1,000), Find 55 ns, Remove 420 ns; Build 0.11 s,
// 3.7x faster than 1M Sets (the sort is most of it).
// Memory (Bytes(): every allocation held, not the root's 64 bytes): 16 bytes per map slot at a
// load between 0.57 (just grown) and 0.85, block_values * 8 bytes per block, 28 bytes per
// directory entry. Measured by rank_index_test.cpp (OneMillionKeysHoldUnder40BytesEach):
// 1,000,000 random Sets hold 32.8 bytes a key (map 0.74 full: 21.6, blocks 72% full: 11.1,
// directory 0.1); Build of the same keys 32.1 (map 0.75 full, blocks 75% full). Over sizes from
// 10,000 to 1,000,000 keys the most is 41 bytes a key, just after a map growth. For the moment
// of a growth the old and the new slots are held together (2.5 times the map), and Build holds
// its result beside the old contents plus 8 bytes a key for its sort.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"  // MixBits

namespace sc {

// Values a block holds at most (see the header comment for why 512).
constexpr uint32_t kRankBlockValues = 512;
// The key that marks an empty slot; stored in the root when it is a key of the index.
constexpr int64_t kRankEmptyKey = INT64_MIN;

struct RankSlot {
  int64_t key;
  int64_t value;
};

struct RankIndex {
  uint64_t table;               // handle of `capacity` RankSlots; 0 while capacity is 0
  uint64_t capacity;            // slots
  uint64_t size;                // keys, the one equal to kRankEmptyKey included
  int64_t empty_key_value;      // the value of key kRankEmptyKey, while has_empty_key
  uint64_t directory;           // handle of the directory (see Directory); 0 if none yet
  uint64_t bytes;               // all that table, directory and blocks hold
  uint32_t directory_capacity;  // entries the directory has room for
  uint32_t blocks;              // entries in use
  uint32_t block_values;        // a block's capacity in values
  uint32_t has_empty_key;       // 1 if kRankEmptyKey is a key of the index

  // An empty index whose blocks hold up to block_values values (the unit tests use small ones to
  // split and merge often). Allocates nothing.
  void Init(uint32_t block_values_ = kRankBlockValues) noexcept {
    SC_ASSERT(block_values_ >= 2 && block_values_ <= (1u << 20));
    table = 0;
    capacity = 0;
    size = 0;
    empty_key_value = 0;
    directory = 0;
    bytes = 0;
    directory_capacity = 0;
    blocks = 0;
    block_values = block_values_;
    has_empty_key = 0;
  }

  // Frees every allocation; the index is then empty (as after Init, same block_values).
  template <typename Allocator>
  void Destroy(Allocator& a) noexcept {
    if (table != 0) a.Free(table);
    if (directory != 0) {
      Directory d = Dir(a);
      for (uint32_t i = 0; i < blocks; i++) a.Free(d.handle[i]);
      a.Free(directory);
    }
    Init(block_values);
  }

  uint64_t Size() const noexcept { return size; }
  uint64_t Bytes() const noexcept { return bytes; }

  // What Bytes() is after a Build of n distinct keys into an index of blocks of block_values_
  // (its sort space, n * 8 bytes, is held only during the Build): the memory an index asks for
  // before it is built (buffer/rank_indexes.cpp, the fair share of rank_memory).
  static uint64_t BuildBytes(uint64_t n, uint32_t block_values_ = kRankBlockValues) noexcept {
    if (n == 0) return 0;
    uint64_t blocks = (n + BuildFill(block_values_) - 1) / BuildFill(block_values_);
    return BuildCapacity(n) * sizeof(RankSlot) + DirectoryBytes(uint32_t(blocks < 4 ? 4 : blocks)) +
           blocks * block_values_ * sizeof(int64_t);
  }

  template <typename Allocator>
  bool Find(Allocator& a, int64_t key, int64_t* value) const noexcept {
    if (key == kRankEmptyKey) {
      if (has_empty_key) *value = empty_key_value;
      return has_empty_key != 0;
    }
    if (capacity == 0) return false;
    const RankSlot* s = Slots(a);
    uint64_t i = Probe(s, capacity, key);
    if (i == capacity) return false;
    *value = s[i].value;
    return true;
  }

  // How many keys have a value strictly larger than v.
  template <typename Allocator>
  uint64_t CountGreater(Allocator& a, int64_t v) const noexcept {
    if (blocks == 0) return 0;
    Directory d = Dir(a);
    int64_t i = Locate(d, v);
    if (i < 0) return size;  // v is below every value
    const int64_t* block = Block(a, d, uint32_t(i));
    uint32_t c = d.count[i];
    uint64_t in_block = c - uint32_t(std::upper_bound(block, block + c, v) - block);
    uint64_t through_i = Prefix(d, uint32_t(i) + 1);
    SC_ASSERT(through_i <= size);
    return in_block + (size - through_i);
  }

  // sc_rank: 1 + the number of keys with a larger value than key's; false if key is absent.
  template <typename Allocator>
  bool Rank(Allocator& a, int64_t key, uint64_t* rank) const noexcept {
    int64_t value;
    if (!Find(a, key, &value)) return false;
    *rank = 1 + CountGreater(a, value);
    return true;
  }

  // Inserts key with value, or replaces its value. False (nothing changed) if an allocation
  // failed.
  template <typename Allocator>
  bool Set(Allocator& a, int64_t key, int64_t value) noexcept {
    RankSlot* s = capacity != 0 ? Slots(a) : nullptr;
    int64_t* held = nullptr;  // where key's value is, if key is there
    if (key == kRankEmptyKey) {
      if (has_empty_key) held = &empty_key_value;
    } else if (capacity != 0) {
      uint64_t i = Probe(s, capacity, key);
      if (i != capacity) held = &s[i].value;
    }
    if (held != nullptr) {
      int64_t old = *held;
      if (old == value) return true;
      InsertPlan plan;
      if (!PlanInsert(a, value, &plan)) return false;
      InsertValue(a, value, plan);
      EraseValue(a, old);
      *held = value;
      return true;
    }
    // A new key: the map's growth and the block's split, both allocated before either is made.
    uint64_t grown = 0;
    uint64_t grown_capacity = 0;
    if (key != kRankEmptyKey && !Fits(size - has_empty_key + 1, capacity)) {
      grown_capacity = capacity < kMinCapacity ? kMinCapacity : capacity + capacity / 2;
      SC_ASSERT(Fits(size - has_empty_key + 1, grown_capacity));
      grown = a.Allocate(size_t(grown_capacity) * sizeof(RankSlot));
      if (grown == 0) return false;
    }
    InsertPlan plan;
    if (!PlanInsert(a, value, &plan)) {
      if (grown != 0) a.Free(grown);
      return false;
    }
    if (grown != 0) {
      RankSlot* t = Resolve<RankSlot>(a, grown);
      FillEmpty(t, grown_capacity);
      for (uint64_t i = 0; i < capacity; i++)
        if (s[i].key != kRankEmptyKey) Place(t, grown_capacity, s[i].key, s[i].value);
      if (table != 0) a.Free(table);
      bytes += (grown_capacity - capacity) * sizeof(RankSlot);
      table = grown;
      capacity = grown_capacity;
      s = t;
    }
    if (key == kRankEmptyKey) {
      has_empty_key = 1;
      empty_key_value = value;
    } else {
      Place(s, capacity, key, value);
    }
    size++;
    InsertValue(a, value, plan);
    return true;
  }

  // Removes key; false if it was not there. Allocates nothing.
  template <typename Allocator>
  bool Remove(Allocator& a, int64_t key) noexcept {
    int64_t old;
    if (key == kRankEmptyKey) {
      if (!has_empty_key) return false;
      old = empty_key_value;
      has_empty_key = 0;
    } else {
      if (capacity == 0) return false;
      RankSlot* s = Slots(a);
      uint64_t i = Probe(s, capacity, key);
      if (i == capacity) return false;
      old = s[i].value;
      Erase(s, capacity, i);
    }
    size--;
    EraseValue(a, old);
    return true;
  }

  // Replaces the contents with keys[i] -> values[i] for i < n, in any order (a key given twice
  // keeps its last value, as n Sets would). The map is sized 3/4 full and the blocks filled to
  // 3/4 of block_values, leaving room for Sets. Builds aside, then frees the old contents: false
  // (nothing changed) if an allocation failed.
  template <typename Allocator>
  bool Build(Allocator& a, const int64_t* keys, const int64_t* values, size_t n) noexcept {
    if (n == 0) {
      Destroy(a);
      return true;
    }
    if (n > (uint64_t(1) << 40)) return false;  // beyond any memory; keeps the sizes below exact
    RankIndex fresh;
    fresh.Init(block_values);
    uint64_t cap = BuildCapacity(n);
    SC_ASSERT(Fits(n, cap));
    fresh.table = a.Allocate(size_t(cap) * sizeof(RankSlot));
    if (fresh.table == 0) return false;
    fresh.capacity = cap;
    fresh.bytes = cap * sizeof(RankSlot);
    RankSlot* s = Resolve<RankSlot>(a, fresh.table);
    FillEmpty(s, cap);
    for (size_t j = 0; j < n; j++) {
      if (keys[j] == kRankEmptyKey) {
        fresh.size += 1 - fresh.has_empty_key;
        fresh.has_empty_key = 1;
        fresh.empty_key_value = values[j];
        continue;
      }
      uint64_t i = Probe(s, cap, keys[j]);
      if (i != cap) {
        s[i].value = values[j];
      } else {
        Place(s, cap, keys[j], values[j]);
        fresh.size++;
      }
    }
    if (fresh.size > 0 && !fresh.FillBlocks(a)) {
      fresh.Destroy(a);
      return false;
    }
    Destroy(a);
    *this = fresh;
    return true;
  }

  // nullptr if every invariant of the header comment holds, else the first that does not.
  // O(n); for tests and diagnostics.
  template <typename Allocator>
  const char* Inconsistency(Allocator& a) const noexcept {
    if (block_values < 2) return "block_values below 2";
    if (has_empty_key > 1) return "has_empty_key neither 0 nor 1";
    uint64_t in_table = 0;
    if (capacity != 0) {
      if (table == 0) return "slots without a table";
      const RankSlot* s = Slots(a);
      for (uint64_t i = 0; i < capacity; i++) {
        if (s[i].key == kRankEmptyKey) continue;
        in_table++;
        // Linear probing: no empty slot between a key's home and its slot.
        for (uint64_t j = Home(s[i].key, capacity); j != i; j = j + 1 == capacity ? 0 : j + 1)
          if (s[j].key == kRankEmptyKey) return "a key beyond an empty slot of its probe run";
        if (Probe(s, capacity, s[i].key) != i) return "a key twice in the map";
      }
      if (!Fits(in_table, capacity)) return "the map fuller than 17/20";
    } else if (table != 0) {
      return "a table without slots";
    }
    if (in_table + has_empty_key != size) return "size is not the number of keys";
    uint64_t map_bytes = capacity * sizeof(RankSlot);
    if (blocks == 0) {
      if (size != 0) return "keys without values";
      return bytes == map_bytes + DirectoryBytes(directory_capacity) ? nullptr : "bytes miscounted";
    }
    if (directory == 0 || blocks > directory_capacity) return "blocks beyond the directory";
    Directory d = Dir(a);
    uint64_t total = 0;
    for (uint32_t i = 0; i < blocks; i++) {
      uint32_t c = d.count[i];
      if (c < 1 || c > block_values) return "a block empty or over its capacity";
      const int64_t* block = Block(a, d, i);
      if (d.first[i] != block[0]) return "a directory entry's first value is not its block's";
      for (uint32_t j = 1; j < c; j++)
        if (block[j - 1] > block[j]) return "a block out of order";
      if (i > 0 && Block(a, d, i - 1)[d.count[i - 1] - 1] > block[0])
        return "two blocks out of order";
      if (i > 0 && d.count[i - 1] + c <= block_values / 2) return "two neighbours left unmerged";
      total += c;
      if (Prefix(d, i + 1) != total) return "the Fenwick tree disagrees with the counts";
    }
    if (total != size) return "the counts do not add up to the keys";
    if (bytes != map_bytes + DirectoryBytes(directory_capacity) +
                     uint64_t(blocks) * block_values * sizeof(int64_t))
      return "bytes miscounted";
    return nullptr;
  }

 private:
  static constexpr uint64_t kMinCapacity = 16;

  // Build's sizes: the map 3/4 full for n keys, and the values a block takes (3/4 of it).
  static uint64_t BuildCapacity(uint64_t n) noexcept {
    uint64_t cap = n / 3 * 4 + (n % 3) * 4 / 3 + 1;
    return cap < kMinCapacity ? kMinCapacity : cap;
  }
  static uint32_t BuildFill(uint32_t block_values_) noexcept {
    uint32_t fill = block_values_ / 4 * 3;
    if (fill < block_values_ / 2 + 1) fill = block_values_ / 2 + 1;  // small test blocks
    return fill > block_values_ ? block_values_ : fill;
  }

  // The directory's arrays, resolved for one call: first values, block handles, the Fenwick
  // tree over the counts (tree[j - 1] holds the sum of counts (j - (j & -j), j]), counts.
  struct Directory {
    int64_t* first;
    uint64_t* handle;
    uint64_t* tree;
    uint32_t* count;
  };
  static size_t DirectoryBytes(uint32_t entries) noexcept { return size_t(entries) * 28; }
  static Directory Lay(void* mem, uint32_t entries) noexcept {
    char* p = static_cast<char*>(mem);
    return Directory{reinterpret_cast<int64_t*>(p),
                     reinterpret_cast<uint64_t*>(p + 8 * size_t(entries)),
                     reinterpret_cast<uint64_t*>(p + 16 * size_t(entries)),
                     reinterpret_cast<uint32_t*>(p + 24 * size_t(entries))};
  }

  // What an insertion of one value needs allocated: a block to split into (or the first block),
  // and a larger directory when that block would not fit in it. 0 where nothing is needed.
  struct InsertPlan {
    uint64_t block;
    uint64_t directory;
    uint32_t directory_capacity;
  };

  template <typename T, typename Allocator>
  static T* Resolve(Allocator& a, uint64_t handle) noexcept {
    SC_ASSERT(handle != 0);
    void* p = a.Resolve(handle);
    SC_ASSERT(p != nullptr && reinterpret_cast<uintptr_t>(p) % alignof(int64_t) == 0);
    return static_cast<T*>(p);
  }
  template <typename Allocator>
  RankSlot* Slots(Allocator& a) const noexcept {
    return Resolve<RankSlot>(a, table);
  }
  template <typename Allocator>
  Directory Dir(Allocator& a) const noexcept {
    return Lay(Resolve<void>(a, directory), directory_capacity);
  }
  template <typename Allocator>
  static int64_t* Block(Allocator& a, const Directory& d, uint32_t i) noexcept {
    return Resolve<int64_t>(a, d.handle[i]);
  }

  // ---- the map

  static bool Fits(uint64_t keys, uint64_t slots) noexcept { return keys * 20 <= slots * 17; }
  // A slot from the hash's high bits: any capacity, not only powers of two.
  static uint64_t Home(int64_t key, uint64_t slots) noexcept {
    return uint64_t((static_cast<unsigned __int128>(MixBits(uint64_t(key))) * slots) >> 64);
  }
  // key's slot, or `slots` if it is not there. There is always an empty slot (Fits).
  static uint64_t Probe(const RankSlot* s, uint64_t slots, int64_t key) noexcept {
    SC_ASSERT(key != kRankEmptyKey);
    for (uint64_t i = Home(key, slots);; i = i + 1 == slots ? 0 : i + 1) {
      if (s[i].key == key) return i;
      if (s[i].key == kRankEmptyKey) return slots;
    }
  }
  // Puts a key that is not in the map into the first empty slot of its run.
  static void Place(RankSlot* s, uint64_t slots, int64_t key, int64_t value) noexcept {
    uint64_t i = Home(key, slots);
    while (s[i].key != kRankEmptyKey) i = i + 1 == slots ? 0 : i + 1;
    s[i].key = key;
    s[i].value = value;
  }
  static void FillEmpty(RankSlot* s, uint64_t slots) noexcept {
    for (uint64_t i = 0; i < slots; i++) {
      s[i].key = kRankEmptyKey;
      s[i].value = 0;
    }
  }
  // Empties slot i and moves back each later key of the run whose home is not after the hole
  // (Knuth's algorithm R), so every key stays reachable from its home without tombstones.
  static void Erase(RankSlot* s, uint64_t slots, uint64_t i) noexcept {
    uint64_t j = i;
    for (;;) {
      j = j + 1 == slots ? 0 : j + 1;
      if (s[j].key == kRankEmptyKey) break;
      uint64_t home = Home(s[j].key, slots);
      // The key at j stays if its home lies cyclically in (i, j].
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      s[i] = s[j];
      i = j;
    }
    s[i].key = kRankEmptyKey;
    s[i].value = 0;
  }

  // ---- the multiset

  // The block v belongs to: the last whose first value is <= v; -1 if v is below them all.
  static int64_t Locate(const Directory& d, uint32_t n, int64_t v) noexcept;
  int64_t Locate(const Directory& d, int64_t v) const noexcept { return Locate(d, blocks, v); }

  // The sum of the counts of blocks [0, i).
  uint64_t Prefix(const Directory& d, uint32_t i) const noexcept;
  void TreeAdd(const Directory& d, uint32_t i, int64_t delta) const noexcept;
  // After blocks came or went: O(blocks).
  void RebuildTree(const Directory& d) const noexcept;

  // Allocates what inserting v will need; false (having allocated nothing) if it cannot.
  template <typename Allocator>
  bool PlanInsert(Allocator& a, int64_t v, InsertPlan* plan) const noexcept;

  // Inserts v with what PlanInsert allocated; cannot fail.
  template <typename Allocator>
  void InsertValue(Allocator& a, int64_t v, const InsertPlan& plan) noexcept;

  static void InsertSorted(int64_t* block, uint32_t count, int64_t v) noexcept;

  // Removes one v, which is there (a key's value). Frees a block that empties, merges a block
  // with a neighbour when the two hold block_values / 2 or fewer together.
  template <typename Allocator>
  void EraseValue(Allocator& a, int64_t v) noexcept;

  // Appends block i + 1 to block i and frees it.
  template <typename Allocator>
  void Merge(Allocator& a, const Directory& d, uint32_t i) noexcept;

  // Removes directory entry i, whose block is freed.
  void DropEntry(const Directory& d, uint32_t i) noexcept;

  // Build's second half: the values of the (fresh) map, sorted, into blocks 3/4 full. Every
  // allocation is recorded in this index as it is made, so that Destroy undoes a failure.
  template <typename Allocator>
  bool FillBlocks(Allocator& a) noexcept;
};
static_assert(std::is_standard_layout<RankIndex>::value &&
                  std::is_trivially_copyable<RankIndex>::value,
              "the root of a rank index lives in shared memory: plain data");
static_assert(sizeof(RankIndex) == 64, "no padding in the root");

}  // namespace sc

// The multiset's steps.
#define SC_RANK_INDEX_DECLARED
#include "core/rank_index_blocks.hpp"
#undef SC_RANK_INDEX_DECLARED
