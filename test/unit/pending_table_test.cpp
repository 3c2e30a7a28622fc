// Unit tests for sc::PendingTable (src/core/pending_table.hpp): a backend's pending deltas by key,
// dense in the order entered, found through an open-addressed index that never allocates.
#include "core/pending_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using sc::CounterKey;
using sc::PendingSum;
using sc::PendingTable;

CounterKey Key(int64_t key, int32_t counter = 3) { return CounterKey{7, counter, key, -1}; }

// A table and the room it lives in, grown as the backend grows it (twice the keys).
struct Owned {
  PendingTable table;
  std::vector<PendingSum> entries;
  std::vector<uint64_t> slots;

  explicit Owned(uint32_t capacity) {
    entries.resize(capacity);
    slots.resize(PendingTable::SlotsFor(capacity));
    table.Attach(entries.data(), slots.data(), capacity);
  }
  void Grow() {
    uint32_t capacity = 2 * table.capacity();
    std::vector<PendingSum> more(capacity);
    std::vector<uint64_t> more_slots(PendingTable::SlotsFor(capacity));
    table.MoveTo(more.data(), more_slots.data(), capacity);
    entries.swap(more);
    slots.swap(more_slots);
  }
  PendingSum* Enter(const CounterKey& k, bool* found, uint32_t limit = 1u << 30) {
    if (table.Full()) Grow();
    return table.Enter(k, sc::HashCounterKey(k), found, limit);
  }
  PendingSum* Find(const CounterKey& k) { return table.Find(k, sc::HashCounterKey(k)); }
};

TEST(PendingTable, FindsEveryKeyItEnteredAndNoOther) {
  Owned o(16);
  for (int64_t k = 0; k < 5000; k++) {
    bool found = true;
    PendingSum* e = o.Enter(Key(k), &found);
    ASSERT_NE(e, nullptr);
    EXPECT_FALSE(found);
    EXPECT_EQ(e->delta, 0) << "a new entry holds nothing";
    EXPECT_EQ(e->row, 0u);
    EXPECT_EQ(e->bounds.lower, INT64_MIN);
    EXPECT_EQ(e->bounds.upper, INT64_MAX);
    e->delta = k * 3;
  }
  EXPECT_EQ(o.table.size(), 5000u);
  EXPECT_GE(o.table.capacity(), 5000u);
  for (int64_t k = 0; k < 5000; k++) {
    PendingSum* e = o.Find(Key(k));
    ASSERT_NE(e, nullptr) << k;
    EXPECT_EQ(e->delta, k * 3) << "kept across every move to larger room";
    bool found = false;
    EXPECT_EQ(o.Enter(Key(k), &found), e);
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(o.table.size(), 5000u) << "entering a key again adds nothing";
  EXPECT_EQ(o.Find(Key(5000)), nullptr);
  EXPECT_EQ(o.Find(Key(1, 4)), nullptr) << "another counter's key";
  CounterKey other_db = Key(1);
  other_db.db = 8;
  EXPECT_EQ(o.Find(other_db), nullptr) << "another database's key";
}

TEST(PendingTable, KeepsTheOrderKeysWereEntered) {
  Owned o(16);
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < 100; i++) keys.push_back((i * 7919) % 1000);
  for (int64_t k : keys) {
    bool found;
    o.Enter(Key(k), &found)->delta = 1;
  }
  size_t i = 0;
  for (const PendingSum& e : o.table) EXPECT_EQ(e.key.key, keys[i++]);
  EXPECT_EQ(i, keys.size());
}

TEST(PendingTable, AFullIndexRegionWrapsAround) {
  // 16 keys in 32 slots, whatever their hashes: probes wrap past the last slot.
  Owned o(16);
  for (int64_t k = 0; k < 16; k++) {
    bool found;
    ASSERT_NE(o.table.Enter(Key(k), sc::HashCounterKey(Key(k)), &found, 100), nullptr);
  }
  EXPECT_TRUE(o.table.Full());
  for (int64_t k = 0; k < 16; k++) EXPECT_NE(o.Find(Key(k)), nullptr) << k;
  EXPECT_EQ(o.Find(Key(99)), nullptr);
}

TEST(PendingTable, ALimitRefusesANewKeyAndEntersNothing) {
  Owned o(16);
  bool found;
  for (int64_t k = 0; k < 3; k++) ASSERT_NE(o.Enter(Key(k), &found, 3), nullptr);
  EXPECT_EQ(o.Enter(Key(3), &found, 3), nullptr) << "a fourth key beyond a limit of 3";
  EXPECT_FALSE(found);
  EXPECT_EQ(o.table.size(), 3u);
  EXPECT_EQ(o.Find(Key(3)), nullptr);
  EXPECT_NE(o.Enter(Key(2), &found, 3), nullptr) << "a key it holds is still found";
  EXPECT_TRUE(found);
}

TEST(PendingTable, ClearEmptiesItAndKeepsItsRoom) {
  Owned o(16);
  bool found;
  for (int64_t k = 0; k < 300; k++) o.Enter(Key(k), &found)->delta = 5;
  uint32_t capacity = o.table.capacity();
  o.table.Clear();
  EXPECT_EQ(o.table.size(), 0u);
  EXPECT_EQ(o.table.capacity(), capacity);
  for (uint64_t slot : o.slots) EXPECT_EQ(slot, 0u) << "every slot of an entry cleared";
  for (int64_t k = 0; k < 300; k++) EXPECT_EQ(o.Find(Key(k)), nullptr);
  PendingSum* e = o.Enter(Key(42), &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(e->delta, 0) << "an entry used before starts from nothing";
  EXPECT_EQ(o.table.begin(), e);
}

TEST(PendingTable, DetachedItFindsNothing) {
  PendingTable t;
  EXPECT_FALSE(t.attached());
  EXPECT_EQ(t.Find(Key(1), sc::HashCounterKey(Key(1))), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
