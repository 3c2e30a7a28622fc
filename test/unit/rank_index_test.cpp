// Single-threaded tests of sc::RankIndex (src/core/rank_index.hpp), the index behind sc_rank.
// The index is compared, operation by operation, with a model (std::map of keys, std::multiset of
// values) over allocations that sit behind a handle table as DSA's do (HandleAllocator): every
// handle is looked up, and between calls every allocation moves to a new address with its old
// bytes poisoned, so an address stored inside the index would read garbage. Allocations fail on
// demand: a call that fails must leave every byte as it was.
#include "core/rank_index.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace {

using sc::RankIndex;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr unsigned char kGarbage = 0x5A;  // a new allocation's bytes: the index must write first
constexpr unsigned char kPoison = 0xA5;   // freed or moved-away bytes
constexpr size_t kCanary = 16;            // bytes after each allocation that must stay intact

class HandleAllocator {
 public:
  HandleAllocator() = default;
  HandleAllocator(const HandleAllocator&) = delete;
  HandleAllocator& operator=(const HandleAllocator&) = delete;

  uint64_t Allocate(size_t bytes) {
    calls_++;
    bool fail = (fail_every_ != 0 && calls_ % fail_every_ == 0) || calls_ == fail_at_;
    if (fail) {
      refused_++;
      return 0;
    }
    Record r;
    r.bytes = bytes;
    r.mem = Fresh(bytes);
    std::memset(r.mem.get(), kGarbage, bytes);
    records_.push_back(std::move(r));
    live_++;
    live_bytes_ += bytes;
    return (uint64_t(records_.size()) << 20) | kTag;
  }

  void Free(uint64_t handle) {
    Record& r = Lookup(handle, "Free");
    CheckCanary(r, handle);
    std::memset(r.mem.get(), kPoison, r.bytes);
    r.mem.reset();
    live_--;
    live_bytes_ -= r.bytes;
  }

  void* Resolve(uint64_t handle) {
    resolves_++;
    return Lookup(handle, "Resolve").mem.get();
  }

  // Another process's mapping: every live allocation at a new address, same bytes; the old
  // address keeps poison (for a while), so that a pointer the index kept reads garbage.
  void Remap() {
    for (Record& r : records_) {
      if (!r.mem) continue;
      CheckCanary(r, 0);
      std::unique_ptr<unsigned char[]> moved = Fresh(r.bytes);
      std::memcpy(moved.get(), r.mem.get(), r.bytes);
      std::memset(r.mem.get(), kPoison, r.bytes);
      quarantine_bytes_ += r.bytes;
      quarantine_.push_back(std::move(r.mem));
      r.mem = std::move(moved);
    }
    if (quarantine_bytes_ > (64u << 20)) {
      quarantine_.clear();
      quarantine_bytes_ = 0;
    }
  }

  // Every live allocation's bytes, by handle.
  std::map<uint64_t, std::vector<unsigned char>> Snapshot() const {
    std::map<uint64_t, std::vector<unsigned char>> out;
    for (size_t i = 0; i < records_.size(); i++)
      if (records_[i].mem)
        out[(uint64_t(i + 1) << 20) | kTag] = std::vector<unsigned char>(
            records_[i].mem.get(), records_[i].mem.get() + records_[i].bytes);
    return out;
  }

  void FailEvery(uint64_t n) { fail_every_ = n; }
  // The k-th Allocate from now fails (once); 0: none.
  void FailAt(uint64_t k) { fail_at_ = k == 0 ? 0 : calls_ + k; }
  uint64_t calls() const { return calls_; }
  uint64_t refused() const { return refused_; }
  uint64_t resolves() const { return resolves_; }
  uint64_t live() const { return live_; }
  uint64_t live_bytes() const { return live_bytes_; }

 private:
  static constexpr uint64_t kTag = 0x5C3;  // low bits of every handle: never an address
  struct Record {
    size_t bytes = 0;
    std::unique_ptr<unsigned char[]> mem;  // null once freed
  };

  static std::unique_ptr<unsigned char[]> Fresh(size_t bytes) {
    std::unique_ptr<unsigned char[]> mem(new unsigned char[bytes + kCanary]);
    for (size_t i = 0; i < kCanary; i++) mem[bytes + i] = static_cast<unsigned char>(0xC0 + i);
    return mem;
  }
  static void Die(const char* what, uint64_t handle) {
    std::fprintf(stderr, "HandleAllocator: %s (handle %#llx)\n", what, (unsigned long long)handle);
    std::abort();
  }
  void CheckCanary(const Record& r, uint64_t handle) const {
    for (size_t i = 0; i < kCanary; i++)
      if (r.mem[r.bytes + i] != static_cast<unsigned char>(0xC0 + i))
        Die("written past the end of an allocation", handle);
  }
  Record& Lookup(uint64_t handle, const char* op) {
    uint64_t index = (handle >> 20) - 1;
    if ((handle & ((1u << 20) - 1)) != kTag || handle >> 20 == 0 || index >= records_.size())
      Die(op[0] == 'F' ? "Free of a handle never allocated" : "Resolve of a handle never allocated",
          handle);
    Record& r = records_[index];
    if (!r.mem) Die(op[0] == 'F' ? "Free of a freed handle" : "Resolve of a freed handle", handle);
    return r;
  }

  std::vector<Record> records_;
  std::vector<std::unique_ptr<unsigned char[]>> quarantine_;
  size_t quarantine_bytes_ = 0;
  uint64_t calls_ = 0, refused_ = 0, resolves_ = 0, live_ = 0, live_bytes_ = 0;
  uint64_t fail_every_ = 0, fail_at_ = 0;
};

// What the index must answer, kept the obvious way.
struct Model {
  std::map<int64_t, int64_t> keys;
  std::multiset<int64_t> values;

  void Set(int64_t k, int64_t v) {
    auto it = keys.find(k);
    if (it != keys.end()) {
      values.erase(values.find(it->second));
      it->second = v;
    } else {
      keys[k] = v;
    }
    values.insert(v);
  }
  bool Remove(int64_t k) {
    auto it = keys.find(k);
    if (it == keys.end()) return false;
    values.erase(values.find(it->second));
    keys.erase(it);
    return true;
  }
  uint64_t CountGreater(int64_t v) const {
    return uint64_t(std::distance(values.upper_bound(v), values.end()));
  }
};

// An index with its own allocator; destroyed (and checked to have freed everything) at the end.
struct Fixture {
  explicit Fixture(uint32_t block_values = sc::kRankBlockValues) {
    std::memset(&ix, kGarbage, sizeof ix);  // the root starts as garbage too
    ix.Init(block_values);
  }
  ~Fixture() {
    ix.Destroy(a);
    EXPECT_EQ(a.live(), 0u) << "Destroy left allocations";
    EXPECT_EQ(ix.Bytes(), 0u);
  }
  bool Set(int64_t k, int64_t v) { return ix.Set(a, k, v); }
  bool Remove(int64_t k) { return ix.Remove(a, k); }
  uint64_t Greater(int64_t v) { return ix.CountGreater(a, v); }
  uint64_t RankOf(int64_t k) {
    uint64_t r = 0;
    EXPECT_TRUE(ix.Rank(a, k, &r)) << "key " << k;
    return r;
  }
  bool Find(int64_t k, int64_t* v) { return ix.Find(a, k, v); }
  const char* Inconsistency() { return ix.Inconsistency(a); }

  HandleAllocator a;
  RankIndex ix;
};

// The index holds exactly the model: same keys with the same values (Find), the same multiset of
// values (CountGreater at each distinct value and just below it pins every multiplicity), every
// invariant (Inconsistency), and Bytes() is what the allocator has handed out.
void ExpectSame(Fixture& f, const Model& m) {
  ASSERT_EQ(f.ix.Size(), m.keys.size());
  EXPECT_EQ(f.ix.Bytes(), f.a.live_bytes());
  const char* why = f.Inconsistency();
  ASSERT_EQ(why, nullptr) << why;
  for (const auto& kv : m.keys) {
    int64_t got = 0;
    ASSERT_TRUE(f.Find(kv.first, &got)) << "key " << kv.first;
    ASSERT_EQ(got, kv.second) << "key " << kv.first;
  }
  uint64_t greater = 0;
  for (auto it = m.values.rbegin(); it != m.values.rend();) {
    int64_t v = *it;
    uint64_t same = m.values.count(v);
    ASSERT_EQ(f.Greater(v), greater) << "value " << v;
    if (v != kMin) {
      ASSERT_EQ(f.Greater(v - 1), greater + same) << "value " << v - 1;
    }
    greater += same;
    std::advance(it, same);
  }
  EXPECT_EQ(f.Greater(kMax), 0u);
}

const int64_t kEdgeValues[] = {kMin, kMin + 1, -2, -1, 0, 1, 2, kMax - 1, kMax};

// Values that collide a lot (a small range, the extremes) and values that do not.
int64_t PickValue(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return kEdgeValues[rng() % (sizeof kEdgeValues / sizeof kEdgeValues[0])];
    case 1:
    case 2:
    case 3:
      return int64_t(rng() % 16) - 8;
    default:
      return int64_t(rng());
  }
}

// Keys from a small range (so Sets often replace), plus the extremes (kMin is the map's empty
// marker, stored apart).
int64_t PickKey(std::mt19937_64& rng, int64_t range) {
  if (rng() % 50 == 0) return rng() % 2 ? kMin : kMax;
  return int64_t(rng() % uint64_t(range)) - range / 2;
}

int64_t AnExistingKey(std::mt19937_64& rng, const Model& m) {
  auto it = m.keys.lower_bound(int64_t(rng()));
  if (it == m.keys.end()) it = m.keys.begin();
  return it->first;
}

// One random operation on both; false if the index refused (an allocation failed), in which case
// the model is left alone. Checks every answer against the model.
bool RandomStep(Fixture& f, Model& m, std::mt19937_64& rng, int64_t key_range, int remove_weight) {
  int op = int(rng() % 100);
  if (op < 40) {  // Set, a new key or not
    int64_t k = PickKey(rng, key_range), v = PickValue(rng);
    if (!f.Set(k, v)) return false;
    m.Set(k, v);
  } else if (op < 55 && !m.keys.empty()) {  // Set an existing key larger, smaller or equal
    int64_t k = AnExistingKey(rng, m);
    int64_t old = m.keys[k], v;
    switch (rng() % 4) {
      case 0:
        v = old == kMax ? old : old + 1 + int64_t(rng() % 3);
        break;
      case 1:
        v = old == kMin ? old : old - 1;
        break;
      case 2:
        v = old;
        break;
      default:
        v = PickValue(rng);
    }
    if (!f.Set(k, v)) return false;
    m.Set(k, v);
  } else if (op < 55 + remove_weight) {  // Remove, present or not
    int64_t k = !m.keys.empty() && rng() % 4 != 0 ? AnExistingKey(rng, m) : PickKey(rng, key_range);
    EXPECT_EQ(f.Remove(k), m.Remove(k)) << "key " << k;
  } else if (op < 70 + remove_weight) {  // Find
    int64_t k = PickKey(rng, key_range), got = 0;
    auto it = m.keys.find(k);
    EXPECT_EQ(f.Find(k, &got), it != m.keys.end()) << "key " << k;
    if (it != m.keys.end()) {
      EXPECT_EQ(got, it->second);
    }
  } else {  // CountGreater at a random value, an existing one, an extreme
    int64_t v;
    switch (rng() % 3) {
      case 0:
        v = PickValue(rng);
        break;
      case 1:
        v = m.keys.empty() ? 0 : m.keys[AnExistingKey(rng, m)];
        break;
      default:
        v = rng() % 2 ? kMin : kMax;
    }
    EXPECT_EQ(f.Greater(v), m.CountGreater(v)) << "value " << v;
    if (!m.keys.empty()) {
      int64_t k = AnExistingKey(rng, m);
      EXPECT_EQ(f.RankOf(k), 1 + m.CountGreater(m.keys[k])) << "key " << k;
    }
  }
  EXPECT_EQ(f.ix.Size(), m.keys.size());
  return true;
}

TEST(RankIndex, AnEmptyIndexHoldsNothingAndAllocatesNothing) {
  Fixture f;
  EXPECT_EQ(f.ix.Size(), 0u);
  EXPECT_EQ(f.ix.Bytes(), 0u);
  for (int64_t v : kEdgeValues) EXPECT_EQ(f.Greater(v), 0u);
  int64_t got = 7;
  EXPECT_FALSE(f.Find(0, &got));
  EXPECT_FALSE(f.Find(kMin, &got));
  EXPECT_EQ(got, 7);
  uint64_t rank = 9;
  EXPECT_FALSE(f.ix.Rank(f.a, 1, &rank));
  EXPECT_EQ(rank, 9u);
  EXPECT_FALSE(f.Remove(0));
  EXPECT_FALSE(f.Remove(kMin));
  EXPECT_EQ(f.a.calls(), 0u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
}

// Values order as signed integers, the extremes included; CountGreater is strictly greater.
TEST(RankIndex, ValuesAreSignedIntegersExtremesIncluded) {
  Fixture f(4);
  const int64_t values[] = {kMax, 0, kMin, -1, kMin, 0, 1, kMax - 1, -5};
  for (int64_t k = 0; k < 9; k++) ASSERT_TRUE(f.Set(k, values[k]));
  EXPECT_EQ(f.Greater(kMin), 7u);
  EXPECT_EQ(f.Greater(kMin + 1), 7u);
  EXPECT_EQ(f.Greater(-6), 7u);
  EXPECT_EQ(f.Greater(-5), 6u);
  EXPECT_EQ(f.Greater(-1), 5u);
  EXPECT_EQ(f.Greater(0), 3u);
  EXPECT_EQ(f.Greater(1), 2u);
  EXPECT_EQ(f.Greater(kMax - 1), 1u);
  EXPECT_EQ(f.Greater(kMax), 0u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
}

// sc_rank: 1 + the keys with a strictly larger value; keys with equal values share a rank, and
// the next rank skips as many as share it.
TEST(RankIndex, RankIsOnePlusTheLargerTiesShare) {
  Fixture f(4);
  // key -> value: 10 -> 300, 11 -> 200, 12 -> 200, 13 -> 200, 14 -> 100, 15 -> kMin
  ASSERT_TRUE(f.Set(10, 300));
  ASSERT_TRUE(f.Set(11, 200));
  ASSERT_TRUE(f.Set(12, 200));
  ASSERT_TRUE(f.Set(13, 200));
  ASSERT_TRUE(f.Set(14, 100));
  ASSERT_TRUE(f.Set(15, kMin));
  EXPECT_EQ(f.RankOf(10), 1u);
  EXPECT_EQ(f.RankOf(11), 2u);
  EXPECT_EQ(f.RankOf(12), 2u);
  EXPECT_EQ(f.RankOf(13), 2u);
  EXPECT_EQ(f.RankOf(14), 5u);
  EXPECT_EQ(f.RankOf(15), 6u);
  ASSERT_TRUE(f.Set(14, 400));  // overtakes everyone
  EXPECT_EQ(f.RankOf(14), 1u);
  EXPECT_EQ(f.RankOf(10), 2u);
  EXPECT_EQ(f.RankOf(12), 3u);
  ASSERT_TRUE(f.Set(12, 300));  // leaves the tie, joins 10's
  EXPECT_EQ(f.RankOf(10), 2u);
  EXPECT_EQ(f.RankOf(12), 2u);
  EXPECT_EQ(f.RankOf(11), 4u);
  ASSERT_TRUE(f.Remove(14));
  EXPECT_EQ(f.RankOf(10), 1u);
  EXPECT_EQ(f.RankOf(11), 3u);
  uint64_t rank = 0;
  EXPECT_FALSE(f.ix.Rank(f.a, 14, &rank));
}

// kMin marks the map's empty slots and is kept in the root instead: to the caller it is a key
// like any other, through growth, replacement, removal and Build.
TEST(RankIndex, TheEmptyMarkerKeyIsAnOrdinaryKey) {
  Fixture f(4);
  Model m;
  int64_t got = 0;
  ASSERT_TRUE(f.Set(kMin, 5));
  m.Set(kMin, 5);
  ASSERT_TRUE(f.Find(kMin, &got));
  EXPECT_EQ(got, 5);
  EXPECT_EQ(f.ix.Size(), 1u);
  for (int64_t k = 1; k <= 100; k++) {  // the map grows several times around it
    ASSERT_TRUE(f.Set(k, k % 7));
    m.Set(k, k % 7);
  }
  ExpectSame(f, m);
  ASSERT_TRUE(f.Set(kMin, kMin));
  m.Set(kMin, kMin);
  ASSERT_TRUE(f.Set(kMin + 1, kMin));  // its neighbour is an ordinary key in the map
  m.Set(kMin + 1, kMin);
  ExpectSame(f, m);
  EXPECT_EQ(f.RankOf(kMin), 101u);
  ASSERT_TRUE(f.Remove(kMin));
  m.Remove(kMin);
  EXPECT_FALSE(f.Find(kMin, &got));
  EXPECT_FALSE(f.Remove(kMin));
  ExpectSame(f, m);
  const int64_t keys[] = {kMin, 3, kMin, kMax};
  const int64_t values[] = {1, 2, 3, 4};
  ASSERT_TRUE(f.ix.Build(f.a, keys, values, 4));
  Model b;
  for (int i = 0; i < 4; i++) b.Set(keys[i], values[i]);
  ExpectSame(f, b);
  ASSERT_TRUE(f.Find(kMin, &got));
  EXPECT_EQ(got, 3) << "a key given twice to Build keeps its last value";
}

// Many seeds, block sizes from the smallest to the real one, every operation mixed; the
// allocations move to new addresses between operations.
TEST(RankIndex, MatchesAModelUnderRandomOperations) {
  const uint32_t block_sizes[] = {2, 3, 4, 5, 8, 64, sc::kRankBlockValues};
  for (uint32_t block_values : block_sizes) {
    for (uint64_t seed = 1; seed <= 30; seed++) {
      SCOPED_TRACE(testing::Message() << "block_values " << block_values << " seed " << seed);
      std::mt19937_64 rng(seed * 7919 + block_values);
      Fixture f(block_values);
      Model m;
      int64_t key_range = seed % 3 == 0 ? 40 : 1200;
      for (int step = 0; step < 3000; step++) {
        // Grow first, then shrink, so that blocks split and then merge.
        int remove_weight = step < 1800 ? 5 : 45;
        ASSERT_TRUE(RandomStep(f, m, rng, key_range, remove_weight));
        if (::testing::Test::HasFailure()) return;
        if (step % 7 == 0) f.a.Remap();
        if (step % 300 == 299) ExpectSame(f, m);
      }
      ExpectSame(f, m);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Many keys with the same value: runs of one value span blocks whose first values are equal.
TEST(RankIndex, HeavyDuplicatesSpanBlocks) {
  for (uint32_t block_values : {2u, 4u, 8u}) {
    SCOPED_TRACE(testing::Message() << "block_values " << block_values);
    Fixture f(block_values);
    Model m;
    std::mt19937_64 rng(block_values);
    for (int64_t k = 0; k < 600; k++) {
      int64_t v = k < 200 ? 7 : k < 400 ? 3 : 9;
      ASSERT_TRUE(f.Set(k, v));
      m.Set(k, v);
    }
    ExpectSame(f, m);
    EXPECT_EQ(f.Greater(7), 200u);
    EXPECT_EQ(f.Greater(6), 400u);
    EXPECT_EQ(f.Greater(2), 600u);
    EXPECT_EQ(f.RankOf(0), 201u);
    std::vector<int64_t> order(600);
    for (int64_t k = 0; k < 600; k++) order[size_t(k)] = k;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < order.size(); i++) {
      int64_t k = order[i];
      switch (i % 3) {
        case 0:  // leave its run for another
          ASSERT_TRUE(f.Set(k, m.keys[k] == 7 ? 3 : 7));
          m.Set(k, m.keys[k] == 7 ? 3 : 7);
          break;
        case 1:  // the same value again: nothing moves
          ASSERT_TRUE(f.Set(k, m.keys[k]));
          break;
        default:
          ASSERT_TRUE(f.Remove(k));
          m.Remove(k);
      }
      for (int64_t v : {2, 3, 6, 7, 8, 9}) ASSERT_EQ(f.Greater(v), m.CountGreater(v)) << v;
      if (i % 50 == 0) ExpectSame(f, m);
    }
    ExpectSame(f, m);
  }
}

// Blocks of 4: a fifth value splits a block in halves (the new value joining its half), and a
// removal that leaves two neighbours with 2 or fewer values merges them.
TEST(RankIndex, BlocksSplitWhenFullAndMergeWhenTwoFitInHalf) {
  Fixture f(4);
  for (int64_t k = 1; k <= 4; k++) ASSERT_TRUE(f.Set(k, k * 10));  // [10 20 30 40]
  EXPECT_EQ(f.ix.blocks, 1u);
  ASSERT_TRUE(f.Set(5, 50));  // [10 20] [30 40 50]
  EXPECT_EQ(f.ix.blocks, 2u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  ASSERT_TRUE(f.Set(6, 30));  // equal to the second block's first: [10 20] [30 30 40 50]
  EXPECT_EQ(f.ix.blocks, 2u);
  EXPECT_EQ(f.Greater(29), 4u);
  EXPECT_EQ(f.Greater(30), 2u);
  ASSERT_TRUE(f.Set(7, 25));  // [10 20 25] [30 30 40 50]
  ASSERT_TRUE(f.Set(8, 5));   // below every block: the first block, [5 10 20 25]
  EXPECT_EQ(f.ix.blocks, 2u);
  EXPECT_EQ(f.Greater(4), 8u);
  ASSERT_TRUE(f.Set(9, 1));  // splits the first, 1 joins the lower half: [1 5 10] [20 25] ...
  EXPECT_EQ(f.ix.blocks, 3u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  EXPECT_EQ(f.Greater(0), 9u);
  EXPECT_EQ(f.Greater(5), 7u);
  EXPECT_EQ(f.Greater(25), 4u);
  // Take values out of the first two blocks until two neighbours hold 2 together.
  ASSERT_TRUE(f.Remove(1));  // 10: [1 5] [20 25] [30 30 40 50]
  EXPECT_EQ(f.ix.blocks, 3u);
  ASSERT_TRUE(f.Remove(8));  // 5: [1] [20 25] ...: 1 + 2 > 2, no merge
  EXPECT_EQ(f.ix.blocks, 3u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  ASSERT_TRUE(f.Remove(2));  // 20: [1] [25]: 2 together, merged: [1 25] [30 30 40 50]
  EXPECT_EQ(f.ix.blocks, 2u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  EXPECT_EQ(f.Greater(1), 5u);
  EXPECT_EQ(f.Greater(25), 4u);
  // The first value of a block leaves: the directory learns its new first value.
  ASSERT_TRUE(f.Remove(3));  // 30 (key 3): [1 25] [30 40 50]
  ASSERT_TRUE(f.Remove(6));  // 30 (key 6): [1 25] [40 50]
  EXPECT_EQ(f.Inconsistency(), nullptr);
  EXPECT_EQ(f.Greater(35), 2u);
  EXPECT_EQ(f.Greater(39), 2u);
  ASSERT_TRUE(f.Set(3, 39));  // below the second block's first value: [1 25 39] [40 50]
  EXPECT_EQ(f.Greater(38), 3u);
  EXPECT_EQ(f.Greater(39), 2u);
  EXPECT_EQ(f.ix.blocks, 2u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  // Empty it: blocks go away one by one; the directory stays.
  for (int64_t k : {3, 4, 5, 7, 9}) ASSERT_TRUE(f.Remove(k));
  EXPECT_EQ(f.ix.blocks, 0u);
  EXPECT_EQ(f.ix.Size(), 0u);
  EXPECT_EQ(f.Greater(kMin), 0u);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  EXPECT_EQ(f.a.live(), 2u) << "the map and the directory";
  ASSERT_TRUE(f.Set(1, 1));
  EXPECT_EQ(f.RankOf(1), 1u);
}

// Ascending and descending runs split the last and the first block over and over.
TEST(RankIndex, AscendingAndDescendingRunsSplitTheEnds) {
  for (int direction : {1, -1}) {
    Fixture f(4);
    Model m;
    for (int64_t k = 0; k < 300; k++) {
      ASSERT_TRUE(f.Set(k, direction * k));
      m.Set(k, direction * k);
      ASSERT_EQ(f.Inconsistency(), nullptr) << k;
    }
    ExpectSame(f, m);
    for (int64_t k = 0; k < 300; k += 2) {  // every other: merges all along
      ASSERT_TRUE(f.Remove(k));
      m.Remove(k);
      ASSERT_EQ(f.Inconsistency(), nullptr) << k;
    }
    ExpectSame(f, m);
  }
}

// The map grows by half past 17/20 full and keeps every key, from 16 slots to 10,000 keys.
TEST(RankIndex, TheMapGrowsAndKeepsEveryKey) {
  Fixture f;
  Model m;
  uint64_t capacity = 0;
  int growths = 0;
  for (int64_t k = 0; k < 10000; k++) {
    int64_t key = k * 0x100000001LL;  // keys far apart, in both halves of the hash
    ASSERT_TRUE(f.Set(key, k % 97));
    m.Set(key, k % 97);
    if (f.ix.capacity != capacity) {
      if (capacity != 0) {
        EXPECT_EQ(f.ix.capacity, capacity + capacity / 2);
      }
      capacity = f.ix.capacity;
      growths++;
      ExpectSame(f, m);
      f.a.Remap();
    }
    ASSERT_LE(f.ix.Size() * 20, f.ix.capacity * 17);
  }
  EXPECT_GE(growths, 15) << "16 slots to 10,000 keys by halves";
  ExpectSame(f, m);
}

// The slot a key's probe run starts from in a map of `slots` slots (rank_index.hpp: Home).
uint64_t HomeOf(int64_t key, uint64_t slots) {
  return uint64_t((static_cast<unsigned __int128>(sc::MixBits(uint64_t(key))) * slots) >> 64);
}

// A removal shifts back the keys after it in their probe run, also where the run wraps from the
// table's last slot to its first: every order of removing five keys whose runs cross the end.
TEST(RankIndex, RemovalShiftsProbeRunsAcrossTheTableEnd) {
  // In 16 slots: one key at home 14, three at home 15, one at home 0. Their runs cover 14..3.
  std::vector<int64_t> keys;
  int at14 = 0, at15 = 0, at0 = 0;
  for (int64_t k = 1; keys.size() < 5; k++) {
    uint64_t home = HomeOf(k, 16);
    if (home == 14 && at14 < 1) at14++, keys.push_back(k);
    if (home == 15 && at15 < 3) at15++, keys.push_back(k);
    if (home == 0 && at0 < 1) at0++, keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> order = keys;
  int orders = 0;
  do {
    Fixture f(4);
    Model m;
    for (int64_t k : keys) {
      ASSERT_TRUE(f.Set(k, k));
      m.Set(k, k);
    }
    ASSERT_EQ(f.ix.capacity, 16u);
    for (int64_t k : order) {
      ASSERT_TRUE(f.Remove(k));
      m.Remove(k);
      ExpectSame(f, m);
    }
    orders++;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 120);
}

// Build from unsorted input (a key given twice keeps its last value) equals as many Sets; then
// every kind of Set and Remove on top of it.
TEST(RankIndex, BuildThenMutationsMatchTheModel) {
  for (uint32_t block_values : {4u, 8u, sc::kRankBlockValues}) {
    for (uint64_t seed = 1; seed <= 4; seed++) {
      SCOPED_TRACE(testing::Message() << "block_values " << block_values << " seed " << seed);
      std::mt19937_64 rng(seed);
      size_t n = seed == 1 ? 1 : 3000 * seed;
      std::vector<int64_t> keys(n), values(n);
      Model m;
      for (size_t i = 0; i < n; i++) {
        keys[i] = PickKey(rng, int64_t(n));  // about a third given twice
        values[i] = PickValue(rng);
        m.Set(keys[i], values[i]);
      }
      Fixture f(block_values);
      ASSERT_TRUE(f.ix.Build(f.a, keys.data(), values.data(), n));
      f.a.Remap();
      ExpectSame(f, m);
      // Blocks 3/4 full, the last one excepted.
      if (block_values == sc::kRankBlockValues) {
        EXPECT_EQ(f.ix.blocks, (m.keys.size() + 383) / 384);
      }
      for (int step = 0; step < 3000; step++) {
        ASSERT_TRUE(RandomStep(f, m, rng, int64_t(n), step < 1500 ? 5 : 45));
        if (step % 11 == 0) f.a.Remap();
      }
      ExpectSame(f, m);
    }
  }
}

// Build replaces what the index held and frees it; an empty Build empties the index.
TEST(RankIndex, BuildReplacesTheContentsAndFreesTheOld) {
  Fixture f(4);
  for (int64_t k = 0; k < 1000; k++) ASSERT_TRUE(f.Set(k, k % 13));
  uint64_t before = f.a.live();
  EXPECT_GT(before, 300u);
  std::vector<int64_t> keys, values;
  Model m;
  for (int64_t k = 0; k < 50; k++) {
    keys.push_back(5000 - k);
    values.push_back(k);
    m.Set(5000 - k, k);
  }
  ASSERT_TRUE(f.ix.Build(f.a, keys.data(), values.data(), keys.size()));
  ExpectSame(f, m);
  EXPECT_EQ(f.a.live(), 2u + f.ix.blocks) << "the map, the directory and the blocks, no more";
  int64_t got;
  EXPECT_FALSE(f.Find(0, &got));
  ASSERT_TRUE(f.ix.Build(f.a, nullptr, nullptr, 0));
  EXPECT_EQ(f.ix.Size(), 0u);
  EXPECT_EQ(f.a.live(), 0u);
  EXPECT_EQ(f.ix.Bytes(), 0u);
  ExpectSame(f, Model());
}

// Build allocates the map, its sort space, the directory and each block once: not one
// allocation per key, as n Sets would make on splits.
TEST(RankIndex, BuildAllocatesEachBlockOnce) {
  Fixture f;
  std::vector<int64_t> keys(10000), values(10000);
  std::mt19937_64 rng(3);
  Model m;
  for (size_t i = 0; i < keys.size(); i++) {
    keys[i] = int64_t(i) * 7 - 20000;
    values[i] = int64_t(rng() % 1000);
    m.Set(keys[i], values[i]);
  }
  uint64_t calls = f.a.calls();
  ASSERT_TRUE(f.ix.Build(f.a, keys.data(), values.data(), keys.size()));
  EXPECT_EQ(f.ix.blocks, 27u) << "10,000 values, 384 to a block";
  EXPECT_EQ(f.a.calls() - calls, 3u + f.ix.blocks);
  EXPECT_EQ(f.a.live(), 2u + f.ix.blocks) << "the sort space is freed";
  ExpectSame(f, m);
}

// BuildBytes says, before a Build, what the built index holds (the fair share of rank_memory
// asks for it before the build).
TEST(RankIndex, BuildBytesIsWhatABuildHolds) {
  for (size_t n : {1u, 3u, 17u, 384u, 385u, 10000u, 100003u}) {
    for (uint32_t block_values : {4u, sc::kRankBlockValues}) {
      Fixture f(block_values);
      std::vector<int64_t> keys(n), values(n);
      for (size_t i = 0; i < n; i++) {
        keys[i] = int64_t(i) * 3 + 1;
        values[i] = int64_t(i % 101);
      }
      ASSERT_TRUE(f.ix.Build(f.a, keys.data(), values.data(), n));
      EXPECT_EQ(RankIndex::BuildBytes(n, block_values), f.ix.Bytes()) << n << " " << block_values;
    }
  }
  EXPECT_EQ(RankIndex::BuildBytes(0), 0u);
}

// Every Nth allocation refused: a Set that fails changes not one byte (root and allocations),
// the model says the same as before, and a Set that succeeds had no allocation refused.
TEST(RankIndex, AFailedSetChangesNotOneByte) {
  uint64_t failed_calls = 0;
  for (uint64_t every : {1u, 2u, 3u, 4u, 5u, 7u, 11u}) {
    for (uint32_t block_values : {2u, 4u, 16u}) {
      SCOPED_TRACE(testing::Message() << "every " << every << " block_values " << block_values);
      std::mt19937_64 rng(every * 31 + block_values);
      Fixture f(block_values);
      Model m;
      f.a.FailEvery(every);
      for (int step = 0; step < 1500; step++) {
        RankIndex root;
        std::memcpy(&root, &f.ix, sizeof root);
        auto memory = f.a.Snapshot();
        uint64_t refused = f.a.refused();
        bool done = RandomStep(f, m, rng, 300, step < 1000 ? 5 : 45);
        if (done) {
          ASSERT_EQ(f.a.refused(), refused) << "succeeded although an allocation was refused";
        } else {
          failed_calls++;
          ASSERT_GT(f.a.refused(), refused) << "failed with every allocation granted";
          ASSERT_EQ(std::memcmp(&root, &f.ix, sizeof root), 0) << "the root changed";
          ASSERT_TRUE(memory == f.a.Snapshot()) << "an allocation changed, came or went";
          ExpectSame(f, m);
        }
        if (step % 5 == 0) f.a.Remap();
        if (step % 100 == 99) ExpectSame(f, m);
      }
      ExpectSame(f, m);
      // A first Set allocates three times (map, directory, block): below every 4th it never
      // gets all three, above it the index must fill up.
      if (every >= 4) {
        EXPECT_GT(m.keys.size(), 50u);
      }
    }
  }
  EXPECT_GT(failed_calls, 1000u);
}

// A Build refused its k-th allocation, for every k it makes: the index is as it was, every
// allocation Build had made is freed.
TEST(RankIndex, AFailedBuildChangesNotOneByte) {
  Fixture f(4);
  Model old;
  for (int64_t k = 0; k < 200; k++) {
    ASSERT_TRUE(f.Set(k, k % 5));
    old.Set(k, k % 5);
  }
  std::vector<int64_t> keys, values;
  Model m;
  for (int64_t k = 0; k < 300; k++) {
    keys.push_back(k * 3);
    values.push_back(-k);
    m.Set(k * 3, -k);
  }
  int refused = 0;
  for (uint64_t k = 1;; k++) {
    RankIndex root;
    std::memcpy(&root, &f.ix, sizeof root);
    auto memory = f.a.Snapshot();
    f.a.FailAt(k);
    bool done = f.ix.Build(f.a, keys.data(), values.data(), keys.size());
    f.a.FailAt(0);
    if (done) break;
    refused++;
    ASSERT_EQ(std::memcmp(&root, &f.ix, sizeof root), 0) << "allocation " << k;
    ASSERT_TRUE(memory == f.a.Snapshot()) << "allocation " << k;
    ExpectSame(f, old);
  }
  EXPECT_EQ(refused, 103) << "the map, the sort space, the directory, 100 blocks of 3";
  ExpectSame(f, m);
}

// Remove needs no memory: with every allocation refused it still empties the index.
TEST(RankIndex, RemoveNeverAllocates) {
  Fixture f(4);
  Model m;
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 500; k++) {
    ASSERT_TRUE(f.Set(k * 11, k % 9));
    m.Set(k * 11, k % 9);
    keys.push_back(k * 11);
  }
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(5));
  f.a.FailEvery(1);
  uint64_t calls = f.a.calls();
  for (size_t i = 0; i < keys.size(); i++) {
    ASSERT_TRUE(f.Remove(keys[i]));
    m.Remove(keys[i]);
    if (i % 25 == 0) ExpectSame(f, m);
  }
  EXPECT_EQ(f.a.calls(), calls);
  EXPECT_EQ(f.ix.blocks, 0u);
  ExpectSame(f, m);
}

// The harness itself: after Remap a handle resolves to a new address with the same bytes, and
// the old address reads poison; a freed handle cannot be resolved. So the model tests above
// would see an address kept inside the index.
TEST(RankIndex, TheHandleTableMovesMemoryAndCatchesStaleHandles) {
  HandleAllocator a;
  uint64_t h = a.Allocate(64);
  ASSERT_NE(h, 0u);
  auto* before = static_cast<int64_t*>(a.Resolve(h));
  before[0] = 42;
  a.Remap();
  auto* after = static_cast<int64_t*>(a.Resolve(h));
  EXPECT_NE(before, after);
  EXPECT_EQ(after[0], 42);
  int64_t poison;
  std::memset(&poison, kPoison, sizeof poison);
  EXPECT_EQ(before[0], poison);
  a.Free(h);
  EXPECT_EQ(a.live(), 0u);
  EXPECT_DEATH(a.Resolve(h), "Resolve of a freed handle");
  EXPECT_DEATH(a.Resolve(12345), "never allocated");
}

// Destroy frees every allocation (the allocator counts them) and leaves an empty, usable index.
TEST(RankIndex, DestroyFreesEverything) {
  Fixture f(4);
  Model m;
  std::mt19937_64 rng(8);
  for (int step = 0; step < 3000; step++) ASSERT_TRUE(RandomStep(f, m, rng, 2000, 5));
  EXPECT_GT(f.a.live(), 100u);
  f.ix.Destroy(f.a);
  EXPECT_EQ(f.a.live(), 0u);
  EXPECT_EQ(f.ix.Bytes(), 0u);
  ExpectSame(f, Model());
  ASSERT_TRUE(f.Set(kMin, 1));
  ASSERT_TRUE(f.Set(2, 3));
  EXPECT_EQ(f.RankOf(kMin), 2u);
  f.ix.Destroy(f.a);
  EXPECT_EQ(f.a.live(), 0u);
  f.ix.Destroy(f.a);  // twice: nothing left to free
  EXPECT_EQ(f.a.live(), 0u);
}

// sc_rank's size: 1,000,000 random keys by Set, then by Build. Prints the bytes a key holds
// (the figures in rank_index.hpp's header comment) and keeps them under 40.
TEST(RankIndex, OneMillionKeysHoldUnder40BytesEach) {
  constexpr size_t kKeys = 1000000;
  std::mt19937_64 rng(1000000);
  std::vector<int64_t> keys(kKeys), values(kKeys);
  for (size_t i = 0; i < kKeys; i++) {
    keys[i] = int64_t(rng());
    values[i] = int64_t(rng() % 100000);  // counts: many ties
  }
  // The final value of each key (a 64-bit key repeats with negligible odds; Set keeps the last).
  std::vector<std::pair<int64_t, int64_t>> last(kKeys);
  for (size_t i = 0; i < kKeys; i++) last[i] = {keys[i], int64_t(i)};
  std::stable_sort(last.begin(), last.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int64_t> sorted;
  for (size_t i = 0; i < kKeys; i++)
    if (i + 1 == kKeys || last[i + 1].first != last[i].first)
      sorted.push_back(values[size_t(last[i].second)]);
  std::sort(sorted.begin(), sorted.end());
  auto greater = [&](int64_t v) {
    return uint64_t(sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), v));
  };

  Fixture f;
  for (size_t i = 0; i < kKeys; i++) ASSERT_TRUE(f.Set(keys[i], values[i]));
  ASSERT_EQ(f.ix.Size(), sorted.size());
  double per_key = double(f.ix.Bytes()) / double(f.ix.Size());
  std::printf("1,000,000 random Sets: %.1f bytes a key (map %.2f full, %u blocks %.0f%% full)\n",
              per_key, double(f.ix.Size()) / double(f.ix.capacity), f.ix.blocks,
              100.0 * double(f.ix.Size()) / (double(f.ix.blocks) * sc::kRankBlockValues));
  EXPECT_LE(per_key, 40.0);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  for (int i = 0; i < 2000; i++) {
    int64_t v = int64_t(rng() % 100002) - 1;
    ASSERT_EQ(f.Greater(v), greater(v)) << v;
  }
  for (size_t i = 0; i < 2000; i++) {
    int64_t k = last[i * 499].first, got = 0;
    ASSERT_TRUE(f.Find(k, &got));
    EXPECT_EQ(f.RankOf(k), 1 + greater(got));
  }

  ASSERT_TRUE(f.ix.Build(f.a, keys.data(), values.data(), kKeys));
  ASSERT_EQ(f.ix.Size(), sorted.size());
  per_key = double(f.ix.Bytes()) / double(f.ix.Size());
  std::printf("Build of the same keys: %.1f bytes a key (map %.2f full, %u blocks)\n", per_key,
              double(f.ix.Size()) / double(f.ix.capacity), f.ix.blocks);
  EXPECT_LE(per_key, 40.0);
  EXPECT_EQ(f.Inconsistency(), nullptr);
  for (int i = 0; i < 2000; i++) {
    int64_t v = int64_t(rng() % 100002) - 1;
    ASSERT_EQ(f.Greater(v), greater(v)) << v;
  }
}

}  // namespace
