// Single-threaded tests of the partition holds against loads (src/core/through_holds.hpp), with
// the lock policy that records each acquisition (RecordingLocks): a hold is raised under its
// partition's lock EXCLUSIVE, after the keys it covers were pinned if resident, and never while
// one is being loaded; a loader refuses while its partition is held for its database's group, or
// its counter by a large commit; a release lowers it, never below zero. A large commit writes a
// key itself only if it has no entry or one that held nothing the tables lack (removed).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace sc_test;

class HoldTest : public ::testing::Test {
 protected:
  HoldTest() : mem_(16), p_(mem_.get(), RecordingLocks(&log_)) {}

  CounterTable& t() { return *mem_; }
  static uint32_t H(const CounterKey& k) { return sc::HashCounterKey(k); }
  static uint32_t P(const CounterKey& k) { return CounterTable::PartitionOf(H(k)); }
  uint32_t Held(uint32_t db, uint32_t p) { return sc::HoldOf(*holds_, db, p).load(); }

  // Keys of database db in the partition of Key(1, db), n of them.
  std::vector<CounterKey> KeysOfOnePartition(int n, uint32_t db = 7) {
    std::vector<CounterKey> keys;
    uint32_t p = P(Key(1, db));
    for (int64_t key = 1; int(keys.size()) < n; key++)
      if (P(Key(key, db)) == p) keys.push_back(Key(key, db));
    return keys;
  }

  LoadStart BeginLoad(const CounterKey& k, sc::Loading* loading) {
    uint64_t evicted = 0;
    uint32_t index =
        p_.TakeFreeOrClean(k.db, false, 16, [](const Entry&) { return true; }, &evicted);
    EXPECT_NE(index, kNil);
    return sc::BeginLoadUnlessHeld(p_, *holds_, index, k, H(k), [] { return LoadStart::kLinked; },
                                   loading);
  }
  // Loads k, and links its sum entry, as the key of a write (core/protocol.hpp: sums).
  void Load(const CounterKey& k, int64_t stored = 0) {
    sc::Loading loading{kNil, 0, 0};
    ASSERT_EQ(BeginLoad(k, &loading), LoadStart::kLinked);
    ASSERT_TRUE(p_.FinishLoad(loading, stored, [] { return false; }));
    if (!p_.HasSum(k, H(k))) {
      uint64_t evicted = 0;
      uint32_t index =
          p_.TakeFreeOrClean(k.db, false, 16, [](const Entry&) { return true; }, &evicted);
      ASSERT_NE(index, kNil);
      p_.LinkSum(index, k, H(k));
    }
  }

  // A batch's hold of the keys on their partition; the pins it took.
  bool HoldBatch(const std::vector<CounterKey>& keys, std::vector<bool>* pinned,
                 std::vector<Pin>* pins) {
    pinned->resize(keys.size(), false);
    return sc::HoldPartitionForBatch(
        p_, *holds_, keys[0].db, P(keys[0]), int(keys.size()),
        [&](int j, CounterKey* k, uint32_t* hash) {
          if ((*pinned)[size_t(j)]) return false;
          *k = keys[size_t(j)];
          *hash = H(keys[size_t(j)]);
          return true;
        },
        [&](int j, const Pin& pin) {
          (*pinned)[size_t(j)] = true;
          pins->push_back(pin);
        });
  }

  void TearDown() override {
    EXPECT_TRUE(log_.errors.empty()) << log_.errors.front();
    EXPECT_TRUE(log_.AllReleased());
    EXPECT_LE(log_.max_held, 1);
  }

  LockLog log_;
  TableMemory mem_;
  sc::Protocol<RecordingLocks> p_;
  OwnedHolds holds_;
};

TEST_F(HoldTest, HoldsStartAtZero) {
  for (uint32_t g = 0; g < sc::kHoldGroups; g++)
    for (uint32_t p = 0; p < kPartitions; p++) ASSERT_EQ((*holds_).held[g][p].load(), 0u);
}

// ---- a batch's hold ---------------------------------------------------------------------------

TEST_F(HoldTest, ABatchHoldIsRaisedUnderThePartitionsExclusiveLock) {
  std::vector<CounterKey> keys = KeysOfOnePartition(3);
  uint32_t p = P(keys[0]);
  uint32_t at_acquire = 99, at_release = 99;
  log_.on_acquire = [&](char, uint32_t) { at_acquire = Held(7, p); };
  log_.on_release = [&](uint32_t) { at_release = Held(7, p); };
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  ASSERT_TRUE(HoldBatch(keys, &pinned, &pins));
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(log_.events[0].partition, p);
  EXPECT_EQ(at_acquire, 0u);
  EXPECT_EQ(at_release, 1u) << "the hold must be up before the partition lock goes";
  EXPECT_EQ(Held(7, p), 1u);
  EXPECT_TRUE(pins.empty());
  sc::ReleaseHold(*holds_, 7, p);
  EXPECT_EQ(Held(7, p), 0u);
}

TEST_F(HoldTest, ABatchPinsItsResidentKeysInsteadOfWritingThemThrough) {
  std::vector<CounterKey> keys = KeysOfOnePartition(3);
  Load(keys[1], 5);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  ASSERT_TRUE(HoldBatch(keys, &pinned, &pins));
  EXPECT_EQ(pinned, (std::vector<bool>{false, true, false}));
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(t().at(pins[0].index).pins.load(), 1u) << "the resident key is pinned";
  EXPECT_EQ(t().at(pins[0].index).id, keys[1]);
  EXPECT_EQ(Held(7, P(keys[0])), 1u) << "the others are held";
  p_.Unpin(pins[0]);
  sc::ReleaseHold(*holds_, 7, P(keys[0]));
}

TEST_F(HoldTest, ABatchHoldsNothingWhileOneOfItsKeysIsBeingLoaded) {
  std::vector<CounterKey> keys = KeysOfOnePartition(3);
  Load(keys[0], 5);
  sc::Loading loading{kNil, 0, 0};
  ASSERT_EQ(BeginLoad(keys[1], &loading), LoadStart::kLinked);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  EXPECT_FALSE(HoldBatch(keys, &pinned, &pins)) << "a loading key: wait for it";
  EXPECT_EQ(Held(7, P(keys[0])), 0u) << "no hold while a key is being loaded";
  EXPECT_EQ(pinned, (std::vector<bool>{true, false, false})) << "the key before it is pinned";
  ASSERT_TRUE(p_.FinishLoad(loading, 4, [] { return false; }));
  // Called again once the load finished: the newly resident key is pinned, the rest held.
  EXPECT_TRUE(HoldBatch(keys, &pinned, &pins));
  EXPECT_EQ(pinned, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(pins.size(), 2u);
  EXPECT_EQ(Held(7, P(keys[0])), 1u);
  for (const Pin& pin : pins) p_.Unpin(pin);
  sc::ReleaseHold(*holds_, 7, P(keys[0]));
}

// ---- loaders -----------------------------------------------------------------------------------

TEST_F(HoldTest, NoKeyOfAHeldPartitionIsLoadedUntilEveryHoldIsReleased) {
  std::vector<CounterKey> keys = KeysOfOnePartition(4);
  uint32_t p = P(keys[0]);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  ASSERT_TRUE(HoldBatch({keys[0]}, &pinned, &pins));  // two batches hold p
  pinned.clear();
  ASSERT_TRUE(HoldBatch({keys[1]}, &pinned, &pins));
  EXPECT_EQ(Held(7, p), 2u);
  bool under_lock = false;
  log_.on_acquire = [&](char op, uint32_t q) { under_lock = op == 'X' && q == p; };
  for (const CounterKey& k : keys) {
    sc::Loading loading{kNil, 0, 0};
    EXPECT_EQ(BeginLoad(k, &loading), LoadStart::kRetry) << "any key of the partition waits";
    EXPECT_EQ(t().Find(k, H(k)), kNil);
  }
  EXPECT_TRUE(under_lock);
  EXPECT_EQ(t().used(), 0u) << "a refused load gives its entry back";
  sc::ReleaseHold(*holds_, 7, p);
  sc::Loading loading{kNil, 0, 0};
  EXPECT_EQ(BeginLoad(keys[2], &loading), LoadStart::kRetry) << "one batch still holds it";
  sc::ReleaseHold(*holds_, 7, p);
  Load(keys[2], 3);
  EXPECT_NE(t().Find(keys[2], H(keys[2])), kNil);
}

TEST_F(HoldTest, AHoldDelaysOnlyItsPartitionAndItsDatabasesGroup) {
  std::vector<CounterKey> keys = KeysOfOnePartition(1);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  ASSERT_TRUE(HoldBatch(keys, &pinned, &pins));
  // A key of another partition loads.
  CounterKey elsewhere = Key(1);
  for (int64_t key = 2; P(elsewhere) == P(keys[0]); key++) elsewhere = Key(key);
  Load(elsewhere);
  // So does a database of another group, in the same partition.
  uint32_t other = OtherGroupDb(7);
  CounterKey theirs = Key(1, other);
  for (int64_t key = 2; P(theirs) != P(keys[0]); key++) theirs = Key(key, other);
  Load(theirs);
  EXPECT_EQ(Held(other, P(keys[0])), 0u);
  sc::ReleaseHold(*holds_, 7, P(keys[0]));
}

TEST_F(HoldTest, TheRefusalOfTheCallerStillCounts) {
  sc::Loading loading{kNil, 0, 0};
  uint64_t evicted = 0;
  CounterKey k = Key(1);
  uint32_t index = p_.TakeFreeOrClean(7, false, 16, [](const Entry&) { return true; }, &evicted);
  EXPECT_EQ(sc::BeginLoadUnlessHeld(p_, *holds_, index, k, H(k), [] { return LoadStart::kStale; },
                                    &loading),
            LoadStart::kStale);
  EXPECT_EQ(t().Find(k, H(k)), kNil);
}

// ---- expiry -----------------------------------------------------------------------------------

TEST_F(HoldTest, AnExpiryUnlinksItsCleanKeysAndHoldsUnderTheSameLock) {
  std::vector<CounterKey> keys = KeysOfOnePartition(3);
  uint32_t p = P(keys[0]);
  Load(keys[0], 5);
  Load(keys[1], 6);
  int64_t value;
  bool overflow;
  Dirtied dirtied;
  ASSERT_EQ(p_.AddIfResident(keys[1], H(keys[1]), 1, &value, &overflow, &dirtied), Probe::kFound);
  std::vector<uint32_t> hashes;
  for (const CounterKey& k : keys) hashes.push_back(H(k));
  bool expirable[3] = {false, false, false};
  uint32_t at_release = 99;
  bool linked_at_release = true;
  log_.events.clear();
  log_.on_release = [&](uint32_t) {
    at_release = Held(7, p);
    linked_at_release = t().Find(keys[0], hashes[0]) != kNil;
  };
  sc::HoldPartitionForExpiry(p_, *holds_, 7, p, keys.data(), hashes.data(), 3, expirable,
                             [](const Entry&) { return true; });
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(at_release, 1u) << "held before the lock goes";
  EXPECT_FALSE(linked_at_release);
  EXPECT_TRUE(expirable[0]) << "clean: unlinked";
  EXPECT_FALSE(expirable[1]) << "dirty: written lately, kept";
  EXPECT_TRUE(expirable[2]) << "not resident";
  log_.on_release = nullptr;
  sc::Loading loading{kNil, 0, 0};
  EXPECT_EQ(BeginLoad(keys[0], &loading), LoadStart::kRetry) << "no load while its row goes";
  sc::ReleaseHold(*holds_, 7, p);
  Load(keys[0], 0);
}

// ---- a large commit's counter holds ------------------------------------------------------------

uint32_t CounterHeld(ThroughHolds& holds, uint32_t db, int32_t counter) {
  return sc::CounterHoldOf(holds, db, counter).load();
}

// A counter whose hold is counted apart from counter 3's of database 7.
int32_t OtherHeldCounter(ThroughHolds& holds) {
  for (int32_t c = 4; c < 1000; c++)
    if (&sc::CounterHoldOf(holds, 7, c) != &sc::CounterHoldOf(holds, 7, 3)) return c;
  return 4;
}

TEST_F(HoldTest, CounterHoldsStartAtZero) {
  for (uint32_t i = 0; i < sc::kCounterHoldSlots; i++) ASSERT_EQ((*holds_).counters[i].load(), 0u);
}

TEST_F(HoldTest, NoKeyOfAHeldCounterIsLoadedUntilItsHoldIsReleased) {
  sc::RaiseCounterHold(*holds_, 7, 3);
  sc::RaiseCounterHold(*holds_, 7, 3);  // two commits
  for (int64_t key = 1; key <= 8; key++) {
    sc::Loading loading{kNil, 0, 0};
    EXPECT_EQ(BeginLoad(Key(key), &loading), LoadStart::kRetry) << "every key of it waits";
    EXPECT_EQ(t().Find(Key(key), H(Key(key))), kNil);
  }
  EXPECT_EQ(t().used(), 0u) << "a refused load gives its entry back";
  // Another counter loads, in any partition.
  int32_t other = OtherHeldCounter(*holds_);
  Load(Key(1, 7, other));
  sc::ReleaseCounterHold(*holds_, 7, 3);
  sc::Loading loading{kNil, 0, 0};
  EXPECT_EQ(BeginLoad(Key(2), &loading), LoadStart::kRetry) << "one commit still holds it";
  sc::ReleaseCounterHold(*holds_, 7, 3);
  EXPECT_EQ(CounterHeld(*holds_, 7, 3), 0u);
  Load(Key(2), 3);
  EXPECT_NE(t().Find(Key(2), H(Key(2))), kNil);
}

TEST_F(HoldTest, ALargeCommitWritesTheKeysOutOfTheBufferItself) {
  sc::RaiseCounterHold(*holds_, 7, 3);
  CounterKey k = Key(1);
  Reservation r{};
  int64_t committed = 99;
  uint64_t row = 1;
  log_.events.clear();
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 5, &r, &committed, Bounds{}, sc::Write{},
                                  &row),
            Reserve::kMissing);
  EXPECT_EQ(row, 0u) << "no entry, no hint";
  EXPECT_EQ(log_.Ops(), "XR") << "decided under the partition's exclusive lock";
  EXPECT_EQ(log_.events[0].partition, P(k));
  EXPECT_EQ(t().Find(k, H(k)), kNil);
  sc::ReleaseCounterHold(*holds_, 7, 3);
}

TEST_F(HoldTest, ALargeCommitRemovesACleanEntryAndWritesItsKeyItself) {
  CounterKey k = Key(1);
  Load(k, 5);
  sc::RaiseCounterHold(*holds_, 7, 3);
  uint32_t index = t().Find(k, H(k));
  ASSERT_NE(index, kNil);
  t().at(index).row.store(0x2a0007, std::memory_order_relaxed);  // where a load found its row
  Reservation r{};
  int64_t committed = 0;
  uint64_t row = 0;
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 5, &r, &committed, Bounds{}, sc::Write{},
                                  &row),
            Reserve::kMissing);
  EXPECT_EQ(t().Find(k, H(k)), kNil) << "the entry would hold a value read before the commit";
  EXPECT_EQ(row, 0x2a0007u) << "the commit updates the row where the entry last saw it";
  sc::Loading loading{kNil, 0, 0};
  EXPECT_EQ(BeginLoad(k, &loading), LoadStart::kRetry) << "and it is not loaded again";
  sc::ReleaseCounterHold(*holds_, 7, 3);
}

TEST_F(HoldTest, ALargeCommitReservesAnEntryThatHoldsAnUnfoldedCommit) {
  CounterKey k = Key(1);
  Load(k, 5);
  Reservation first{};
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 2, &first, &committed), Reserve::kReserved);
  ASSERT_TRUE(p_.SettleReservation(first, true, 4));  // committed, not folded yet
  sc::RaiseCounterHold(*holds_, 7, 3);
  Reservation r{};
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 3, &r, &committed, Bounds{}, sc::Write{}),
            Reserve::kReserved);
  EXPECT_EQ(committed, 7);
  uint32_t index = t().Find(k, H(k));
  ASSERT_NE(index, kNil);
  EXPECT_EQ(t().at(index).pins.load(), 1u);
  EXPECT_EQ(t().at(index).reserved_up.load(), 3);
  EXPECT_TRUE(p_.SettleReservation(r, true, 5));
  EXPECT_EQ(t().at(index).value.load(), 10);
  sc::ReleaseCounterHold(*holds_, 7, 3);
}

TEST_F(HoldTest, ALargeCommitWaitsForALoadUnderWayAndForAnExpiredKeyAnotherHolds) {
  CounterKey k = Key(1);
  sc::Loading loading{kNil, 0, 0};
  ASSERT_EQ(BeginLoad(k, &loading), LoadStart::kLinked);  // before the hold
  sc::RaiseCounterHold(*holds_, 7, 3);
  Reservation r{};
  int64_t committed = 0;
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 1, &r, &committed, Bounds{}, sc::Write{}),
            Reserve::kLoading);
  ASSERT_TRUE(p_.FinishLoad(loading, 4, [] { return false; }, /*stamp=*/100));
  // Expired for a cutoff of 200, and reserved by another commit: wait for its settle.
  Reservation other{};
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &other, &committed, Bounds{}, sc::Write{300, 200}),
            Reserve::kReserved);
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 1, &r, &committed, Bounds{},
                                  sc::Write{300, 200}),
            Reserve::kBusy);
  p_.SettleReservation(other, false, 1);
  EXPECT_EQ(sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 1, &r, &committed, Bounds{},
                                  sc::Write{300, 200}),
            Reserve::kMissing)
      << "settled, it holds nothing the tables lack";
  sc::ReleaseCounterHold(*holds_, 7, 3);
}

// ---- the seams -----------------------------------------------------------------------------

using HoldDeathTest = HoldTest;

TEST_F(HoldDeathTest, AReleaseNeverGoesBelowZero) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(sc::ReleaseHold(*holds_, 7, 3), "SC_ASSERT");
  std::vector<CounterKey> keys = KeysOfOnePartition(1);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  ASSERT_TRUE(HoldBatch(keys, &pinned, &pins));
  sc::ReleaseHold(*holds_, 7, P(keys[0]));
  EXPECT_DEATH(sc::ReleaseHold(*holds_, 7, P(keys[0])), "SC_ASSERT") << "released twice";
}

TEST_F(HoldDeathTest, ALargeCommitDecidesOnlyUnderItsCountersHold) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  CounterKey k = Key(1);
  Reservation r{};
  int64_t committed = 0;
  EXPECT_DEATH(
      sc::ReserveOrWriteOwn(p_, *holds_, k, H(k), 1, &r, &committed, Bounds{}, sc::Write{}),
      "SC_ASSERT");
  EXPECT_DEATH(sc::ReleaseCounterHold(*holds_, 7, 3), "SC_ASSERT");
}

TEST_F(HoldDeathTest, ABatchHoldsOnlyItsOwnPartitionsKeys) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  CounterKey k = Key(1);
  CounterKey elsewhere = Key(2);
  for (int64_t key = 3; P(elsewhere) == P(k); key++) elsewhere = Key(key);
  std::vector<bool> pinned;
  std::vector<Pin> pins;
  EXPECT_DEATH(HoldBatch({k, elsewhere}, &pinned, &pins), "SC_ASSERT");
}

}  // namespace
