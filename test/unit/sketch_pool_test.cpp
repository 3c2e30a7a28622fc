// Unit tests for the resident sketches' pool (src/core/sketch_pool.hpp) with the counter table's
// protocol (src/core/protocol.hpp): a block is lent to one entry at a time and is free again
// once that entry left (its generation moved on), a loader with no free block evicts a clean
// entry that holds one (EvictIfIdle: never a dirty, claimed or pinned one, and the clock's second
// chance first), and a distinct counter's add (SketchAddIfResident) counts a change into the
// entry's value and its sum entry, and nothing else. The sets (src/core/sketch_set.hpp): copies,
// unions, and their stored form, which postgresql-hll reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/sketch_pool.hpp"
#include "core/sketch_set.hpp"
#include "test_support.hpp"

namespace {

using namespace sc_test;
using sc::CounterKey;
using sc::Entry;
using sc::HllShape;
using sc::kNil;
using sc::SketchPool;
using sc::SketchSet;

constexpr HllShape kShape{14, 5, -1, true};

using Proto = sc::Protocol<StdLocks>;

class SketchPoolTest : public ::testing::Test {
 protected:
  SketchPoolTest() : mem_(16), p_(mem_.get(), StdLocks()) {
    bytes_.resize(SketchPool::BytesFor(kBlocks, 16) + 64);
    void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(bytes_.data()) + 63) &
                                            ~uintptr_t(63));
    pool_ = SketchPool::Create(aligned, kBlocks, 16);
  }

  static uint32_t H(const CounterKey& k) { return sc::HashCounterKey(k); }

  // Loads k as the server does for a distinct counter: take an entry, link it loading, borrow a
  // block (kNil: none to be had, the load abandoned), finish. Returns the entry.
  uint32_t Load(const CounterKey& k, uint32_t* block = nullptr) {
    uint64_t evicted = 0;
    if (!p_.HasSum(k, H(k))) {
      uint32_t spare = p_.TakeFreeOrClean(k.db, false, 64, [](const Entry&) { return true; },
                                          &evicted);
      if (spare == kNil) return kNil;
      p_.LinkSum(spare, k, H(k));
    }
    uint32_t index =
        p_.TakeFreeOrClean(k.db, false, 64, [](const Entry&) { return true; }, &evicted);
    if (index == kNil) return kNil;
    sc::Loading loading{};
    if (p_.BeginLoad(index, k, H(k), [] { return sc::LoadStart::kLinked; }, &loading) !=
        sc::LoadStart::kLinked)
      return kNil;
    uint32_t b = pool_->Take(*mem_, index, loading.generation, kShape);
    if (block != nullptr) *block = b;
    if (b == kNil) {
      p_.AbandonLoad(loading);
      return kNil;
    }
    EXPECT_TRUE(p_.FinishLoad(loading, 0, [] { return false; }, sc::kNoWrite));
    return index;
  }

  // sc_add of element to k's resident sketch: the probe, and whether it changed.
  sc::Probe Add(const CounterKey& k, int64_t element, bool* changed) {
    sc::Dirtied dirtied;
    uint64_t hash = sc::HllHashBigint(element);
    return p_.SketchAddIfResident(k, H(k), changed, &dirtied, [&](uint32_t index) {
      uint32_t b = pool_->BlockOfResident(index);
      return sc::SketchAdd(pool_->block(b), mutex_, hash);
    });
  }

  static constexpr uint32_t kBlocks = 2;
  TableMemory mem_;
  Proto p_;
  std::vector<uint8_t> bytes_;
  SketchPool* pool_ = nullptr;
  std::mutex mutex_;
};

TEST_F(SketchPoolTest, ABlockIsLentToOneEntryUntilItLeaves) {
  uint32_t b1, b2, b3;
  uint32_t e1 = Load(Key(1), &b1);
  uint32_t e2 = Load(Key(2), &b2);
  ASSERT_NE(e1, kNil);
  ASSERT_NE(e2, kNil);
  EXPECT_NE(b1, b2);
  EXPECT_EQ(pool_->BlockOf(e1, mem_->at(e1).generation.load()), b1);
  // Both blocks are lent to resident entries, which are clean but used: a third key's load
  // finds no free block.
  EXPECT_EQ(Load(Key(3), &b3), kNil);
  EXPECT_EQ(b3, kNil);
  // The first entry leaves (the clock's second chance first, then the eviction): its block is
  // free, and it no longer names one.
  uint32_t generation = mem_->at(e1).generation.load();
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; }))
      << "used since the last sweep: marked unused, kept";
  EXPECT_TRUE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; }));
  EXPECT_EQ(pool_->BlockOf(e1, mem_->at(e1).generation.load()), kNil);
  EXPECT_NE(Load(Key(3), &b3), kNil);
  EXPECT_EQ(b3, b1) << "the block of the entry that left";
}

TEST_F(SketchPoolTest, OnlyACleanUnclaimedUnpinnedEntryIsEvictedForItsBlock) {
  uint32_t e1 = Load(Key(1));
  ASSERT_NE(e1, kNil);
  uint32_t generation = mem_->at(e1).generation.load();
  bool changed = false;
  ASSERT_EQ(Add(Key(1), 42, &changed), sc::Probe::kFound);
  EXPECT_TRUE(changed);
  Entry& e = mem_->at(e1);
  mem_->at(e1).usage.store(0);
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; }))
      << "dirty: its sketch holds what the table lacks";
  e.flushed.store(e.value.load());
  e.in_flush.store(1);
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; })) << "claimed";
  e.in_flush.store(0);
  e.pins.store(1);
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; })) << "pinned";
  e.pins.store(0);
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return false; }))
      << "may_evict refused";
  EXPECT_FALSE(p_.EvictIfIdle(e1, generation + 1, [](const Entry&) { return true; }))
      << "another generation: not the entry the caller saw";
  EXPECT_TRUE(p_.EvictIfIdle(e1, generation, [](const Entry&) { return true; }));
  EXPECT_NE(mem_->at(e1).generation.load(), generation);
}

TEST_F(SketchPoolTest, AnAddThatChangesTheSketchCountsOneIntoTheValueAndItsSum) {
  uint32_t e1 = Load(Key(1));
  ASSERT_NE(e1, kNil);
  bool changed = false;
  ASSERT_EQ(Add(Key(1), 7, &changed), sc::Probe::kFound);
  EXPECT_TRUE(changed);
  EXPECT_EQ(mem_->at(e1).value.load(), 1);
  ASSERT_EQ(Add(Key(1), 7, &changed), sc::Probe::kFound);
  EXPECT_FALSE(changed) << "the element is in the set";
  EXPECT_EQ(mem_->at(e1).value.load(), 1) << "no change, no count";
  ASSERT_EQ(Add(Key(1), 8, &changed), sc::Probe::kFound);
  EXPECT_EQ(mem_->at(e1).value.load(), 2);
  int64_t sum = 0;
  p_.ForEachResident(CounterTable::PartitionOf(H(Key(1))), [&](uint32_t, const Entry& e) {
    if (sc::IsSum(e.id)) sum += e.value.load();
  });
  EXPECT_EQ(sum, 2) << "the sum entry holds what the key holds beyond its row";
  EXPECT_EQ(Add(Key(9), 1, &changed), sc::Probe::kMissing);
  EXPECT_FALSE(changed);
}

std::vector<uint8_t> Stored(const SketchSet& s) {
  std::vector<uint8_t> out(sc::SketchSetStoredBytes(s), 0);
  sc::SketchSetWrite(s, out.data());
  return out;
}

TEST(SketchSet, UnionsAreIdempotentAndTheStoredFormReadsBack) {
  auto a = std::make_unique<SketchSet>();
  auto b = std::make_unique<SketchSet>();
  sc::SketchSetInit(*a, kShape);
  sc::SketchSetInit(*b, kShape);
  for (int64_t v = 1; v <= 600; v++) EXPECT_TRUE(sc::SketchSetAdd(*a, sc::HllHashBigint(v)));
  for (int64_t v = 401; v <= 1000; v++) (void)sc::SketchSetAdd(*b, sc::HllHashBigint(v));
  EXPECT_EQ(sc::SketchSetCount(*a), 600) << "explicit: exact";
  EXPECT_FALSE(sc::SketchSetWouldChange(*a, sc::HllHashBigint(1)));
  EXPECT_TRUE(sc::SketchSetWouldChange(*a, sc::HllHashBigint(601)));
  sc::SketchSetUnion(*a, *b);
  EXPECT_EQ(sc::SketchSetCount(*a), 1000) << "a union, not a sum; still exact";
  std::vector<uint8_t> once = Stored(*a);
  sc::SketchSetUnion(*a, *b);
  EXPECT_EQ(Stored(*a), once) << "a union done twice changes nothing";
  // Past the explicit limit (1,280 at log2m 14): registers, whose stored form reads back to
  // the same estimate.
  for (int64_t v = 1001; v <= 100000; v++) (void)sc::SketchSetAdd(*a, sc::HllHashBigint(v));
  EXPECT_TRUE(a->dense);
  std::vector<uint8_t> stored = Stored(*a);
  std::vector<uint8_t> registers(sc::kSketchDataBytes);
  sc::HllRead read{};
  ASSERT_TRUE(sc::HllReadStored(stored.data(), stored.size(), registers.data(), registers.size(),
                                &read));
  auto back = std::make_unique<SketchSet>();
  sc::SketchSetInit(*back, kShape);
  ASSERT_TRUE(sc::SketchSetUnionStored(*back, read, registers.data()));
  EXPECT_EQ(sc::SketchSetCount(*back), sc::SketchSetCount(*a));
  EXPECT_NEAR(double(sc::SketchSetCount(*a)), 100000.0, 2000.0);
  HllShape other{11, 5, -1, true};
  sc::HllRead wrong = read;
  wrong.shape = other;
  EXPECT_FALSE(sc::SketchSetUnionStored(*back, wrong, registers.data()))
      << "another shape does not union";
}

}  // namespace
