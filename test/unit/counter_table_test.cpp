// Single-threaded unit tests for sc::CounterTable (src/core/counter_table.hpp / .cpp).
#include "core/counter_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "test_support.hpp"

namespace {

using sc_test::Bounds;
using sc_test::CounterKey;
using sc_test::CounterTable;
using sc_test::Entry;
using sc_test::Key;
using sc_test::kNil;
using sc_test::kNoBucket;
using sc_test::kPartitions;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr size_t kGuard = 256;
constexpr unsigned char kFill = 0xA5;  // garbage the table must not rely on or spill into

// A table over a 64-byte aligned buffer of exactly BytesFor(capacity) bytes, followed by a guard
// zone. The buffer starts out as garbage so that Create must initialise everything it uses.
class TableBuffer {
 public:
  explicit TableBuffer(uint32_t capacity) : bytes_(CounterTable::BytesFor(capacity)) {
    size_t total = (bytes_ + kGuard + 63) / 64 * 64;
    mem_ = static_cast<unsigned char*>(std::aligned_alloc(64, total));
    std::memset(mem_, kFill, total);
    table_ = CounterTable::Create(mem_, capacity);
  }
  ~TableBuffer() { std::free(mem_); }
  TableBuffer(const TableBuffer&) = delete;
  TableBuffer& operator=(const TableBuffer&) = delete;

  CounterTable* operator->() const { return table_; }
  CounterTable& operator*() const { return *table_; }
  const unsigned char* begin() const { return mem_; }
  const unsigned char* end() const { return mem_ + bytes_; }
  size_t bytes() const { return bytes_; }
  bool GuardIntact() const {
    for (size_t i = 0; i < kGuard; i++)
      if (mem_[bytes_ + i] != kFill) return false;
    return true;
  }

 private:
  size_t bytes_;
  unsigned char* mem_;
  CounterTable* table_;
};

// Allocates an entry for k and links it as a resident entry with the given value, all clean.
uint32_t Insert(CounterTable& t, const CounterKey& k, int64_t value = 0) {
  uint32_t i = t.Allocate();
  if (i == kNil) return kNil;
  Entry& e = t.at(i);
  e.id = k;
  e.hash = sc::HashCounterKey(k);
  e.value.store(value);
  e.flushed.store(value);
  e.state.store(sc::kResident);
  t.Link(i);
  return i;
}

uint32_t FindKey(const CounterTable& t, const CounterKey& k) {
  return t.Find(k, sc::HashCounterKey(k));
}

// ---------------------------------------------------------------------------------------------
// Layout and Create

TEST(CounterTableLayout, EntriesLieInsideBytesForAndAreCacheLineAligned) {
  for (uint32_t cap : {1u, 2u, 7u, 64u, 127u, 128u, 129u, 1000u, 4097u}) {
    SCOPED_TRACE(cap);
    TableBuffer t(cap);
    ASSERT_EQ(t->capacity(), cap);
    ASSERT_GE(t.bytes(), sizeof(CounterTable) + sizeof(Entry) * size_t(cap));
    auto first = reinterpret_cast<const unsigned char*>(&t->at(0));
    auto last_end = reinterpret_cast<const unsigned char*>(&t->at(cap - 1) + 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_GE(first, t.begin() + sizeof(CounterTable));
    EXPECT_LE(last_end, t.end());

    // Fill the whole table (every entry written, every bucket head used), then check that nothing
    // leaked past the end of the buffer and that the header survived.
    for (uint32_t k = 0; k < cap; k++) ASSERT_NE(Insert(*t, Key(k), k), kNil);
    EXPECT_EQ(t->capacity(), cap);
    EXPECT_EQ(t->used(), cap);
    EXPECT_EQ(t->Allocate(), kNil);
    for (uint32_t k = 0; k < cap; k++) {
      uint32_t i = FindKey(*t, Key(k));
      ASSERT_NE(i, kNil) << k;
      EXPECT_EQ(t->at(i).value.load(), int64_t(k));
    }
    EXPECT_TRUE(t.GuardIntact()) << "table wrote past BytesFor(" << cap << ")";
  }
}

TEST(CounterTableLayout, CreateOverGarbageGivesAnEmptyTable) {
  TableBuffer t(100);
  EXPECT_EQ(t->capacity(), 100u);
  EXPECT_EQ(t->used(), 0u);
  for (int64_t k = -50; k < 500; k++) EXPECT_EQ(FindKey(*t, Key(k)), kNil) << k;
  for (uint32_t i = 0; i < 100; i++) {
    EXPECT_EQ(t->at(i).state.load(), sc::kFree) << i;
  }
}

TEST(CounterTableLayout, ZeroCapacityNeverAllocates) {
  TableBuffer t(0);
  EXPECT_EQ(t->capacity(), 0u);
  EXPECT_EQ(t->Allocate(), kNil);
  EXPECT_EQ(t->used(), 0u);
  EXPECT_EQ(FindKey(*t, Key(1)), kNil);
  EXPECT_TRUE(t.GuardIntact());
}

TEST(CounterTableLayout, PartitionIsHashModPartitions) {
  for (uint32_t h : {0u, 1u, 127u, 128u, 129u, 0xFFFFFFFFu, 0x80000000u, 12345678u})
    EXPECT_EQ(CounterTable::PartitionOf(h), h % kPartitions) << h;
}

// All buckets of a key share its partition (one lock covers them), yet spread over chains.
TEST(CounterTableLayout, BucketsOfAKeyShareItsPartition) {
  for (int64_t key : {INT64_C(0), INT64_C(1), INT64_C(-7), INT64_MAX}) {
    CounterKey k{16384, 3, key, kNoBucket};
    uint32_t partition = CounterTable::PartitionOf(HashCounterKey(k));
    std::set<uint32_t> hashes;
    for (int64_t b = 0; b < 1000; b++) {
      k.bucket = b * INT64_C(3600000000);
      uint32_t h = HashCounterKey(k);
      EXPECT_EQ(CounterTable::PartitionOf(h), partition);
      hashes.insert(h);
    }
    EXPECT_GT(hashes.size(), 990u);
  }
}

// ---------------------------------------------------------------------------------------------
// Allocate / Release

TEST(CounterTableAllocate, ReturnsExactlyCapacityDistinctIndexes) {
  for (uint32_t cap : {1u, 5u, 64u, 300u}) {
    SCOPED_TRACE(cap);
    TableBuffer t(cap);
    std::set<uint32_t> seen;
    for (uint32_t n = 0; n < cap; n++) {
      uint32_t i = t->Allocate();
      ASSERT_NE(i, kNil) << "kNil after only " << n << " allocations";
      ASSERT_LT(i, cap);
      EXPECT_TRUE(seen.insert(i).second) << "index " << i << " handed out twice";
      EXPECT_EQ(t->at(i).state.load(), sc::kOwned);
      EXPECT_EQ(t->used(), n + 1);
    }
    EXPECT_EQ(seen.size(), cap);
    EXPECT_EQ(t->Allocate(), kNil);
    EXPECT_EQ(t->Allocate(), kNil);  // still exhausted, and used() not disturbed by failures
    EXPECT_EQ(t->used(), cap);
  }
}

TEST(CounterTableAllocate, ReleaseThenAllocateReusesTheSlotAndBumpsGeneration) {
  constexpr uint32_t kCap = 16;
  TableBuffer t(kCap);
  std::vector<uint32_t> all;
  for (uint32_t n = 0; n < kCap; n++) all.push_back(t->Allocate());
  ASSERT_EQ(t->Allocate(), kNil);

  uint32_t victim = all[5];
  uint32_t gen = t->at(victim).generation.load();
  t->Release(victim);
  EXPECT_EQ(t->used(), kCap - 1);
  EXPECT_EQ(t->at(victim).state.load(), sc::kFree);
  EXPECT_NE(t->at(victim).generation.load(), gen) << "Release must change the generation";

  uint32_t again = t->Allocate();
  EXPECT_EQ(again, victim) << "the only free slot must be reused";
  EXPECT_EQ(t->at(again).state.load(), sc::kOwned);
  EXPECT_EQ(t->used(), kCap);
  EXPECT_EQ(t->Allocate(), kNil);

  // Every further round trip gives the slot a generation it never had before.
  std::set<uint32_t> gens_seen = {gen, t->at(victim).generation.load()};
  for (int round = 0; round < 20; round++) {
    t->Release(victim);
    ASSERT_EQ(t->Allocate(), victim);
    EXPECT_TRUE(gens_seen.insert(t->at(victim).generation.load()).second)
        << "generation repeated after " << round + 2 << " round trips";
  }

  // Releasing several slots hands back exactly those slots, each with a new generation.
  std::set<uint32_t> released = {all[0], all[3], all[15]};
  std::vector<uint32_t> gens;
  for (uint32_t i : released) {
    gens.push_back(t->at(i).generation.load());
    t->Release(i);
  }
  EXPECT_EQ(t->used(), kCap - 3);
  std::set<uint32_t> got;
  for (int n = 0; n < 3; n++) got.insert(t->Allocate());
  EXPECT_EQ(got, released);
  EXPECT_EQ(t->Allocate(), kNil);
  size_t j = 0;
  for (uint32_t i : released) EXPECT_NE(t->at(i).generation.load(), gens[j++]) << i;
}

TEST(CounterTableAllocate, UsedCountsAllocatedEntriesNotLinks) {
  TableBuffer t(10);
  EXPECT_EQ(t->used(), 0u);
  uint32_t a = Insert(*t, Key(1));
  uint32_t b = Insert(*t, Key(2));
  EXPECT_EQ(t->used(), 2u);
  uint32_t c = t->Allocate();  // owned, not linked: still used
  EXPECT_EQ(t->used(), 3u);
  t->Unlink(a);  // unlinked but not released: still used
  EXPECT_EQ(t->used(), 3u);
  t->Release(a);
  EXPECT_EQ(t->used(), 2u);
  t->Release(c);
  t->Unlink(b);
  t->Release(b);
  EXPECT_EQ(t->used(), 0u);
  std::set<uint32_t> all;
  for (int n = 0; n < 10; n++) all.insert(t->Allocate());
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(all.count(kNil), 0u);
  EXPECT_EQ(t->used(), 10u);
}

// ---------------------------------------------------------------------------------------------
// Link / Find / Unlink

TEST(CounterTableChains, LinkFindUnlink) {
  TableBuffer t(32);
  uint32_t a = Insert(*t, Key(100), 1);
  uint32_t b = Insert(*t, Key(200), 2);
  ASSERT_NE(a, kNil);
  ASSERT_NE(b, kNil);
  EXPECT_EQ(FindKey(*t, Key(100)), a);
  EXPECT_EQ(FindKey(*t, Key(200)), b);
  EXPECT_EQ(FindKey(*t, Key(300)), kNil);
  t->Unlink(a);
  EXPECT_EQ(FindKey(*t, Key(100)), kNil);
  EXPECT_EQ(FindKey(*t, Key(200)), b);
  t->Release(a);
  // A new entry for the same key after reuse is found at its new index.
  uint32_t c = Insert(*t, Key(100), 9);
  EXPECT_EQ(FindKey(*t, Key(100)), c);
  EXPECT_EQ(t->at(c).value.load(), 9);
  t->Unlink(b);
  t->Unlink(c);
  EXPECT_EQ(FindKey(*t, Key(100)), kNil);
  EXPECT_EQ(FindKey(*t, Key(200)), kNil);
}

// With capacity <= kPartitions the table has kPartitions buckets, so keys whose hashes agree in
// the low 7 bits share one chain. Build a long chain, find everything in it, and unlink from the
// head, the middle and the tail in random order.
TEST(CounterTableChains, ManyKeysCollidingInOneBucket) {
  constexpr uint32_t kCap = 64;
  constexpr uint32_t kChain = 48;
  TableBuffer t(kCap);
  std::vector<CounterKey> in_bucket, absent_same_bucket, others;
  const uint32_t target = sc::HashCounterKey(Key(0)) % kPartitions;
  for (int64_t k = 0; in_bucket.size() < kChain || absent_same_bucket.size() < 20 ||
                      others.size() < kCap - kChain;
       k++) {
    CounterKey key = Key(k);
    if (sc::HashCounterKey(key) % kPartitions == target) {
      (in_bucket.size() < kChain ? in_bucket : absent_same_bucket).push_back(key);
    } else if (others.size() < kCap - kChain) {
      others.push_back(key);
    }
  }
  std::vector<uint32_t> idx_in, idx_other;
  for (size_t n = 0; n < in_bucket.size(); n++)
    idx_in.push_back(Insert(*t, in_bucket[n], int64_t(n) + 1000));
  for (size_t n = 0; n < others.size(); n++) idx_other.push_back(Insert(*t, others[n], -int64_t(n)));
  ASSERT_EQ(t->used(), kCap);
  ASSERT_EQ(std::count(idx_in.begin(), idx_in.end(), kNil), 0);

  for (size_t n = 0; n < in_bucket.size(); n++) {
    ASSERT_EQ(FindKey(*t, in_bucket[n]), idx_in[n]) << n;
    EXPECT_EQ(t->at(idx_in[n]).value.load(), int64_t(n) + 1000);
  }
  for (size_t n = 0; n < others.size(); n++) EXPECT_EQ(FindKey(*t, others[n]), idx_other[n]);
  for (const CounterKey& k : absent_same_bucket) EXPECT_EQ(FindKey(*t, k), kNil) << k.key;

  // Unlink the chain one entry at a time in a random order; after each step exactly the
  // remaining entries are found.
  std::vector<size_t> order(in_bucket.size());
  for (size_t n = 0; n < order.size(); n++) order[n] = n;
  std::mt19937 rng(12345);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<bool> gone(in_bucket.size(), false);
  for (size_t step = 0; step < order.size(); step++) {
    size_t victim = order[step];
    t->Unlink(idx_in[victim]);
    gone[victim] = true;
    for (size_t n = 0; n < in_bucket.size(); n++) {
      ASSERT_EQ(FindKey(*t, in_bucket[n]), gone[n] ? kNil : idx_in[n])
          << "after unlinking " << step + 1 << " entries, key #" << n;
    }
    // Unlinking never disturbs other chains.
    ASSERT_EQ(FindKey(*t, others[step % others.size()]), idx_other[step % others.size()]);
  }
  // Relink in a different order and find them again (the chains are reusable).
  for (size_t n = 0; n < in_bucket.size(); n += 2) t->Link(idx_in[n]);
  for (size_t n = 0; n < in_bucket.size(); n++)
    EXPECT_EQ(FindKey(*t, in_bucket[n]), n % 2 == 0 ? idx_in[n] : kNil) << n;
}

// Entries whose full 32-bit hash is the same must still be told apart by their keys.
TEST(CounterTableChains, IdenticalHashesAreToldApartByKey) {
  TableBuffer t(32);
  constexpr uint32_t kHash = 0xDEADBEEF;
  std::vector<uint32_t> idx;
  for (int64_t k = 0; k < 20; k++) {
    uint32_t i = t->Allocate();
    Entry& e = t->at(i);
    e.id = Key(k);
    e.hash = kHash;
    e.state.store(sc::kResident);
    t->Link(i);
    idx.push_back(i);
  }
  for (int64_t k = 0; k < 20; k++) EXPECT_EQ(t->Find(Key(k), kHash), idx[k]) << k;
  EXPECT_EQ(t->Find(Key(20), kHash), kNil);
  t->Unlink(idx[7]);
  EXPECT_EQ(t->Find(Key(7), kHash), kNil);
  for (int64_t k = 0; k < 20; k++) {
    if (k == 7) continue;
    EXPECT_EQ(t->Find(Key(k), kHash), idx[k]) << k;
  }
}

// Keys that differ in only one of db, counter, key or bucket are different counters, both when
// they hash apart (the normal case) and when they are forced into one chain with one hash.
TEST(CounterTableChains, KeysDifferingInOneFieldAreDistinct) {
  const CounterKey base{42, 5, 1000, 86'400'000'000LL};
  const std::vector<CounterKey> keys = {
      base,
      {43, 5, 1000, 86'400'000'000LL},             // db
      {42, 6, 1000, 86'400'000'000LL},             // counter
      {42, 5, 1001, 86'400'000'000LL},             // key
      {42, 5, 1000, 86'400'000'000LL + 3600000000LL},  // bucket
      {42, 5, 1000, kNoBucket},                     // unbucketed vs bucketed
      {42, -5, 1000, 86'400'000'000LL},            // counter sign
      {42, 5, -1000, 86'400'000'000LL},            // key sign
  };
  for (size_t a = 0; a < keys.size(); a++)
    for (size_t b = 0; b < keys.size(); b++) EXPECT_EQ(keys[a] == keys[b], a == b) << a << "," << b;

  // Real hashes.
  {
    TableBuffer t(32);
    std::vector<uint32_t> idx;
    for (size_t n = 0; n < keys.size(); n++) idx.push_back(Insert(*t, keys[n], int64_t(n)));
    for (size_t n = 0; n < keys.size(); n++) {
      uint32_t i = FindKey(*t, keys[n]);
      ASSERT_EQ(i, idx[n]) << n;
      EXPECT_EQ(t->at(i).value.load(), int64_t(n));
    }
    std::set<uint32_t> hashes;
    for (const CounterKey& k : keys) hashes.insert(sc::HashCounterKey(k));
    EXPECT_EQ(hashes.size(), keys.size()) << "HashCounterKey ignores one of the key's fields";
  }
  // Forced identical hash: only the key comparison separates them.
  for (size_t field = 1; field < keys.size(); field++) {
    SCOPED_TRACE(field);
    TableBuffer t(4);
    uint32_t ia = Insert(*t, base, 1);
    uint32_t ib = t->Allocate();
    Entry& eb = t->at(ib);
    eb.id = keys[field];
    eb.hash.store(t->at(ia).hash.load());
    eb.value.store(2);
    eb.state.store(sc::kResident);
    t->Link(ib);
    const uint32_t h = t->at(ia).hash;
    EXPECT_EQ(t->Find(base, h), ia);
    EXPECT_EQ(t->Find(keys[field], h), ib);
    t->Unlink(ib);
    EXPECT_EQ(t->Find(keys[field], h), kNil);
    EXPECT_EQ(t->Find(base, h), ia);
  }
}

// ---------------------------------------------------------------------------------------------
// ForEachInPartition / RemoveIf

// Every linked entry of partition p, via ForEachInPartition; fails on a repeated visit.
std::multiset<uint32_t> Visit(CounterTable& t, uint32_t p) {
  std::multiset<uint32_t> seen;
  t.ForEachInPartition(p, [&](uint32_t index, Entry& e) {
    EXPECT_EQ(&e, &t.at(index));
    seen.insert(index);
  });
  return seen;
}

// Capacities with one bucket per partition (64) and with several (1000 -> 1024 buckets).
TEST(CounterTablePartitions, ForEachInPartitionVisitsExactlyTheLinkedEntriesOfThatPartition) {
  for (uint32_t cap : {64u, 1000u}) {
    SCOPED_TRACE(cap);
    TableBuffer t(cap);
    std::vector<std::set<uint32_t>> want(kPartitions);
    std::vector<uint32_t> idx;
    for (uint32_t k = 0; k < cap; k++) {
      uint32_t i = Insert(*t, Key(k, 1 + k % 2, int32_t(k % 3)));
      idx.push_back(i);
      want[CounterTable::PartitionOf(t->at(i).hash)].insert(i);
    }
    // Unlinked (owned or unlinked-but-not-released) entries are not visited.
    for (uint32_t k = 0; k < cap; k += 10) {
      t->Unlink(idx[k]);
      want[CounterTable::PartitionOf(t->at(idx[k]).hash)].erase(idx[k]);
    }
    size_t total = 0;
    for (uint32_t p = 0; p < kPartitions; p++) {
      std::multiset<uint32_t> seen = Visit(*t, p);
      EXPECT_EQ(std::set<uint32_t>(seen.begin(), seen.end()).size(), seen.size())
          << "partition " << p << ": an entry visited twice";
      EXPECT_EQ(std::set<uint32_t>(seen.begin(), seen.end()), want[p]) << "partition " << p;
      total += seen.size();
    }
    EXPECT_EQ(total, size_t(cap - (cap + 9) / 10));
  }
}

TEST(CounterTablePartitions, ForEachInPartitionOfAnEmptyTableVisitsNothing) {
  TableBuffer t(300);
  for (uint32_t p = 0; p < kPartitions; p++) EXPECT_TRUE(Visit(*t, p).empty()) << p;
}

// RemoveIf(p, pred) unlinks and frees exactly the entries of partition p matching pred, wherever
// they sit in their chains (head, middle, tail, runs of neighbours), and nothing else.
TEST(CounterTablePartitions, RemoveIfRemovesExactlyTheMatchingEntriesOfThatPartition) {
  for (uint32_t cap : {64u, 1000u}) {
    SCOPED_TRACE(cap);
    TableBuffer t(cap);
    std::vector<CounterKey> keys;
    std::vector<uint32_t> idx;
    for (uint32_t k = 0; k < cap; k++) {
      keys.push_back(Key(k, 5, int32_t(k % 7)));
      idx.push_back(Insert(*t, keys.back(), int64_t(k)));
    }
    std::vector<uint32_t> gen(cap);
    for (uint32_t k = 0; k < cap; k++) gen[k] = t->at(idx[k]).generation.load();
    std::vector<bool> removed(cap, false);
    uint64_t used = cap;
    std::mt19937 rng(cap);
    // Remove from a few partitions, with a different random predicate each time; some
    // predicates take everything, some nothing.
    for (uint32_t round = 0; round < 40; round++) {
      const uint32_t p = rng() % kPartitions;
      const uint32_t mode = round % 4;  // 0: random half, 1: all, 2: none, 3: counter 0..2
      std::set<int64_t> take;
      for (uint32_t k = 0; k < cap; k++) {
        bool pick = mode == 0 ? rng() % 2 == 0 : mode == 1 ? true : mode == 2 ? false
                                                                   : keys[k].counter < 3;
        if (pick) take.insert(keys[k].key);
      }
      uint32_t expect = 0;
      for (uint32_t k = 0; k < cap; k++)
        if (!removed[k] && take.count(keys[k].key) &&
            CounterTable::PartitionOf(sc::HashCounterKey(keys[k])) == p)
          expect++;
      uint32_t got = t->RemoveIf(p, [&](const Entry& e) {
        EXPECT_EQ(CounterTable::PartitionOf(e.hash), p) << "predicate called outside partition";
        return take.count(e.id.key) > 0;
      });
      EXPECT_EQ(got, expect) << "round " << round << " partition " << p;
      for (uint32_t k = 0; k < cap; k++)
        if (!removed[k] && take.count(keys[k].key) &&
            CounterTable::PartitionOf(sc::HashCounterKey(keys[k])) == p)
          removed[k] = true;
      used -= got;
      ASSERT_EQ(t->used(), used);
      for (uint32_t k = 0; k < cap; k++) {
        uint32_t i = FindKey(*t, keys[k]);
        if (removed[k]) {
          ASSERT_EQ(i, kNil) << "removed key #" << k << " still found";
          ASSERT_EQ(t->at(idx[k]).state.load(), sc::kFree) << k;
          ASSERT_NE(t->at(idx[k]).generation.load(), gen[k]) << "freed without new generation";
        } else {
          ASSERT_EQ(i, idx[k]) << "key #" << k << " lost by RemoveIf";
          ASSERT_EQ(t->at(i).value.load(), int64_t(k));
        }
      }
    }
    // The freed slots are back on the free list, exactly once each.
    std::set<uint32_t> freed, got;
    for (uint32_t k = 0; k < cap; k++)
      if (removed[k]) freed.insert(idx[k]);
    ASSERT_FALSE(freed.empty());
    for (size_t n = 0; n < freed.size(); n++) got.insert(t->Allocate());
    EXPECT_EQ(got, freed);
    EXPECT_EQ(t->Allocate(), kNil);
  }
}

// The chain of one bucket, emptied by RemoveIf in steps: every shape of removal within a chain.
TEST(CounterTablePartitions, RemoveIfWithinOneLongChain) {
  constexpr uint32_t kCap = 64;
  for (uint32_t seed = 0; seed < 20; seed++) {
    TableBuffer t(kCap);
    const uint32_t p = sc::HashCounterKey(Key(0)) % kPartitions;
    std::vector<CounterKey> chain;
    for (int64_t k = 0; chain.size() < 40; k++)
      if (sc::HashCounterKey(Key(k)) % kPartitions == p) chain.push_back(Key(k));
    std::vector<uint32_t> idx;
    for (const CounterKey& k : chain) idx.push_back(Insert(*t, k));
    std::mt19937 rng(seed);
    std::vector<bool> gone(chain.size(), false);
    size_t left = chain.size();
    while (left > 0) {
      std::set<int64_t> take;
      for (size_t n = 0; n < chain.size(); n++)
        if (!gone[n] && rng() % 3 == 0) take.insert(chain[n].key);
      uint32_t got =
          t->RemoveIf(p, [&](const Entry& e) { return take.count(e.id.key) > 0; });
      ASSERT_EQ(got, take.size());
      for (size_t n = 0; n < chain.size(); n++) {
        if (take.count(chain[n].key)) gone[n] = true;
        ASSERT_EQ(FindKey(*t, chain[n]), gone[n] ? kNil : idx[n]) << "seed " << seed << " #" << n;
      }
      left -= take.size();
      ASSERT_EQ(Visit(*t, p).size(), left);
    }
    EXPECT_EQ(t->used(), 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// Clock

// ---------------------------------------------------------------------------------------------
// Occupancy: linked entries per database, and who is over a fair share.

TEST(CounterTableOccupancy, LinkUnlinkAndRemoveIfCountPerDatabase) {
  TableBuffer m(64);
  CounterTable* t = &*m;
  std::vector<uint32_t> a, b;
  for (int64_t k = 0; k < 10; k++) a.push_back(Insert(*t, Key(k, 1)));
  for (int64_t k = 0; k < 4; k++) b.push_back(Insert(*t, Key(k, 2)));
  EXPECT_EQ(t->OccupancyOf(1), 10u);
  EXPECT_EQ(t->OccupancyOf(2), 4u);
  EXPECT_EQ(t->OccupancyOf(3), 0u);
  t->Unlink(a[0]);
  t->Unlink(a[0]);  // not linked any more: counts nothing
  EXPECT_EQ(t->OccupancyOf(1), 9u);
  uint32_t removed = 0;
  for (uint32_t p = 0; p < kPartitions; p++)
    removed += t->RemoveIf(p, [](const Entry& e) { return e.id.db == 2; });
  EXPECT_EQ(removed, 4u);
  EXPECT_EQ(t->OccupancyOf(2), 0u);
  EXPECT_EQ(t->OccupancyOf(1), 9u);
}

TEST(CounterTableOccupancy, ACellIsReusedOnceItsDatabaseHasNoEntryAndExtrasAreNotCounted) {
  TableBuffer m(1024);
  CounterTable* t = &*m;
  // More databases than cells: each of the first kOccupancyCells is counted, the rest not.
  std::vector<uint32_t> idx;
  for (uint32_t db = 1; db <= sc::kOccupancyCells + 5; db++) idx.push_back(Insert(*t, Key(0, db)));
  for (uint32_t db = 1; db <= sc::kOccupancyCells; db++) EXPECT_EQ(t->OccupancyOf(db), 1u) << db;
  EXPECT_EQ(t->OccupancyOf(sc::kOccupancyCells + 1), 0u);
  // Database 1 leaves: its cell goes to the next database that links an entry.
  t->Unlink(idx[0]);
  EXPECT_EQ(t->OccupancyOf(1), 0u);
  uint32_t late = Insert(*t, Key(1, 1000));
  EXPECT_EQ(t->OccupancyOf(1000), 1u);
  t->Unlink(late);
  EXPECT_EQ(t->OccupancyOf(1000), 0u);
  // An entry linked while its database was not counted is not subtracted from another's cell.
  t->Unlink(idx[sc::kOccupancyCells]);
  for (uint32_t db = 2; db <= sc::kOccupancyCells; db++) EXPECT_EQ(t->OccupancyOf(db), 1u) << db;
}

TEST(CounterTableOccupancy, OverShareNamesTheDatabasesAboveCapacityOverDatabases) {
  TableBuffer m(12);
  CounterTable* t = &*m;
  for (int64_t k = 0; k < 8; k++) Insert(*t, Key(k, 1));
  for (int64_t k = 0; k < 3; k++) Insert(*t, Key(k, 2));
  uint32_t out[sc::kOccupancyCells];
  // 1 and 2 hold entries: a share is 12 / 2 = 6.
  ASSERT_EQ(t->OverShare(2, out, int(sc::kOccupancyCells)), 1);
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(t->OverShare(1, out, int(sc::kOccupancyCells)), 0) << "never itself";
  // A third database without entries counts itself in: a share is 12 / 3 = 4.
  ASSERT_EQ(t->OverShare(3, out, int(sc::kOccupancyCells)), 1);
  EXPECT_EQ(out[0], 1u);
  // Alone, a database's share is the whole table.
  TableBuffer m2(12);
  for (int64_t k = 0; k < 12; k++) Insert(*m2, Key(k, 1));
  EXPECT_EQ(m2->OverShare(1, out, int(sc::kOccupancyCells)), 0);
}

TEST(CounterTableClock, EveryCapacityConsecutiveCallsVisitEachEntryOnce) {
  for (uint32_t cap : {1u, 3u, 10u, 129u}) {
    TableBuffer t(cap);
    for (int round = 0; round < 3; round++) {
      std::vector<int> hits(cap, 0);
      for (uint32_t n = 0; n < cap; n++) {
        uint32_t i = t->ClockNext();
        ASSERT_LT(i, cap);
        hits[i]++;
      }
      for (uint32_t i = 0; i < cap; i++) EXPECT_EQ(hits[i], 1) << "cap " << cap << " index " << i;
    }
  }
}

// Create accepts capacity 0 (Allocate then always returns kNil, which is exactly when a caller
// turns to the clock sweep); ClockNext must not divide by it.
TEST(CounterTableClock, ZeroCapacityClockNextDoesNotCrash) {
  TableBuffer t(0);
  ASSERT_EQ(t->Allocate(), kNil);
  EXPECT_EQ(t->ClockNext(), kNil);
}

// ---------------------------------------------------------------------------------------------
// Add

TEST(CounterTableAdd, ReturnsNewValue) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 0));
  int64_t nv = -1;
  ASSERT_TRUE(CounterTable::Add(e, 5, &nv));
  EXPECT_EQ(nv, 5);
  ASSERT_TRUE(CounterTable::Add(e, -8, &nv));
  EXPECT_EQ(nv, -3);
  ASSERT_TRUE(CounterTable::Add(e, 0, &nv));
  EXPECT_EQ(nv, -3);
  ASSERT_TRUE(CounterTable::Add(e, 1'000'000'000'000LL, &nv));
  EXPECT_EQ(nv, 999'999'999'997LL);
  EXPECT_EQ(e.value.load(), 999'999'999'997LL);
  EXPECT_EQ(e.flushed.load(), 0) << "Add must not touch flushed";
}

TEST(CounterTableAdd, RefusesOverflowLeavingValueUnchanged) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), kMax - 2));
  int64_t nv = 0;
  ASSERT_TRUE(CounterTable::Add(e, 2, &nv));
  EXPECT_EQ(nv, kMax);
  nv = 12345;
  EXPECT_FALSE(CounterTable::Add(e, 1, &nv));
  EXPECT_EQ(nv, 12345) << "new_value written by a refused Add";
  EXPECT_EQ(e.value.load(), kMax);
  EXPECT_FALSE(CounterTable::Add(e, kMax, &nv));
  EXPECT_EQ(e.value.load(), kMax);
  ASSERT_TRUE(CounterTable::Add(e, -1, &nv));  // still usable after a refusal
  EXPECT_EQ(nv, kMax - 1);

  Entry& f = t->at(Insert(*t, Key(2), kMin + 1));
  ASSERT_TRUE(CounterTable::Add(f, -1, &nv));
  EXPECT_EQ(nv, kMin);
  nv = 777;
  EXPECT_FALSE(CounterTable::Add(f, -1, &nv));
  EXPECT_EQ(nv, 777);
  EXPECT_EQ(f.value.load(), kMin);
  EXPECT_FALSE(CounterTable::Add(f, kMin, &nv));
  EXPECT_EQ(f.value.load(), kMin);
  EXPECT_EQ(f.flushed.load(), kMin + 1) << "a refused Add must not touch flushed";
}

// A limiter's entry holds its TAT: Throttle admits the burst, then refuses without writing; a
// read writes nothing; the answer is the step's.
TEST(CounterTableAdd, ThrottleAppliesTheLimiterStepToTheValue) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 0));
  sc::GcraLimit limit{};
  ASSERT_TRUE(sc::MakeGcraLimit(1, 1000000, 3, &limit));  // one a second, burst 3
  const int64_t now = 850000000LL * 1000000;
  for (int i = 0; i < 3; i++) {
    sc::GcraAnswer a = CounterTable::Throttle(e, now, 1, limit);
    ASSERT_TRUE(a.allowed) << i;
    EXPECT_EQ(a.remaining, 2 - i);
    EXPECT_EQ(e.value.load(), now + (i + 1) * 1000000);
  }
  sc::GcraAnswer refused = CounterTable::Throttle(e, now, 1, limit);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, 1000000);
  EXPECT_EQ(e.value.load(), now + 3000000) << "a refused call writes nothing";
  sc::GcraAnswer read = CounterTable::Throttle(e, now + 2000000, 0, limit);
  EXPECT_TRUE(read.allowed);
  EXPECT_EQ(read.remaining, 2);
  EXPECT_EQ(e.value.load(), now + 3000000) << "a read writes nothing";
  EXPECT_EQ(e.flushed.load(), 0) << "Throttle must not touch flushed";
}

TEST(CounterTableAdd, WithinAdmitsUpToTheBoundsInclusiveAndRefusesBeyondUnchanged) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 98));
  const Bounds bounds{0, 100};
  int64_t v = -1;
  ASSERT_TRUE(CounterTable::AddWithin(e, 2, bounds, &v));
  EXPECT_EQ(v, 100) << "the upper bound itself is admitted";
  EXPECT_FALSE(CounterTable::AddWithin(e, 1, bounds, &v));
  EXPECT_EQ(v, 100) << "a refusal reports the value it was refused against";
  EXPECT_EQ(e.value.load(), 100);
  ASSERT_TRUE(CounterTable::AddWithin(e, -100, bounds, &v));
  EXPECT_EQ(v, 0) << "the lower bound itself is admitted";
  EXPECT_FALSE(CounterTable::AddWithin(e, -1, bounds, &v));
  EXPECT_EQ(e.value.load(), 0);
  EXPECT_EQ(e.flushed.load(), 98) << "AddWithin must not touch flushed";
  // a value already outside: only a delta that brings it inside is admitted
  e.value.store(150);
  EXPECT_FALSE(CounterTable::AddWithin(e, 1, bounds, &v));
  EXPECT_FALSE(CounterTable::AddWithin(e, -10, bounds, &v));
  ASSERT_TRUE(CounterTable::AddWithin(e, -60, bounds, &v));
  EXPECT_EQ(v, 90);
  // no bounds: as Add, refused only by overflow
  Entry& f = t->at(Insert(*t, Key(2), kMax - 1));
  ASSERT_TRUE(CounterTable::AddWithin(f, 1, Bounds{}, &v));
  EXPECT_EQ(v, kMax);
  EXPECT_FALSE(CounterTable::AddWithin(f, 1, Bounds{}, &v));
  EXPECT_EQ(f.value.load(), kMax);
  // one-sided bounds
  Entry& g = t->at(Insert(*t, Key(3), 5));
  EXPECT_FALSE(CounterTable::AddWithin(g, -6, Bounds{0, kMax}, &v)) << "never below zero";
  ASSERT_TRUE(CounterTable::AddWithin(g, -5, Bounds{0, kMax}, &v));
  ASSERT_TRUE(CounterTable::AddWithin(g, kMax, Bounds{kMin, kMax}, &v));
  EXPECT_EQ(v, kMax);
}

TEST(CounterTableAdd, MarksEntryRecentlyUsed) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 0));
  e.usage.store(0);
  int64_t nv;
  ASSERT_TRUE(CounterTable::Add(e, 1, &nv));
  EXPECT_NE(e.usage.load(), 0u);
}

// ---------------------------------------------------------------------------------------------
// AgeAndTestEvictable

TEST(CounterTableEvict, UsageBitGivesASecondChance) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 10));  // clean, usage set by Allocate
  ASSERT_NE(e.usage.load(), 0u);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << "recently used entry evicted at once";
  EXPECT_EQ(e.usage.load(), 0u) << "the sweep must clear the usage bit";
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e)) << "clean, unused, resident entry kept";
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));

  // Use it again (value changes), flush it: once more one chance.
  int64_t nv;
  ASSERT_TRUE(CounterTable::Add(e, 1, &nv));
  e.flushed.store(nv);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e));
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));
}

TEST(CounterTableEvict, DirtyEntryIsNeverEvictable) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 10));
  int64_t nv;
  ASSERT_TRUE(CounterTable::Add(e, 3, &nv));  // value 13, flushed 10
  for (int n = 0; n < 10; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << n;
  EXPECT_EQ(e.usage.load(), 0u);
  // Partly flushed is still dirty.
  e.flushed.store(12);
  for (int n = 0; n < 3; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << n;
  // Dirty the other way round (value below flushed: a negative delta) is dirty too.
  e.flushed.store(20);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e));
  // Once flushed it becomes evictable.
  e.flushed.store(13);
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));
}

// An entry read by a flush that has not settled is not evicted even when clean by value (its
// value may have gone up and back down while the values table is about to get the delta).
TEST(CounterTableEvict, InFlushIsNeverEvictable) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 10));
  e.usage.store(0);
  e.in_flush.store(1);
  for (int n = 0; n < 5; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << n;
  e.usage.store(1);
  for (int n = 0; n < 5; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << n;
  e.in_flush.store(0);
  e.usage.store(0);
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));  // the control: settled, it goes
}

// An entry pinned by a committing transaction is not evicted: its delta is already in the tables
// and about to be added to the entry, so a reload would count it twice.
TEST(CounterTableEvict, PinnedIsNeverEvictable) {
  TableBuffer t(4);
  Entry& e = t->at(Insert(*t, Key(1), 10));
  e.usage.store(0);
  e.pins.store(2);
  e.reserved_up.store(5);
  e.reserved_down.store(-3);
  for (int n = 0; n < 5; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << n;
  e.pins.store(0);
  e.reserved_up.store(0);
  e.reserved_down.store(0);
  e.usage.store(0);
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));  // the control: unpinned, it goes
}

// A reused slot starts with no pins and no reservation.
TEST(CounterTableEvict, ReallocatedSlotIsNotPinned) {
  TableBuffer t(1);
  uint32_t i = Insert(*t, Key(1), 0);
  t->at(i).pins.store(3);
  t->at(i).reserved_up.store(7);
  t->at(i).reserved_down.store(-7);
  ASSERT_EQ(t->RemoveIf(CounterTable::PartitionOf(t->at(i).hash), [](const Entry&) { return true; }),
            1u);
  uint32_t j = Insert(*t, Key(2), 0);
  ASSERT_EQ(j, i);
  EXPECT_EQ(t->at(j).pins.load(), 0u);
  EXPECT_EQ(t->at(j).reserved_up.load(), 0);
  EXPECT_EQ(t->at(j).reserved_down.load(), 0);
}

// A slot freed while a flush had it marked (a drop removed it) must not carry the mark into its
// next life, where no flush would ever settle it and it could never be evicted.
TEST(CounterTableEvict, ReallocatedSlotIsNotMarkedInFlush) {
  TableBuffer t(1);
  uint32_t i = Insert(*t, Key(1), 0);
  t->at(i).in_flush.store(1);
  ASSERT_EQ(t->RemoveIf(CounterTable::PartitionOf(t->at(i).hash), [](const Entry&) { return true; }),
            1u);
  uint32_t j = Insert(*t, Key(2), 0);
  ASSERT_EQ(j, i);
  EXPECT_EQ(t->at(j).in_flush.load(), 0u);
  t->at(j).usage.store(0);
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(t->at(j)));
}

TEST(CounterTableEvict, NonResidentIsNeverEvictable) {
  TableBuffer t(4);
  uint32_t i = t->Allocate();
  Entry& e = t->at(i);
  e.id = Key(1);
  e.hash = sc::HashCounterKey(e.id);
  e.value.store(5);
  e.flushed.store(5);  // clean: only the state can keep it
  for (uint32_t st : {uint32_t(sc::kOwned), uint32_t(sc::kLoading), uint32_t(sc::kFree)}) {
    e.state.store(st);
    e.usage.store(0);
    for (int n = 0; n < 3; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << "state " << st;
    e.usage.store(1);
    for (int n = 0; n < 3; n++) EXPECT_FALSE(CounterTable::AgeAndTestEvictable(e)) << "state " << st;
  }
  e.state.store(sc::kResident);
  e.usage.store(0);
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));  // the control: same entry, resident

  // A freshly allocated entry reports kOwned on its own and is not evictable.
  uint32_t j = t->Allocate();
  t->at(j).value.store(0);
  t->at(j).flushed.store(0);
  t->at(j).usage.store(0);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t->at(j)));
  // A released entry is kFree and not evictable.
  t->Release(j);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t->at(j)));
}

// ---------------------------------------------------------------------------------------------
// Scripted interleavings of the eviction protocol (one thread playing several backends; the
// partition locks are implied by the order of the steps).

// Finds a key whose hash falls in partition p (p < kPartitions), starting at key `from`.
CounterKey KeyInPartition(uint32_t p, int64_t from) {
  for (int64_t k = from;; k++)
    if (CounterTable::PartitionOf(sc::HashCounterKey(Key(k))) == p) return Key(k);
}

// The buffer's take (core/protocol.hpp: TakeFreeOrClean) does Unlink, releases the partition
// lock, then Release. A second sweep that takes the lock in between must not find the unlinked
// slot evictable, or both sweeps Release it: the slot would be pushed on the free list twice and
// handed to two keys. Unlink hands it to its caller.
TEST(CounterTableProtocol, UnlinkedEntryIsNotEvictableASecondTime) {
  TableBuffer t(4);
  const uint32_t p = 5;
  uint32_t i = Insert(*t, KeyInPartition(p, 0), 7);
  Entry& e = t->at(i);
  e.usage.store(0);
  // Sweep A, partition p held exclusively: evictable, Unlink, drop the lock (Release pending).
  ASSERT_TRUE(CounterTable::PartitionOf(e.hash) == p && CounterTable::AgeAndTestEvictable(e));
  t->Unlink(i);
  // Sweep B, same lock, taken in between: the slot is not linked any more.
  EXPECT_NE(e.state.load(), sc::kResident) << "an unlinked entry still claims to be linked";
  bool b_evicts = CounterTable::PartitionOf(e.hash) == p && CounterTable::AgeAndTestEvictable(e);
  EXPECT_FALSE(b_evicts) << "a second sweep may evict the same slot";
  if (b_evicts) {
    t->Unlink(i);
    t->Release(i);  // B's Release
  }
  t->Release(i);  // A's Release
  // Every slot must come out of the free list once.
  std::multiset<uint32_t> got;
  for (int n = 0; n < 4; n++) got.insert(t->Allocate());
  EXPECT_EQ(got.count(i), 1u) << "slot " << i << " handed out twice";
}

// The check that makes a lock-free choice of victim safe: between reading the victim's hash (to
// pick the lock) and testing it under that lock, the slot can be freed and refilled by a key of
// another partition and become resident there, clean and unused. Only the generation tells; the
// model in counter_table_threads_test.cpp rechecks it, the server's take does not.
TEST(CounterTableProtocol, GenerationExposesASlotRecycledUnderTheSweep) {
  TableBuffer t(2);
  const uint32_t p = 9, q = 77;
  uint32_t s = Insert(*t, KeyInPartition(p, 0), 1);  // resident in p
  Entry& e = t->at(s);
  // Sweep S: sees s resident with a hash in p, takes p's lock, reads the generation.
  ASSERT_EQ(CounterTable::PartitionOf(e.hash), p);
  const uint32_t gen = e.generation.load();
  // Meanwhile (not under p's lock: a loader that lost its race releases after unlocking, or an
  // eviction already unlinked it): s is freed, refilled with a key of partition q, linked there,
  // loaded, and a sweep under q's lock clears its usage bit.
  t->Unlink(s);
  t->Release(s);
  ASSERT_EQ(t->Allocate(), s);
  CounterKey kq = KeyInPartition(q, 1000);
  e.id = kq;
  e.hash = sc::HashCounterKey(kq);
  e.value.store(3);
  e.flushed.store(3);
  e.state.store(sc::kResident);
  t->Link(s);
  e.usage.store(0);
  // S, still holding only p's lock: the entry now passes AgeAndTestEvictable, and S must not
  // unlink it (that would touch q's chain without q's lock). The generation says so.
  EXPECT_TRUE(CounterTable::AgeAndTestEvictable(e));  // the trap is real...
  EXPECT_NE(e.generation.load(), gen);                // ...and the generation exposes it
  EXPECT_NE(CounterTable::PartitionOf(e.hash), p);
  EXPECT_EQ(FindKey(*t, kq), s);
}

}  // namespace
