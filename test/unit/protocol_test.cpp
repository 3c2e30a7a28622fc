// Single-threaded tests of every step of src/core/protocol.hpp, with a lock policy that records
// each acquisition (RecordingLocks): each step takes the partition lock and mode the protocol says,
// releases it, and does its work under it. Where another process would act between two steps,
// the test acts at a lock's acquisition or release (LockLog::on_acquire / on_release).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace sc_test;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

using Proto = sc::Protocol<RecordingLocks>;

class ProtocolTest : public ::testing::Test {
 protected:
  explicit ProtocolTest(uint32_t capacity = 16) : mem_(capacity), p_(mem_.get(), RecordingLocks(&log_)) {}

  CounterTable& t() { return *mem_; }
  static uint32_t H(const CounterKey& k) { return sc::HashCounterKey(k); }
  static uint32_t P(const CounterKey& k) { return CounterTable::PartitionOf(H(k)); }

  // Loads k with the given stored value (and stored stamp) through the protocol (take, begin,
  // finish).
  uint32_t Load(const CounterKey& k, int64_t stored = 0, int64_t stamp = sc::kNoWrite) {
    uint64_t evicted = 0;
    uint32_t index =
        p_.TakeFreeOrClean(k.db, false, 1024, [](const Entry&) { return true; }, &evicted);
    if (index == kNil) return kNil;
    Loading loading;
    if (p_.BeginLoad(index, k, H(k), [] { return LoadStart::kLinked; }, &loading) !=
        LoadStart::kLinked)
      return kNil;
    if (!p_.FinishLoad(loading, stored, [] { return false; }, stamp)) return kNil;
    return index;
  }

  // Links the sum entry of k's (counter, bucket) in its partition, as the server's load does
  // when a write found it missing (unless it is there); false if no entry could be had.
  bool LinkSumOf(const CounterKey& k) {
    if (p_.HasSum(k, H(k))) return true;
    uint64_t evicted = 0;
    uint32_t index =
        p_.TakeFreeOrClean(k.db, false, 1024, [](const Entry&) { return true; }, &evicted);
    if (index == kNil) return false;
    p_.LinkSum(index, k, H(k));
    return true;
  }

  // Takes an entry and links it for k as loading (BeginLoad); the load is not finished.
  Loading StartLoad(const CounterKey& k) {
    uint64_t evicted = 0;
    uint32_t index =
        p_.TakeFreeOrClean(k.db, false, 8, [](const Entry&) { return true; }, &evicted);
    Loading loading{kNil, 0, 0};
    EXPECT_EQ(p_.BeginLoad(index, k, H(k), [] { return LoadStart::kLinked; }, &loading),
              LoadStart::kLinked);
    return loading;
  }

  // The value of k's resident entry (expected to be resident).
  int64_t ResidentValue(const CounterKey& k) {
    int64_t value = 0;
    EXPECT_EQ(p_.ReadIfResident(k, H(k), &value), Probe::kFound);
    return value;
  }

  // What k's sum entry holds: what the keys of k's counter and bucket in k's partition hold
  // beyond their rows (0 without a sum entry).
  int64_t SumValue(const CounterKey& k) {
    int64_t sum = 0;
    p_.ForEachSum(k.db, k.counter, P(k), [&](const Entry& e) {
      if (e.id.bucket == k.bucket) sum += e.value.load();
    });
    return sum;
  }

  int64_t Add(const CounterKey& k, int64_t delta, Dirtied* dirtied = nullptr) {
    EXPECT_TRUE(LinkSumOf(k));
    int64_t value = 0;
    bool overflow = false;
    Dirtied ignored;
    EXPECT_EQ(p_.AddIfResident(k, H(k), delta, &value, &overflow, dirtied ? dirtied : &ignored),
              Probe::kFound);
    EXPECT_FALSE(overflow);
    return value;
  }

  // Claims and settles every dirty entry of db, as one committed flush.
  std::vector<Claim> ClaimAllOf(uint32_t db) {
    std::vector<Claim> claims;
    p_.ClaimAll(
        db, [](const Entry&) { return true; }, [] { return true; },
        [&](const Claim& c, const Entry&) { claims.push_back(c); }, [](uint32_t, uint32_t) {},
        [](const Entry&) {});
    return claims;
  }

  void TearDown() override {
    EXPECT_TRUE(log_.errors.empty()) << log_.errors.front();
    EXPECT_TRUE(log_.AllReleased()) << "a partition lock was left held";
    EXPECT_LE(log_.max_held, 1) << "two partition locks held at once";
  }

  LockLog log_;
  TableMemory mem_;
  Proto p_;
};

// ---- the hot path ---------------------------------------------------------------------------

TEST_F(ProtocolTest, AddTakesTheKeysPartitionShared) {
  CounterKey k = Key(1);
  Load(k, 10);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  log_.events.clear();
  int64_t value = 0;
  bool overflow = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResident(k, H(k), 5, &value, &overflow, &d), Probe::kFound);
  EXPECT_EQ(value, 15);
  ASSERT_EQ(log_.Ops(), "SR");
  EXPECT_EQ(log_.events[0].partition, P(k));
}

TEST_F(ProtocolTest, AddHappensUnderTheLock) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  int64_t at_release = -1;
  log_.on_release = [&](uint32_t) { at_release = t().at(i).value.load(); };
  Add(k, 5);
  EXPECT_EQ(at_release, 15);
}

TEST_F(ProtocolTest, MissingKeyIsMissingAndNotCreated) {
  int64_t value = 42;
  bool overflow = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResident(Key(9), H(Key(9)), 1, &value, &overflow, &d), Probe::kMissing);
  EXPECT_EQ(t().used(), 0u);
  EXPECT_EQ(d.index, kNil);
}

TEST_F(ProtocolTest, LoadingEntryTakesNoAddAndReportsLoading) {
  CounterKey k = Key(1);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  int64_t value = 0;
  bool overflow = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResident(k, H(k), 1, &value, &overflow, &d), Probe::kLoading);
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value), Probe::kLoading);
  ASSERT_TRUE(p_.FinishLoad(loading, 7, [] { return false; }));
  EXPECT_EQ(t().at(i).value.load(), 7) << "an add while loading must not be applied";
}

TEST_F(ProtocolTest, OverflowIsRefusedAndReportsTheUnchangedValue) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, kMax - 1);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  int64_t value = 0;
  bool overflow = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResident(k, H(k), 2, &value, &overflow, &d), Probe::kFound);
  EXPECT_TRUE(overflow);
  EXPECT_EQ(value, kMax - 1);
  EXPECT_EQ(t().at(i).value.load(), kMax - 1);
  EXPECT_EQ(d.index, kNil) << "a refused add dirties nothing";
}

TEST_F(ProtocolTest, FirstAddToACleanEntryIsNotedDirtyAndLaterOnesAreNot) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 3);
  Dirtied first, second;
  Add(k, 1, &first);
  EXPECT_EQ(first.index, i);
  EXPECT_EQ(first.generation, t().at(i).generation.load());
  Add(k, 1, &second);
  EXPECT_EQ(second.index, kNil);
}

TEST_F(ProtocolTest, AddOfZeroDirtiesNothing) {
  CounterKey k = Key(1);
  Load(k, 3);
  Dirtied d;
  Add(k, 0, &d);
  EXPECT_EQ(d.index, kNil);
}

TEST_F(ProtocolTest, ReadReturnsTheValue) {
  CounterKey k = Key(1);
  Load(k, 11);
  Add(k, 4);
  int64_t value = 0;
  log_.events.clear();
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value), Probe::kFound);
  EXPECT_EQ(value, 15);
  EXPECT_EQ(log_.Ops(), "SR");
}

TEST_F(ProtocolTest, ExchangeReturnsTheOldValueMarksUsedAndNotesDirty) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 11);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  t().at(i).usage.store(0);
  int64_t old = 0;
  Dirtied d;
  EXPECT_EQ(p_.ExchangeIfResident(k, H(k), 40, &old, &d), Probe::kFound);
  EXPECT_EQ(old, 11);
  EXPECT_EQ(t().at(i).value.load(), 40);
  EXPECT_EQ(t().at(i).usage.load(), 1);
  EXPECT_EQ(d.index, i);
  Dirtied again;
  EXPECT_EQ(p_.ExchangeIfResident(k, H(k), 40, &old, &again), Probe::kFound);
  EXPECT_EQ(again.index, kNil) << "an unchanged value dirties nothing";
}

// ---- take and evict -------------------------------------------------------------------------

class SmallTable : public ProtocolTest {
 protected:
  SmallTable() : ProtocolTest(4) {}
  // Fills the table with clean resident keys 0..3, their usage bits cleared.
  void Fill() {
    for (int64_t key = 0; key < 4; key++) ASSERT_NE(Load(Key(key)), kNil);
    for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(0);
  }
  int FindKeyIn(int64_t key) { return t().Find(Key(key), H(Key(key))) != kNil ? 1 : 0; }
  uint32_t Take(uint32_t limit = 1024, bool allow = true, uint64_t* evicted = nullptr,
                uint32_t db = Key(0).db, bool yield = false) {
    uint64_t ignored = 0;
    return p_.TakeFreeOrClean(db, yield, limit, [allow](const Entry&) { return allow; },
                              evicted ? evicted : &ignored);
  }
};

TEST_F(SmallTable, FreeEntriesComeFirstWithoutAnyLock) {
  log_.events.clear();
  uint32_t i = Take();
  EXPECT_NE(i, kNil);
  EXPECT_EQ(t().at(i).state.load(), sc::kOwned);
  EXPECT_EQ(log_.Ops(), "");
}

TEST_F(SmallTable, EvictsACleanEntryUnderItsPartitionsTryLockAndCountsIt) {
  Fill();
  log_.events.clear();
  std::vector<CounterKey> linked_at_release;
  uint64_t evicted = 0;
  uint32_t i = Take(1024, true, &evicted);
  ASSERT_NE(i, kNil);
  EXPECT_EQ(evicted, 1u);
  EXPECT_EQ(t().at(i).state.load(), sc::kOwned);
  EXPECT_EQ(t().used(), 4u);
  ASSERT_GE(log_.events.size(), 2u);
  EXPECT_EQ(log_.events[0].op, 'T');
  // The victim is no longer findable under its old key.
  int found = 0;
  for (int64_t key = 0; key < 4; key++) found += FindKeyIn(key);
  EXPECT_EQ(found, 3);
}

TEST_F(SmallTable, UnlinksTheVictimUnderTheLock) {
  Fill();
  int linked_at_release = -1;
  log_.on_release = [&](uint32_t) {
    linked_at_release = 0;
    for (int64_t key = 0; key < 4; key++) linked_at_release += FindKeyIn(key);
  };
  ASSERT_NE(Take(), kNil);
  EXPECT_EQ(linked_at_release, 3);
}

TEST_F(SmallTable, RecentlyUsedEntriesGetASecondChance) {
  Fill();
  for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(1);
  EXPECT_EQ(Take(4), kNil) << "one pass only clears the usage bits";
  EXPECT_NE(Take(4), kNil);
}

// Every write to a key marks its entry used, whichever step made it: a key counted into since
// the last pass of the clock survives that pass, even when it is clean again by then (its flush
// settled). Eviction reads only the usage bit; a write that forgot it would leave hot keys to be
// evicted and reloaded from the table on every miss.
TEST_F(SmallTable, EveryKindOfWriteGivesItsEntryASecondChance) {
  struct Write {
    const char* name;
    std::function<void(const CounterKey&)> write;
  };
  const Write writes[] = {
      {"plain add",
       [this](const CounterKey& k) {
         int64_t value = 0;
         bool overflow = true;
         Dirtied dirtied;
         ASSERT_EQ(p_.AddIfResident(k, H(k), 1, &value, &overflow, &dirtied), Probe::kFound);
         ASSERT_FALSE(overflow);
       }},
      {"bounded add",
       [this](const CounterKey& k) {
         int64_t value = 0;
         bool refused = true;
         Dirtied dirtied;
         ASSERT_EQ(p_.AddIfResidentWithin(k, H(k), 1, Bounds{0, 100}, &value, &refused, &dirtied),
                   Probe::kFound);
         ASSERT_FALSE(refused);
       }},
      {"set",
       [this](const CounterKey& k) {
         int64_t old_value = 0;
         Dirtied dirtied;
         ASSERT_EQ(p_.ExchangeIfResident(k, H(k), 5, &old_value, &dirtied), Probe::kFound);
       }},
      {"batch's pinned add",
       [this](const CounterKey& k) {
         Pin pin{kNil, 0, 0};
         Probe probe = Probe::kMissing;
         p_.Exclusively(P(k), [&] { probe = p_.PinLocked(k, H(k), &pin); });
         ASSERT_EQ(probe, Probe::kFound);
         int64_t value = 0;
         Dirtied dirtied;
         ASSERT_TRUE(p_.AddPinned(pin, 1, &value, &dirtied));
         p_.Unpin(pin);
       }},
  };
  for (const Write& w : writes) {
    SCOPED_TRACE(w.name);
    // Two clean keys and their sum entries that the clock has aged (usage bits cleared), each
    // key written once.
    p_.PurgeIf([](const Entry&) { return true; });
    for (int64_t key = 0; key < 2; key++) {
      ASSERT_NE(Load(Key(key)), kNil);
      ASSERT_TRUE(LinkSumOf(Key(key)));
    }
    for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(0);
    for (int64_t key = 0; key < 2; key++) w.write(Key(key));
    for (const Claim& c : ClaimAllOf(Key(0).db)) p_.SettleClaim(c, true);
    for (uint32_t i = 0; i < 4; i++)
      ASSERT_EQ(t().at(i).value.load(), t().at(i).flushed.load()) << "clean again";
    EXPECT_EQ(Take(4), kNil) << "an entry written since the last pass was evicted at once";
    uint32_t taken = Take(4);
    EXPECT_NE(taken, kNil) << "the second pass evicts";
    if (taken != kNil) t().Release(taken);
  }
}

TEST_F(SmallTable, DirtyPinnedClaimedOrLoadingEntriesAreNotEvicted) {
  Fill();
  t().at(0).value.store(1);       // dirty
  t().at(1).pins.store(1);        // pinned
  t().at(2).in_flush.store(1);    // claimed by a flush
  t().at(3).state.store(sc::kLoading);
  EXPECT_EQ(Take(16), kNil);
  t().at(3).state.store(sc::kResident);
  t().at(3).usage.store(0);
  EXPECT_NE(Take(16), kNil);
}

// Fair shares: with two databases in the 4-entry table, each one's share is 2 entries.
TEST_F(SmallTable, ANewDatabaseEvictsTheCleanEntriesOfOneOverItsShare) {
  Fill();  // database 7 holds all 4, clean
  EXPECT_EQ(t().OccupancyOf(7), 4u);
  uint32_t i = Take(16, true, nullptr, /*db=*/8);
  ASSERT_NE(i, kNil) << "database 8 has no entry: 7 (4 of 4) is over its share of 2";
  EXPECT_EQ(t().OccupancyOf(7), 3u);
}

TEST_F(SmallTable, ADatabaseOverItsShareEvictsOnlyItsOwnEntries) {
  Fill();
  // Database 8 takes its share (2 entries) from 7's clean ones, and keeps them clean.
  for (int64_t key = 100; key < 102; key++) ASSERT_NE(Load(Key(key, 8)), kNil);
  EXPECT_EQ(t().OccupancyOf(7), 2u);
  EXPECT_EQ(t().OccupancyOf(8), 2u);
  for (uint32_t i = 0; i < 4; i++) {
    t().at(i).usage.store(0);
    if (t().at(i).id.db == 7) t().at(i).value.store(1);  // 7's entries are dirty: its flood
  }
  EXPECT_EQ(Take(16, true, nullptr, /*db=*/7), kNil)
      << "7 is not under its share: 8's clean entries are not its to take";
  EXPECT_EQ(t().OccupancyOf(8), 2u);
  uint32_t i = Take(16, true, nullptr, /*db=*/8);
  ASSERT_NE(i, kNil) << "8 recycles its own clean entries";
  EXPECT_EQ(t().OccupancyOf(8), 1u);
}

TEST_F(SmallTable, EntriesOfADatabaseOverItsShareGetNoSecondChance) {
  Fill();
  for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(1);  // 7 keeps touching them
  EXPECT_NE(Take(4, true, nullptr, /*db=*/8), kNil)
      << "8 evicts a recently used entry of 7 (4 of 4, over its share) in one pass";
  for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(1);
  EXPECT_EQ(Take(3, true, nullptr, /*db=*/7), kNil) << "7's own entries still get theirs";
}

TEST_F(SmallTable, ADatabaseThatYieldsTakesOnlyFreeEntries) {
  Fill();
  for (int64_t key = 100; key < 101; key++) ASSERT_NE(Load(Key(key, 8)), kNil);
  for (uint32_t i = 0; i < 4; i++) t().at(i).usage.store(0);
  EXPECT_TRUE(t().OverItsShare(7));
  EXPECT_FALSE(t().OverItsShare(8));
  EXPECT_EQ(Take(16, true, nullptr, /*db=*/7, /*yield=*/true), kNil)
      << "yielding, 7 leaves its clean entries to others";
  EXPECT_NE(Take(16, true, nullptr, /*db=*/8), kNil) << "which 8 takes";
  EXPECT_NE(Take(16, true, nullptr, /*db=*/7), kNil) << "not yielding, 7 evicts its own";
}

TEST_F(SmallTable, ADatabaseAloneUsesTheWholeTable) {
  Fill();
  EXPECT_NE(Take(16, true, nullptr, /*db=*/7), kNil) << "alone, 7's share is every entry";
}

TEST_F(SmallTable, TheCallersVetoKeepsAnEntry) {
  Fill();
  EXPECT_EQ(Take(16, false), kNil);
  EXPECT_EQ(t().used(), 4u);
}

TEST_F(SmallTable, ALockedPartitionIsSkippedNotWaitedFor) {
  Fill();
  for (int64_t key = 0; key < 4; key++) log_.refuse_try.push_back(P(Key(key)));
  EXPECT_EQ(Take(16), kNil);
  EXPECT_EQ(t().used(), 4u);
}

TEST_F(SmallTable, TheSweepStopsAtItsLimit) {
  Fill();
  t().at(0).value.store(1);
  t().at(1).value.store(1);
  // The hand is at 0: two dirty entries, then clean ones.
  EXPECT_EQ(Take(2), kNil);
  EXPECT_NE(Take(2), kNil) << "the hand moved on, the next sweep goes on from there";
}

TEST_F(SmallTable, AnEntryMovedToAnotherPartitionBeforeTheLockIsLeftAlone) {
  Fill();
  // Between the sweep's read of the hash and its lock, the slot was recycled for a key of another
  // partition (by another process): under the lock the sweep must see the change.
  CounterKey other = Key(1000);
  for (int64_t key = 1000; P(Key(key)) == P(t().at(0).id); key++) other = Key(key + 1);
  bool moved = false;
  log_.on_acquire = [&](char op, uint32_t) {
    if (op != 'T' || moved) return;
    moved = true;
    t().at(0).hash.store(H(other));
  };
  log_.refuse_try.clear();
  uint64_t evicted = 0;
  uint32_t i =
      p_.TakeFreeOrClean(Key(0).db, false, 1, [](const Entry&) { return true; }, &evicted);
  EXPECT_TRUE(moved);
  EXPECT_EQ(i, kNil);
  EXPECT_EQ(evicted, 0u);
}

TEST_F(SmallTable, AnEvictedSlotComesBackWithANewGeneration) {
  Fill();
  uint32_t generations[4];
  for (uint32_t i = 0; i < 4; i++) generations[i] = t().at(i).generation.load();
  uint32_t i = Take();
  ASSERT_NE(i, kNil);
  EXPECT_NE(t().at(i).generation.load(), generations[i]);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
  EXPECT_EQ(t().at(i).in_flush.load(), 0);
}

// ---- load -----------------------------------------------------------------------------------

TEST_F(ProtocolTest, LoadLinksLoadingUnderTheExclusiveLockThenResidentAndClean) {
  CounterKey k = Key(5);
  uint64_t ev = 0;
  uint32_t i = p_.TakeFreeOrClean(Key(0).db, false, 8, [](const Entry&) { return true; }, &ev);
  log_.events.clear();
  bool linked_before = true;
  uint32_t state_at_release = 99;
  log_.on_acquire = [&](char, uint32_t) { linked_before = t().Find(k, H(k)) != kNil; };
  log_.on_release = [&](uint32_t) { state_at_release = t().at(i).state.load(); };
  Loading loading;
  ASSERT_EQ(p_.BeginLoad(i, k, H(k), [] { return LoadStart::kLinked; }, &loading),
            LoadStart::kLinked);
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(log_.events[0].partition, P(k));
  EXPECT_FALSE(linked_before);
  EXPECT_EQ(state_at_release, sc::kLoading);
  EXPECT_EQ(loading.index, i);
  EXPECT_EQ(loading.generation, t().at(i).generation.load());
  EXPECT_EQ(t().Find(k, H(k)), i);

  log_.events.clear();
  log_.on_acquire = nullptr;
  log_.on_release = [&](uint32_t) { state_at_release = t().at(i).state.load(); };
  ASSERT_TRUE(p_.FinishLoad(loading, 77, [] { return false; }));
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(state_at_release, sc::kResident);
  EXPECT_EQ(t().at(i).value.load(), 77);
  EXPECT_EQ(t().at(i).flushed.load(), 77) << "a loaded entry is clean";
}

TEST_F(ProtocolTest, ASecondLoaderOfALinkedKeyRetriesAndGivesItsEntryBack) {
  CounterKey k = Key(5);
  Load(k, 1);
  uint64_t ev = 0;
  uint32_t i = p_.TakeFreeOrClean(Key(0).db, false, 8, [](const Entry&) { return true; }, &ev);
  ASSERT_EQ(t().used(), 2u);
  bool asked = false;
  Loading loading;
  EXPECT_EQ(p_.BeginLoad(i, k, H(k), [&] { asked = true; return LoadStart::kLinked; }, &loading),
            LoadStart::kRetry);
  EXPECT_EQ(t().used(), 1u);
  EXPECT_EQ(t().at(i).state.load(), sc::kFree);
}

TEST_F(ProtocolTest, ARefusedLoadLinksNothingAndGivesItsEntryBack) {
  for (LoadStart refusal : {LoadStart::kRetry, LoadStart::kStale}) {
    CounterKey k = Key(5);
    uint64_t ev = 0;
    uint32_t i = p_.TakeFreeOrClean(Key(0).db, false, 8, [](const Entry&) { return true; }, &ev);
    bool under_lock = false;
    Loading loading;
    EXPECT_EQ(p_.BeginLoad(i, k, H(k),
                           [&] {
                             under_lock = log_.mode[P(k)] == -1;
                             return refusal;
                           },
                           &loading),
              refusal);
    EXPECT_TRUE(under_lock) << "the refusal is decided under the exclusive lock";
    EXPECT_EQ(t().Find(k, H(k)), kNil);
    EXPECT_EQ(t().used(), 0u);
  }
}

TEST_F(ProtocolTest, AStaleLoadRemovesItsEntry) {
  CounterKey k = Key(5);
  Loading loading = StartLoad(k);
  bool under_lock = false;
  EXPECT_FALSE(p_.FinishLoad(loading, 5, [&] {
    under_lock = log_.mode[P(k)] == -1;
    return true;
  }));
  EXPECT_TRUE(under_lock);
  EXPECT_EQ(t().Find(k, H(k)), kNil);
  EXPECT_EQ(t().used(), 0u);
}

TEST_F(ProtocolTest, AnAbandonedLoadIsRemoved) {
  CounterKey k = Key(5);
  Loading loading = StartLoad(k);
  log_.events.clear();
  p_.AbandonLoad(loading);
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(t().Find(k, H(k)), kNil);
  EXPECT_EQ(t().used(), 0u);
}

TEST_F(ProtocolTest, AnAbandonAfterTheLoadFinishedLeavesTheEntry) {
  CounterKey k = Key(5);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  ASSERT_TRUE(p_.FinishLoad(loading, 5, [] { return false; }));
  p_.AbandonLoad(loading);
  EXPECT_EQ(t().Find(k, H(k)), i);
  EXPECT_EQ(t().used(), 1u);
}

TEST_F(ProtocolTest, AnAbandonOfARecycledSlotLeavesItsNewLoad) {
  CounterKey k = Key(5), other = Key(6);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  ASSERT_FALSE(p_.FinishLoad(loading, 0, [] { return true; }));  // removed (stale)
  // The slot is taken again, by another load of another key, which is still loading.
  uint64_t ev = 0;
  uint32_t j = p_.TakeFreeOrClean(Key(0).db, false, 8, [](const Entry&) { return true; }, &ev);
  ASSERT_EQ(j, i);
  Loading second;
  ASSERT_EQ(p_.BeginLoad(j, other, H(other), [] { return LoadStart::kLinked; }, &second),
            LoadStart::kLinked);
  Loading stale_view = loading;
  stale_view.hash = H(other);  // same slot, same partition: only the generation tells them apart
  p_.AbandonLoad(stale_view);
  EXPECT_EQ(t().Find(other, H(other)), j) << "the first load's abandon removed the second's entry";
}

// ---- claim and settle -----------------------------------------------------------------------

TEST_F(ProtocolTest, AFlushClaimsTheDeltaUnderTheSharedLockAndSettlesIt) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Add(k, 5);
  log_.events.clear();
  std::vector<Claim> claims = ClaimAllOf(7);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].index, i);
  EXPECT_EQ(claims[0].delta, 5);
  EXPECT_EQ(claims[0].partition, P(k));
  EXPECT_EQ(t().at(i).in_flush.load(), 1);
  for (const LockLog::Event& e : log_.events) EXPECT_TRUE(e.op == 'S' || e.op == 'R');
  EXPECT_EQ(log_.events.size(), 2u * kPartitions);

  log_.events.clear();
  EXPECT_FALSE(p_.SettleClaim(claims[0], true));
  EXPECT_EQ(log_.Ops(), "SR");
  EXPECT_EQ(t().at(i).flushed.load(), 15);
  EXPECT_EQ(t().at(i).in_flush.load(), 0);
}

// Where the key's row is (Entry::row): the claim reads it, a committed settle stores what the
// flush says (0: it does not know), a failed one leaves it, and a load stores where it read the row
// (0: none).
TEST_F(ProtocolTest, TheRowsPlaceGoesWithTheClaimAndBackWithACommittedSettle) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  EXPECT_EQ(t().at(i).row.load(), 0u) << "a loaded entry knows no place";
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(7);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].row, 0u);
  claims[0].row = 0x1234'0007;
  p_.SettleClaim(claims[0], true);
  EXPECT_EQ(t().at(i).row.load(), 0x1234'0007u);

  Add(k, 1);
  claims = ClaimAllOf(7);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].row, 0x1234'0007u) << "the claim carries the place to the flush";
  claims[0].row = 0x99'0001;
  p_.SettleClaim(claims[0], false);
  EXPECT_EQ(t().at(i).row.load(), 0x1234'0007u) << "a failed flush wrote nowhere";

  claims = ClaimAllOf(7);
  ASSERT_EQ(claims.size(), 1u);
  claims[0].row = 0;
  p_.SettleClaim(claims[0], true);
  EXPECT_EQ(t().at(i).row.load(), 0u) << "a flush that does not know where it wrote says so";

  for (uint32_t e = 0; e < t().capacity(); e++) t().at(e).row.store(0x55'0002);
  uint32_t j = Load(Key(2), 3);
  ASSERT_NE(j, kNil);
  EXPECT_EQ(t().at(j).row.load(), 0u) << "a slot loaded anew forgets the place of its last key";

  CounterKey read = Key(3);
  Loading loading;
  uint64_t evicted = 0;
  uint32_t r =
      p_.TakeFreeOrClean(read.db, false, 1024, [](const Entry&) { return true; }, &evicted);
  ASSERT_NE(r, kNil);
  ASSERT_EQ(p_.BeginLoad(r, read, H(read), [] { return LoadStart::kLinked; }, &loading),
            LoadStart::kLinked);
  ASSERT_TRUE(p_.FinishLoad(loading, 4, [] { return false; }, sc::kNoWrite, 0x77'0003));
  EXPECT_EQ(t().at(r).row.load(), 0x77'0003u) << "a load keeps where it read the row";
}

// A value set from one end of bigint to the other since its last flush: no flush may ask the
// row to take a difference beyond bigint. It goes in steps that keep the row in range.
TEST_F(ProtocolTest, ADifferenceBeyondBigintIsFlushedInStepsWithinRange) {
  int key = 0;
  for (auto [stored, target] : {std::pair<int64_t, int64_t>{INT64_MAX, INT64_MIN},
                                {INT64_MIN, INT64_MAX}, {INT64_MIN, 1}, {-2, INT64_MAX}}) {
    CounterKey k = Key(++key);
    uint32_t i = Load(k, stored);
    ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
    int64_t old = 0;
    Dirtied dirtied;
    ASSERT_EQ(p_.ExchangeIfResident(k, H(k), target, &old, &dirtied), Probe::kFound);
    int64_t row = stored;
    for (int flushes = 0; row != target; flushes++) {
      ASSERT_LT(flushes, 3) << stored << " to " << target;
      std::vector<Claim> claims = ClaimAllOf(7);
      ASSERT_EQ(claims.size(), 1u);
      int64_t next;
      ASSERT_FALSE(__builtin_add_overflow(row, claims[0].delta, &next))
          << "a flush of " << claims[0].delta << " to a row of " << row;
      row = next;
      p_.SettleClaim(claims[0], true);
      EXPECT_EQ(t().at(i).flushed.load(), row);
    }
    EXPECT_EQ(ClaimAllOf(7).size(), 0u);
  }
}

TEST_F(ProtocolTest, AClaimedEntryIsNotClaimedAgain) {
  CounterKey k = Key(1);
  Load(k, 10);
  Add(k, 5);
  ASSERT_EQ(ClaimAllOf(7).size(), 1u);
  EXPECT_EQ(ClaimAllOf(7).size(), 0u) << "an overlapping flusher must not claim it too";
}

TEST_F(ProtocolTest, OnlyTheFlushersDatabaseIsClaimed) {
  Load(Key(1, 7), 0);
  Load(Key(1, 8), 0);
  Add(Key(1, 7), 1);
  Add(Key(1, 8), 1);
  std::vector<Claim> claims = ClaimAllOf(8);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(t().at(claims[0].index).id.db, 8u);
}

TEST_F(ProtocolTest, CleanAndLoadingEntriesAreNotClaimed) {
  Load(Key(1), 4);
  Loading loading = StartLoad(Key(2));
  uint32_t i = loading.index;
  t().at(i).value.store(3);  // garbage a loader may hold before it finishes
  EXPECT_EQ(ClaimAllOf(7).size(), 0u);
  for (uint32_t j = 0; j < 2; j++) EXPECT_EQ(t().at(j).in_flush.load(), 0);
  p_.AbandonLoad(loading);
}

TEST_F(ProtocolTest, AnIneligibleDirtyEntryIsLeftAndNamedAndACleanOneIsNot) {
  uint32_t dirty = Load(Key(1), 0);
  Load(Key(2), 0);
  Add(Key(1), 1);
  std::vector<uint32_t> left;
  int taken = 0;
  p_.ClaimAll(
      7, [](const Entry&) { return false; }, [] { return true; },
      [&](const Claim&, const Entry&) { taken++; },
      [&](uint32_t index, uint32_t) { left.push_back(index); }, [](const Entry&) {});
  EXPECT_EQ(taken, 0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], dirty);
  EXPECT_EQ(t().at(dirty).in_flush.load(), 0);
}

TEST_F(ProtocolTest, WithoutRoomTheRestIsReportedAndNotClaimed) {
  for (int64_t key = 0; key < 6; key++) {
    Load(Key(key), 0);
    Add(Key(key), 1);
  }
  std::vector<Claim> claims;
  int overflowed = 0;
  p_.ClaimAll(
      7, [](const Entry&) { return true; }, [&] { return claims.size() < 2; },
      [&](const Claim& c, const Entry&) { claims.push_back(c); }, [](uint32_t, uint32_t) {},
      [&](const Entry&) { overflowed++; });
  EXPECT_EQ(claims.size(), 2u);
  EXPECT_EQ(overflowed, 4);
  int in_flush = 0;
  for (uint32_t i = 0; i < t().capacity(); i++) in_flush += t().at(i).in_flush.load();
  EXPECT_EQ(in_flush, 2);
}

TEST_F(ProtocolTest, ATakenUpAndDownEntryIsReleasedNotClaimed) {
  // Dirty by the ring's note, clean by value when the flush looks: nothing to write, not held.
  uint32_t i = Load(Key(1), 0);
  Add(Key(1), 1);
  Add(Key(1), -1);
  EXPECT_EQ(ClaimAllOf(7).size(), 0u);
  EXPECT_EQ(t().at(i).in_flush.load(), 0) << "a clean entry must stay evictable";
}

TEST_F(ProtocolTest, AFailedFlushAdvancesNothingAndReportsTheEntryDirty) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(7);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_TRUE(p_.SettleClaim(claims[0], false));
  EXPECT_EQ(t().at(i).flushed.load(), 10);
  EXPECT_EQ(t().at(i).in_flush.load(), 0);
}

TEST_F(ProtocolTest, AnEntryCountedIntoDuringTheFlushStaysDirty) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(7);
  Add(k, 2);
  EXPECT_TRUE(p_.SettleClaim(claims[0], true));
  EXPECT_EQ(t().at(i).flushed.load(), 15);
  EXPECT_EQ(t().at(i).value.load(), 17);
}

TEST_F(ProtocolTest, UpAndDownDuringTheFlushKeepsTheEntryFromEvictionUntilSettled) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(7);
  Add(k, -5);  // clean by value, but the table is about to receive +5
  t().at(i).usage.store(0);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t().at(i)));
  EXPECT_TRUE(p_.SettleClaim(claims[0], true)) << "value 10, flushed 15: dirty by -5";
}

TEST_F(ProtocolTest, ASettleOfARecycledSlotTouchesNothing) {
  CounterKey k = Key(1), other = Key(2);
  uint32_t i = Load(k, 0);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(7);
  // The counter was dropped meanwhile (a purge frees a claimed entry too), its slot reused.
  p_.PurgeIf([](const Entry&) { return true; });
  uint32_t j = Load(other, 100);
  ASSERT_EQ(j, i);
  EXPECT_FALSE(p_.SettleClaim(claims[0], true));
  EXPECT_EQ(t().at(j).flushed.load(), 100);
}

TEST_F(ProtocolTest, ClaimNotedSkipsStaleRefsAndClaimsTheRest) {
  uint32_t a = Load(Key(1), 0), b = Load(Key(2), 0);
  Add(Key(1), 1);
  Add(Key(2), 2);
  DirtyRef refs[3] = {{a, t().at(a).generation.load()},
                      {b, t().at(b).generation.load() + 1},  // freed and reused since
                      {a, t().at(a).generation.load()}};     // noted twice
  std::vector<Claim> claims;
  p_.ClaimNoted(
      7, refs, 3, [](const Entry&) { return true; },
      [&](const Claim& c, const Entry&) { claims.push_back(c); }, [](uint32_t, uint32_t) {});
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].index, a);
  EXPECT_EQ(t().at(b).in_flush.load(), 0);
}

TEST_F(ProtocolTest, ClaimNotedNamesTheIneligible) {
  uint32_t a = Load(Key(1), 0);
  Add(Key(1), 1);
  DirtyRef ref{a, t().at(a).generation.load()};
  std::vector<uint32_t> left;
  p_.ClaimNoted(
      7, &ref, 1, [](const Entry&) { return false; }, [](const Claim&, const Entry&) {},
      [&](uint32_t index, uint32_t) { left.push_back(index); });
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], a);
}

// ---- reserve and settle ---------------------------------------------------------------------

TEST_F(ProtocolTest, AReservationPinsUnderTheExclusiveLockAndACommitAddsAndStaysClean) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Reservation r;
  int64_t committed = 0;
  log_.events.clear();
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 5, &r, &committed), Reserve::kReserved);
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(t().at(i).pins.load(), 1u);
  EXPECT_EQ(t().at(i).reserved_up.load(), 5);
  EXPECT_EQ(t().at(i).value.load(), 10) << "nothing is added before the commit";
  t().at(i).usage.store(0);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t().at(i)));

  log_.events.clear();
  EXPECT_TRUE(p_.SettleReservation(r, true, 4));
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(t().at(i).value.load(), 15);
  EXPECT_EQ(t().at(i).flushed.load(), 15);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
  EXPECT_EQ(t().at(i).reserved_up.load(), 0);
  EXPECT_EQ(t().at(i).commit_epoch.load(), 4u);
}

TEST_F(ProtocolTest, AnAbortAddsNothingAndUnpins) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  Reservation r;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -3, &r, &committed), Reserve::kReserved);
  EXPECT_EQ(t().at(i).reserved_down.load(), -3);
  EXPECT_TRUE(p_.SettleReservation(r, false, 4));
  EXPECT_EQ(t().at(i).value.load(), 10);
  EXPECT_EQ(t().at(i).reserved_down.load(), 0);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
  EXPECT_EQ(t().at(i).commit_epoch.load(), 0u) << "an abort tags nothing";
}

TEST_F(ProtocolTest, ReservationsOnEachSideMustFitWhateverOrderTheyEndIn) {
  CounterKey k = Key(1);
  Load(k, kMax - 10);
  Reservation up1, up2, down;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 6, &up1, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 5, &up2, &committed), Reserve::kOverflow)
      << "6 + 5 would pass the maximum if both commit";
  EXPECT_EQ(committed, kMax - 10);
  // A negative reservation does not make room for a positive one: it may abort.
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -100, &down, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 5, &up2, &committed), Reserve::kOverflow);
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 4, &up2, &committed), Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(up1, true, 1));
  EXPECT_TRUE(p_.SettleReservation(down, false, 1));
  EXPECT_TRUE(p_.SettleReservation(up2, true, 1));
  EXPECT_EQ(ResidentValue(k), kMax);
}

TEST_F(ProtocolTest, NegativeReservationsMustFitBelow) {
  CounterKey k = Key(1);
  Load(k, kMin + 10);
  Reservation a, b;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -10, &a, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), -1, &b, &committed), Reserve::kOverflow);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1000, &b, &committed), Reserve::kReserved);
}

// A bounded reservation must keep the value right after its delta inside the bounds whichever
// of the other reserved transactions commit first; a refusal reserves and pins nothing.
TEST_F(ProtocolTest, BoundedReservationsFitEveryOrderOfTheOthersOutcomes) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 98);
  const Bounds limit{kMin, 100};
  Reservation a, b, c, d;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &a, &committed, limit), Reserve::kReserved);
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &b, &committed, limit), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1, &c, &committed, limit), Reserve::kOutOfBounds)
      << "98 + 1 + 1 + 1 passes 100 if all three commit";
  EXPECT_EQ(t().at(i).pins.load(), 2u) << "a refused reservation pins nothing";
  EXPECT_EQ(t().at(i).reserved_up.load(), 2);
  // an unbounded one is refused only by overflow
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &c, &committed), Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(c, false, 1));
  // an abort makes room again
  EXPECT_TRUE(p_.SettleReservation(a, false, 1));
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &c, &committed, limit), Reserve::kReserved);
  // a pending decrement does not make room (it may abort), and must itself fit below
  const Bounds never_negative{0, kMax};
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), -99, &d, &committed, never_negative),
            Reserve::kOutOfBounds)
      << "98 - 99 < 0 whatever the others do";
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -98, &d, &committed, never_negative),
            Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1, &a, &committed, limit), Reserve::kOutOfBounds);
  EXPECT_TRUE(p_.SettleReservation(b, true, 1));
  EXPECT_TRUE(p_.SettleReservation(c, true, 1));
  EXPECT_TRUE(p_.SettleReservation(d, true, 1));
  EXPECT_EQ(ResidentValue(k), 2);
}

// The end of the range away from the delta's side counts too: a pending decrement (which may
// commit first) can take a bounded increment below its lower bound, and a pending increment a
// bounded decrement above its upper one.
TEST_F(ProtocolTest, ABoundedReservationChecksTheOtherSidesPendingDeltas) {
  CounterKey k = Key(1);
  Load(k, 5);
  Reservation down, up, r;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -5, &down, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1, &r, &committed, Bounds{3, kMax}),
            Reserve::kOutOfBounds)
      << "5 - 5 + 1 < 3 if the decrement commits first";
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &r, &committed, Bounds{1, kMax}), Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(r, false, 1));
  EXPECT_TRUE(p_.SettleReservation(down, false, 1));
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 5, &up, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), -1, &r, &committed, Bounds{kMin, 8}),
            Reserve::kOutOfBounds)
      << "5 + 5 - 1 > 8 if the increment commits first";
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), -1, &r, &committed, Bounds{kMin, 9}),
            Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(r, true, 1));
  EXPECT_TRUE(p_.SettleReservation(up, true, 1));
  EXPECT_EQ(ResidentValue(k), 9);
}

TEST_F(ProtocolTest, ABoundedAddIsRefusedWithTheValueAndNotesNothing) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 10);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  int64_t value = 0;
  bool refused = true;
  Dirtied dirtied;
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), 5, Bounds{0, 12}, &value, &refused, &dirtied),
            Probe::kFound);
  EXPECT_TRUE(refused);
  EXPECT_EQ(value, 10);
  EXPECT_EQ(t().at(i).value.load(), 10);
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), 2, Bounds{0, 12}, &value, &refused, &dirtied),
            Probe::kFound);
  EXPECT_FALSE(refused);
  EXPECT_EQ(value, 12);
  EXPECT_EQ(p_.AddIfResidentWithin(Key(2), H(Key(2)), 1, Bounds{}, &value, &refused, &dirtied),
            Probe::kMissing);
}

TEST_F(ProtocolTest, ReservingAMissingOrLoadingKeySaysSo) {
  CounterKey k = Key(1);
  Reservation r;
  int64_t committed = 0;
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1, &r, &committed), Reserve::kMissing);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 1, &r, &committed), Reserve::kLoading);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
  p_.AbandonLoad(loading);
}

TEST_F(ProtocolTest, TheLatestCommitEpochIsKept) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 0);
  Reservation a, b;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &a, &committed), Reserve::kReserved);
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &b, &committed), Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(a, true, 9));
  EXPECT_TRUE(p_.SettleReservation(b, true, 8));
  EXPECT_EQ(t().at(i).commit_epoch.load(), 9u);
  EXPECT_EQ(t().at(i).value.load(), 2);
}

TEST_F(ProtocolTest, ASettleAfterAPurgeReportsTheEntryGone) {
  CounterKey k = Key(1), other = Key(2);
  uint32_t i = Load(k, 0);
  Reservation r;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 1, &r, &committed), Reserve::kReserved);
  p_.PurgeIf([](const Entry&) { return true; });
  ASSERT_EQ(Load(other, 50), i);
  EXPECT_FALSE(p_.SettleReservation(r, true, 1));
  EXPECT_EQ(t().at(i).value.load(), 50);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
}

// ---- pins -----------------------------------------------------------------------------------

TEST_F(ProtocolTest, APinHoldsAnEntryUntilUnpinned) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 0);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  Pin pin;
  Probe probe = Probe::kMissing;
  log_.events.clear();
  p_.Exclusively(P(k), [&] { probe = p_.PinLocked(k, H(k), &pin); });
  EXPECT_EQ(log_.Ops(), "XR");
  ASSERT_EQ(probe, Probe::kFound);
  EXPECT_EQ(pin.index, i);
  EXPECT_EQ(t().at(i).pins.load(), 1u);
  t().at(i).usage.store(0);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t().at(i)));
  log_.events.clear();
  p_.Unpin(pin);
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(t().at(i).pins.load(), 0u);
}

TEST_F(ProtocolTest, PinningAMissingOrLoadingKeySaysSo) {
  CounterKey k = Key(1);
  Pin pin;
  Probe probe = Probe::kFound;
  p_.Exclusively(P(k), [&] { probe = p_.PinLocked(k, H(k), &pin); });
  EXPECT_EQ(probe, Probe::kMissing);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  p_.Exclusively(P(k), [&] { probe = p_.PinLocked(k, H(k), &pin); });
  EXPECT_EQ(probe, Probe::kLoading);
  EXPECT_EQ(t().at(i).pins.load(), 0u);
  p_.AbandonLoad(loading);
}

TEST_F(ProtocolTest, AddsToAPinnedEntryAndNotesItDirty) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 0);
  ASSERT_TRUE(LinkSumOf(k));  // as a write's load links it
  Pin pin;
  p_.Exclusively(P(k), [&] { p_.PinLocked(k, H(k), &pin); });
  int64_t value = 0;
  Dirtied d;
  log_.events.clear();
  EXPECT_TRUE(p_.AddPinned(pin, 4, &value, &d));
  EXPECT_EQ(log_.Ops(), "SR");
  EXPECT_EQ(value, 4);
  EXPECT_EQ(d.index, i);
  EXPECT_FALSE(p_.AddPinned(pin, kMax, &value, &d)) << "overflow";
  EXPECT_EQ(t().at(i).value.load(), 4);
  p_.Unpin(pin);
}

TEST_F(ProtocolTest, APurgedPinnedEntryTakesNothingAndItsUnpinLeavesTheNewOne) {
  CounterKey k = Key(1), other = Key(2);
  ASSERT_TRUE(LinkSumOf(other));
  uint32_t i = Load(k, 0);
  ASSERT_TRUE(LinkSumOf(k));
  Pin pin;
  p_.Exclusively(P(k), [&] { p_.PinLocked(k, H(k), &pin); });
  p_.PurgeIf([&](const Entry& e) { return e.id == k; });
  ASSERT_EQ(Load(other, 9), i);
  Pin other_pin;
  p_.Exclusively(P(other), [&] { p_.PinLocked(other, H(other), &other_pin); });
  int64_t value = -1;
  Dirtied d;
  EXPECT_TRUE(p_.AddPinned(pin, 4, &value, &d));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(t().at(i).value.load(), 9);
  p_.Unpin(pin);
  EXPECT_EQ(t().at(i).pins.load(), 1u) << "the stale unpin took the new entry's pin";
  p_.Unpin(other_pin);
}

// ---- purge ----------------------------------------------------------------------------------

TEST_F(ProtocolTest, PurgeRemovesMatchingResidentEntriesUnderEachExclusiveLock) {
  for (int64_t key = 0; key < 6; key++) Load(Key(key, key % 2 ? 7 : 8), 0);
  log_.events.clear();
  EXPECT_EQ(p_.PurgeIf([](const Entry& e) { return e.id.db == 7; }), 3u);
  EXPECT_EQ(t().used(), 3u);
  for (int64_t key = 0; key < 6; key++)
    EXPECT_EQ(t().Find(Key(key, key % 2 ? 7 : 8), H(Key(key, key % 2 ? 7 : 8))) == kNil,
              key % 2 == 1);
  EXPECT_EQ(log_.events.size(), 2u * kPartitions);
  for (size_t e = 0; e < log_.events.size(); e += 2) EXPECT_EQ(log_.events[e].op, 'X');
}

TEST_F(ProtocolTest, PurgeLeavesALoadingEntryToItsLoader) {
  CounterKey k = Key(1);
  Loading loading = StartLoad(k);
  uint32_t i = loading.index;
  EXPECT_EQ(p_.PurgeIf([](const Entry&) { return true; }), 0u);
  EXPECT_TRUE(p_.FinishLoad(loading, 1, [] { return false; }));
  EXPECT_EQ(t().Find(k, H(k)), i);
}

TEST_F(ProtocolTest, ABucketPurgeEmptiesReservedEntriesAndRemovesTheRest) {
  CounterKey held = Key(1, 7, 3, 100), free_key = Key(2, 7, 3, 100), kept = Key(3, 7, 3, 900);
  uint32_t h = Load(held, 5);
  Load(free_key, 6);
  uint32_t k = Load(kept, 7);
  Reservation r;
  int64_t committed = 0;
  ASSERT_EQ(p_.ReserveIfResident(held, H(held), 2, &r, &committed), Reserve::kReserved);
  EXPECT_EQ(p_.PurgeIfUnreserved([](const Entry& e) { return e.id.bucket < 500; }), 1u);
  EXPECT_EQ(t().Find(held, H(held)), h);
  EXPECT_EQ(t().at(h).value.load(), 0);
  EXPECT_EQ(t().at(h).flushed.load(), 0);
  EXPECT_EQ(t().Find(free_key, H(free_key)), kNil);
  EXPECT_EQ(t().Find(kept, H(kept)), k);
  EXPECT_EQ(t().at(k).value.load(), 7);
  EXPECT_TRUE(p_.SettleReservation(r, true, 1));
  EXPECT_EQ(t().at(h).value.load(), 2) << "the commit's delta lands on the emptied entry";
}

TEST_F(ProtocolTest, PurgeCleanKeepsWhatTheTablesLackAndCountsIt) {
  uint32_t dirty = Load(Key(1), 0);
  uint32_t pinned = Load(Key(2), 0);
  uint32_t claimed = Load(Key(3), 0);
  uint32_t vetoed = Load(Key(4), 0);
  Load(Key(5), 0);
  Load(Key(6, 8), 0);  // another database
  Add(Key(1), 1);
  t().at(pinned).pins.store(1);
  t().at(claimed).in_flush.store(1);
  // Kept: the dirty, pinned, claimed and vetoed keys, and the dirty key's sum entry (which holds
  // what it lacks).
  EXPECT_EQ(p_.PurgeClean(7, [&](const Entry& e) { return &e != &t().at(vetoed); }), 5u);
  EXPECT_EQ(t().used(), 6u);
  EXPECT_EQ(t().Find(Key(5), H(Key(5))), kNil);
  EXPECT_NE(t().Find(Key(6, 8), H(Key(6, 8))), kNil);
  EXPECT_NE(t().Find(Key(1), H(Key(1))), kNil);
  (void)dirty;
}

TEST_F(ProtocolTest, ForEachResidentSkipsLoadingEntries) {
  Load(Key(1), 0);
  Loading loading = StartLoad(Key(2));
  int seen = 0;
  for (uint32_t p = 0; p < kPartitions; p++)
    p_.ForEachResident(p, [&](uint32_t, const Entry& e) {
      seen++;
      EXPECT_EQ(e.id.key, 1);
      EXPECT_EQ(log_.mode[p], 1) << "under the shared lock";
    });
  EXPECT_EQ(seen, 1);
  p_.AbandonLoad(loading);
}

// ---- expiry ---------------------------------------------------------------------------------

// Keys of one partition, as an expiry gets them.
std::vector<CounterKey> KeysOfOnePartition(size_t n) {
  std::vector<CounterKey> keys;
  uint32_t p = CounterTable::PartitionOf(sc::HashCounterKey(Key(1)));
  for (int64_t k = 1; keys.size() < n; k++)
    if (CounterTable::PartitionOf(sc::HashCounterKey(Key(k))) == p) keys.push_back(Key(k));
  return keys;
}

TEST_F(ProtocolTest, ExpiryUnlinksOnlyCleanEntriesAndHoldsUnderTheExclusiveLock) {
  std::vector<CounterKey> keys = KeysOfOnePartition(8);
  uint32_t p = P(keys[0]);
  Load(keys[0], 5);                                  // clean: goes
  Load(keys[1], 5);
  Add(keys[1], 1);                                   // written since its flush: stays
  t().at(Load(keys[2], 5)).pins.store(1);            // pinned by a batch
  t().at(Load(keys[3], 5)).reserved_up.store(2);     // a commit in flight
  t().at(Load(keys[4], 5)).in_flush.store(1);        // claimed by a flush
  Loading loading = StartLoad(keys[5]);              // being loaded
  uint32_t vetoed = Load(keys[6], 5);                // the caller's veto (deltas not folded)
  // keys[7]: not in the buffer
  std::vector<uint32_t> hashes;
  for (const CounterKey& k : keys) hashes.push_back(H(k));
  bool expirable[8];
  uint64_t used = t().used();
  int mode_at_hold = 0;
  p_.UnlinkForExpiry(p, keys.data(), hashes.data(), 8, expirable,
                     [&](const Entry& e) { return &e != &t().at(vetoed); },
                     [&] { mode_at_hold = log_.mode[p]; });
  EXPECT_EQ(mode_at_hold, -1) << "the hold is raised under the exclusive lock";
  EXPECT_TRUE(expirable[0]);
  for (int i = 1; i <= 6; i++) EXPECT_FALSE(expirable[i]) << "key " << i;
  EXPECT_TRUE(expirable[7]);
  EXPECT_EQ(t().Find(keys[0], hashes[0]), kNil);
  for (int i = 1; i <= 6; i++) EXPECT_NE(t().Find(keys[i], hashes[i]), kNil) << "key " << i;
  EXPECT_EQ(t().used(), used - 1);
  p_.AbandonLoad(loading);
}

TEST_F(ProtocolTest, AnExpiredKeyLoadsAgainFromWhatTheTableHoldsThen) {
  std::vector<CounterKey> keys = KeysOfOnePartition(1);
  uint32_t hash = H(keys[0]);
  uint32_t index = Load(keys[0], 40);
  Add(keys[0], 2);
  for (Claim& c : ClaimAllOf(7)) p_.SettleClaim(c, true);  // flushed: clean at 42
  uint32_t generation = t().at(index).generation.load();
  bool expirable = false;
  p_.UnlinkForExpiry(P(keys[0]), keys.data(), &hash, 1, &expirable,
                     [](const Entry&) { return true; }, [] {});
  ASSERT_TRUE(expirable);
  EXPECT_NE(t().at(index).generation.load(), generation) << "a stale reference finds nothing";
  Load(keys[0], 0);  // the row was deleted: the key starts again from 0
  EXPECT_EQ(Add(keys[0], 1), 1);
}

// ---- the dirty ring -------------------------------------------------------------------------

TEST(DirtyRing, CapacityIsAnEighthOfTheBufferWithinBounds) {
  EXPECT_EQ(sc::DirtyRingCapacity(128), 8192);
  EXPECT_EQ(sc::DirtyRingCapacity(100000), 12500);
  EXPECT_EQ(sc::DirtyRingCapacity(2000000), 65536);
}

TEST(DirtyRing, NotesUntilFullThenOverflows) {
  constexpr int kCapacity = 8192;
  OwnedRing owned(kCapacity);
  DirtyRing* ring = &owned.ring;
  RingMutex m;
  sc::RingReset(*ring, m);
  EXPECT_TRUE(ring->overflow) << "a ring just (re)assigned makes the next flush scan";
  std::vector<DirtyRef> out(kCapacity);
  bool scan_all = false;
  EXPECT_EQ(sc::RingTake(*ring, m, true, out.data(), &scan_all), 0);
  EXPECT_TRUE(scan_all);
  EXPECT_FALSE(ring->overflow);
  for (int i = 0; i < kCapacity; i++) sc::RingNote(*ring, m, uint32_t(i), 1);
  EXPECT_FALSE(sc::RingOverflowed(*ring, m));
  sc::RingNote(*ring, m, 99999, 1);
  EXPECT_TRUE(sc::RingOverflowed(*ring, m));
  EXPECT_EQ(sc::RingTake(*ring, m, true, out.data(), &scan_all), kCapacity);
  EXPECT_TRUE(scan_all);
  EXPECT_EQ(out[5].index, 5u);
  EXPECT_EQ(ring->count, 0);
}

TEST(DirtyRing, AnOverflowFlaggedAfterTheLookWaitsForTheNextFlush) {
  OwnedRing owned(16);
  DirtyRing* ring = &owned.ring;
  RingMutex m;
  sc::RingReset(*ring, m);
  std::vector<DirtyRef> out(16);
  bool scan_all = false;
  sc::RingTake(*ring, m, true, out.data(), &scan_all);
  sc::RingNote(*ring, m, 3, 4);
  sc::RingMarkUntracked(*ring, m);  // after the flush looked (no room for everything)
  EXPECT_EQ(sc::RingTake(*ring, m, false, out.data(), &scan_all), 1);
  EXPECT_FALSE(scan_all);
  EXPECT_EQ(out[0].index, 3u);
  EXPECT_EQ(out[0].generation, 4u);
  EXPECT_TRUE(ring->overflow) << "kept for the next flush";
  EXPECT_EQ(sc::RingTake(*ring, m, true, out.data(), &scan_all), 0);
  EXPECT_TRUE(scan_all);
}

}  // namespace

// ---- expiry: keys whose last write is at or before a cutoff ---------------------------------

namespace {

using sc::Write;

class ExpiryTest : public ProtocolTest {
 protected:
  // k loaded with value 10, last written at 100 and flushed.
  // With its sum entry, as the key of a write.
  uint32_t LoadWritten(const CounterKey& k) {
    uint32_t index = Load(k, 10, 100);
    EXPECT_TRUE(LinkSumOf(k));
    return index;
  }

  Probe AddAt(const CounterKey& k, int64_t delta, Write w, int64_t* value, Dirtied* d) {
    bool overflow = false;
    Probe probe = p_.AddIfResident(k, H(k), delta, value, &overflow, d, w);
    EXPECT_FALSE(overflow);
    return probe;
  }
};

TEST_F(ExpiryTest, ALoadTakesTheStoredStampAndIsClean) {
  uint32_t i = LoadWritten(Key(1));
  EXPECT_EQ(t().at(i).last_write.load(), 100);
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 0);
  EXPECT_TRUE(CounterTable::Clean(t().at(i)));
}

TEST_F(ExpiryTest, AKeyReadsZeroFromItsCutoffOnAndKeepsItsValue) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = -1;
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value, 99), Probe::kFound);
  EXPECT_EQ(value, 10) << "written after the cutoff";
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value, 100), Probe::kFound);
  EXPECT_EQ(value, 0) << "written at the cutoff: expired";
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value), Probe::kFound);
  EXPECT_EQ(value, 10) << "no cutoff, no expiry";
  EXPECT_EQ(t().at(i).value.load(), 10) << "a read changes nothing";
}

TEST_F(ExpiryTest, AWriteToALiveKeyTakesTheSharedLockAndRaisesTheStamp) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  log_.events.clear();
  EXPECT_EQ(AddAt(k, 5, Write{200, 99}, &value, &d), Probe::kFound);
  EXPECT_EQ(log_.Ops(), "SR");
  EXPECT_EQ(value, 15);
  EXPECT_EQ(t().at(i).last_write.load(), 200);
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 1);
  EXPECT_EQ(d.index, i) << "the entry turned dirty";
}

TEST_F(ExpiryTest, AWriteToAnExpiredKeyCountsFromZeroUnderTheExclusiveLock) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  log_.events.clear();
  EXPECT_EQ(AddAt(k, 5, Write{300, 150}, &value, &d), Probe::kFound);
  EXPECT_EQ(log_.Ops(), "SRXRSR") << "looked, zeroed under the exclusive lock, then added";
  EXPECT_EQ(value, 5);
  EXPECT_EQ(t().at(i).flushed.load(), 10) << "the table still holds 10: the flush writes -5";
  EXPECT_EQ(t().at(i).last_write.load(), 300);
  EXPECT_EQ(d.index, i);
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].delta, -5);
  EXPECT_EQ(claims[0].stamp, 300);
  EXPECT_TRUE(claims[0].stamped);
}

TEST_F(ExpiryTest, TheZeroingLooksAgainUnderTheExclusiveLock) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  // Between the look and the exclusive lock another write comes (and revives the key).
  bool once = true;
  log_.on_acquire = [&](char op, uint32_t) {
    if (op == 'X' && once) {
      once = false;
      t().at(i).value.store(12);
      t().at(i).last_write.store(250);
    }
  };
  int64_t value = 0;
  Dirtied d;
  EXPECT_EQ(AddAt(k, 5, Write{300, 150}, &value, &d), Probe::kFound);
  EXPECT_EQ(value, 17) << "the other write's value stays";
}

TEST_F(ExpiryTest, AnExpiredKeyThatHoldsZeroIsWrittenWithoutTheExclusiveLock) {
  CounterKey k = Key(1);
  Load(k, 0, 100);
  ASSERT_TRUE(LinkSumOf(k));
  int64_t value = 0;
  Dirtied d;
  log_.events.clear();
  EXPECT_EQ(AddAt(k, 5, Write{300, 150}, &value, &d), Probe::kFound);
  EXPECT_EQ(log_.Ops(), "SR");
  EXPECT_EQ(value, 5);
}

TEST_F(ExpiryTest, AWriteAddsWhatItChangesToTheSumEntry) {
  CounterKey k = Key(1);
  LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  EXPECT_EQ(AddAt(k, 5, Write{200, 99}, &value, &d), Probe::kFound);
  EXPECT_EQ(SumValue(k), 5) << "15 against a row of 10";
  EXPECT_EQ(AddAt(k, 2, Write{300, 250}, &value, &d), Probe::kFound);
  EXPECT_EQ(value, 2) << "expired: counted from zero";
  EXPECT_EQ(SumValue(k), -8) << "2 against a row of 10";
}

TEST_F(ExpiryTest, AWriteThatWouldOverflowIsRefusedAndReportsTheUnchangedValue) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, kMax - 1, 100);
  ASSERT_TRUE(LinkSumOf(k));
  int64_t value = 0;
  bool overflow = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResident(k, H(k), 2, &value, &overflow, &d, Write{200, 99}), Probe::kFound);
  EXPECT_TRUE(overflow);
  EXPECT_EQ(value, kMax - 1);
  EXPECT_EQ(t().at(i).value.load(), kMax - 1);
  EXPECT_EQ(t().at(i).last_write.load(), 100) << "a refused add is no write";
  EXPECT_EQ(SumValue(k), 0);
  EXPECT_EQ(d.index, kNil) << "a refused add dirties nothing";
}

TEST_F(ExpiryTest, ASetOfAnExpiredKeyReturnsZero) {
  CounterKey k = Key(1);
  LoadWritten(k);
  int64_t old = -1;
  Dirtied d;
  EXPECT_EQ(p_.ExchangeIfResident(k, H(k), 7, &old, &d, Write{300, 150}), Probe::kFound);
  EXPECT_EQ(old, 0);
  EXPECT_EQ(ResidentValue(k), 7);
}

TEST_F(ExpiryTest, ABoundedAddOfAnExpiredKeyIsCheckedAgainstZero) {
  CounterKey k = Key(1);
  LoadWritten(k);
  int64_t value = -1;
  bool refused = true;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), -1, sc::Bounds{0, 100}, &value, &refused, &d,
                                   Write{300, 150}),
            Probe::kFound);
  EXPECT_TRUE(refused) << "0 - 1 leaves [0, 100], though 10 - 1 would not";
  EXPECT_EQ(value, 0);
}

TEST_F(ExpiryTest, ABoundedRefusalOfAnExpiredKeyChangesNothing) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = -1;
  bool refused = false;
  Dirtied d;
  log_.events.clear();
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), -1, sc::Bounds{0, 100}, &value, &refused, &d,
                                   Write{300, 150}),
            Probe::kFound);
  EXPECT_TRUE(refused);
  EXPECT_EQ(log_.Ops(), "SR") << "refused where it looked: nothing to zero";
  EXPECT_EQ(t().at(i).value.load(), 10) << "a longer retention would find it again";
  EXPECT_EQ(t().at(i).last_write.load(), 100) << "a refusal is no write";
  EXPECT_EQ(d.index, kNil);
}

TEST_F(ExpiryTest, ABoundedAddOfAnExpiredKeyThatFitsCountsFromZero) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = -1;
  bool refused = true;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), 3, sc::Bounds{0, 100}, &value, &refused, &d,
                                   Write{300, 150}),
            Probe::kFound);
  EXPECT_FALSE(refused);
  EXPECT_EQ(value, 3);
  EXPECT_EQ(t().at(i).last_write.load(), 300);
}

TEST_F(ExpiryTest, ABoundedRefusalOfALiveKeyLeavesItsStamp) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = -1;
  bool refused = false;
  Dirtied d;
  EXPECT_EQ(p_.AddIfResidentWithin(k, H(k), 500, sc::Bounds{0, 100}, &value, &refused, &d,
                                   Write{300, 50}),
            Probe::kFound);
  EXPECT_TRUE(refused);
  EXPECT_EQ(value, 10);
  EXPECT_EQ(t().at(i).last_write.load(), 100);
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 0);
}

TEST_F(ExpiryTest, AValueWrittenWithNoTimeKnownNeverExpires) {
  CounterKey k = Key(1);
  uint32_t i = Load(k);  // no row: kNoWrite
  Add(k, 5);             // written with no time (a counter without a retention, then)
  EXPECT_EQ(t().at(i).last_write.load(), sc::kNoWrite);
  int64_t value = -1;
  EXPECT_EQ(p_.ReadIfResident(k, H(k), &value, 1000), Probe::kFound);
  EXPECT_EQ(value, 5) << "no time known: not expired";
  int64_t added = 0;
  Dirtied d;
  EXPECT_EQ(AddAt(k, 1, Write{2000, 1000}, &added, &d), Probe::kFound);
  EXPECT_EQ(added, 6) << "added to, not zeroed";
}

TEST_F(ExpiryTest, AStampIsNeverLowered) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  AddAt(k, 1, Write{50, sc::kNeverExpires}, &value, &d);
  EXPECT_EQ(t().at(i).last_write.load(), 100);
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 0) << "an older stamp leaves nothing to store";
}

TEST_F(ExpiryTest, AStampTheTablesLackKeepsTheEntryFromLeaving) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  AddAt(k, 1, Write{200, sc::kNeverExpires}, &value, &d);
  AddAt(k, -1, Write{200, sc::kNeverExpires}, &value, &d);
  EXPECT_EQ(t().at(i).value.load(), t().at(i).flushed.load()) << "clean by value";
  EXPECT_FALSE(CounterTable::Clean(t().at(i)));
  t().at(i).usage.store(0);
  EXPECT_FALSE(CounterTable::AgeAndTestEvictable(t().at(i)));
  // A flush writes the stamp alone; a failed one gives it back, a committed one makes it clean.
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].delta, 0);
  EXPECT_EQ(claims[0].stamp, 200);
  EXPECT_TRUE(p_.SettleClaim(claims[0], false)) << "still dirty";
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 1);
  claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_FALSE(p_.SettleClaim(claims[0], true));
  EXPECT_TRUE(CounterTable::Clean(t().at(i)));
}

TEST_F(ExpiryTest, AStampAloneOfAKeyThatHoldsAndStoredNothingIsNotWritten) {
  CounterKey k = Key(1);
  uint32_t i = Load(k);
  int64_t value = 0;
  Dirtied d;
  AddAt(k, 1, Write{200, sc::kNeverExpires}, &value, &d);
  AddAt(k, -1, Write{200, sc::kNeverExpires}, &value, &d);
  EXPECT_TRUE(ClaimAllOf(Key(1).db).empty());
  EXPECT_TRUE(CounterTable::Clean(t().at(i)));
}

TEST_F(ExpiryTest, AClaimTakesTheFlagBeforeTheStampSoALaterWriteFlagsAgain) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  int64_t value = 0;
  Dirtied d;
  AddAt(k, 1, Write{200, sc::kNeverExpires}, &value, &d);
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  AddAt(k, 1, Write{300, sc::kNeverExpires}, &value, &d);
  EXPECT_EQ(t().at(i).stamp_dirty.load(), 1);
  EXPECT_TRUE(p_.SettleClaim(claims[0], true)) << "written since the claim: dirty";
}

TEST_F(ExpiryTest, ACommitOnAnExpiredKeyTakesItsValueAway) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  Reservation r;
  int64_t committed = -1;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 5, &r, &committed, sc::Bounds{}, Write{300, 150}),
            Reserve::kReserved);
  EXPECT_EQ(committed, 0);
  EXPECT_EQ(r.delta, 5);
  EXPECT_EQ(r.expired, 10);
  EXPECT_TRUE(p_.SettleReservation(r, true, 1));
  EXPECT_EQ(t().at(i).value.load(), 5);
  EXPECT_EQ(t().at(i).flushed.load(), 5);
  EXPECT_EQ(t().at(i).last_write.load(), 300);
  EXPECT_EQ(t().at(i).reserved_up.load(), 0);
  EXPECT_TRUE(CounterTable::Clean(t().at(i))) << "the commit's rows hold the stamp";
}

TEST_F(ExpiryTest, AnAbortedCommitOnAnExpiredKeyLeavesItExpired) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  Reservation r;
  int64_t committed = -1;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 5, &r, &committed, sc::Bounds{}, Write{300, 150}),
            Reserve::kReserved);
  EXPECT_TRUE(p_.SettleReservation(r, false, 1));
  EXPECT_EQ(t().at(i).value.load(), 10);
  EXPECT_EQ(t().at(i).last_write.load(), 100);
}

TEST_F(ExpiryTest, ACommitOnAnExpiredKeyThatAnotherHoldsWaits) {
  CounterKey k = Key(1);
  LoadWritten(k);
  Reservation first;
  int64_t committed = -1;
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 5, &first, &committed, sc::Bounds{}, Write{300, 150}),
            Reserve::kReserved);
  Reservation second;
  EXPECT_EQ(p_.ReserveIfResident(k, H(k), 2, &second, &committed, sc::Bounds{}, Write{301, 151}),
            Reserve::kBusy);
  EXPECT_TRUE(p_.SettleReservation(first, true, 1));
  // The first committed: the key lives again, the second adds to it.
  ASSERT_EQ(p_.ReserveIfResident(k, H(k), 2, &second, &committed, sc::Bounds{}, Write{301, 151}),
            Reserve::kReserved);
  EXPECT_EQ(committed, 5);
  EXPECT_EQ(second.expired, 0);
  EXPECT_TRUE(p_.SettleReservation(second, true, 1));
  EXPECT_EQ(ResidentValue(k), 7);
}

TEST_F(ExpiryTest, AFlushOfWritesWithoutATimeGivesTheEntryTheTimeItStored) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  Add(k, 5);  // a counter whose keys do not expire: no stamp
  EXPECT_EQ(t().at(i).last_write.load(), 100);
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_FALSE(claims[0].stamped);
  EXPECT_FALSE(p_.SettleClaim(claims[0], true, 500));
  EXPECT_EQ(t().at(i).last_write.load(), 500) << "as the row's written_at";
  EXPECT_TRUE(CounterTable::Clean(t().at(i)));
}

TEST_F(ExpiryTest, ACommittedSettleTellsWhatTheRowNowHolds) {
  CounterKey k = Key(1);
  LoadWritten(k);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  Add(k, 7);  // meanwhile: not in the row yet
  int64_t stored = -1;
  EXPECT_TRUE(p_.SettleClaim(claims[0], true, 500, &stored));
  EXPECT_EQ(stored, 15) << "10 loaded + the 5 the flush wrote, not the 7 since";
  claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  stored = -1;
  EXPECT_TRUE(p_.SettleClaim(claims[0], false, 500, &stored)) << "still dirty";
  EXPECT_EQ(stored, -1) << "a failed flush stored nothing";
}

TEST_F(ExpiryTest, AFailedFlushOfWritesWithoutATimeLeavesTheStamp) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  Add(k, 5);
  std::vector<Claim> claims = ClaimAllOf(Key(1).db);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_TRUE(p_.SettleClaim(claims[0], false, 500));
  EXPECT_EQ(t().at(i).last_write.load(), 100);
}

TEST_F(ExpiryTest, RaiseStampsStampsTheMatchingEntriesForTheNextFlush) {
  CounterKey a = Key(1), b = Key(2, 7, 4);
  uint32_t ia = LoadWritten(a), ib = LoadWritten(b);
  log_.events.clear();
  p_.RaiseStamps([](const Entry& e) { return e.id.counter == 3; }, 400);
  EXPECT_EQ(log_.Ops().find('X'), std::string::npos) << "shared locks only";
  EXPECT_EQ(t().at(ia).last_write.load(), 400);
  EXPECT_EQ(t().at(ia).stamp_dirty.load(), 1);
  EXPECT_EQ(t().at(ib).last_write.load(), 100) << "another counter's";
  p_.RaiseStamps([](const Entry&) { return true; }, 50);
  EXPECT_EQ(t().at(ia).last_write.load(), 400) << "a stamp never goes back";
}

TEST_F(ExpiryTest, APinOfAnExpiredKeyZeroesIt) {
  CounterKey k = Key(1);
  uint32_t i = LoadWritten(k);
  Pin pin;
  Dirtied d;
  Probe probe = Probe::kMissing;
  p_.Exclusively(P(k), [&] { probe = p_.PinLocked(k, H(k), &pin, 150, &d); });
  ASSERT_EQ(probe, Probe::kFound);
  EXPECT_EQ(t().at(i).value.load(), 0);
  EXPECT_EQ(d.index, i);
  int64_t value = -1;
  EXPECT_TRUE(p_.AddPinned(pin, 4, &value, &d));
  EXPECT_EQ(value, 4);
  p_.StampPinned(pin, 300, &d);
  EXPECT_EQ(t().at(i).last_write.load(), 300);
  p_.Unpin(pin);
}

// ---- a rate limiter's steps: the entry's value is the key's TAT --------------------------------

// A limit of one unit per 10 time units, a burst of 3 (a tolerance of 30).
constexpr sc::GcraLimit kLimit{10, 3, 30};

TEST_F(ExpiryTest, AThrottleAdmitsTheBurstStampsAndDirtiesAndARefusalWritesNothing) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 0, 100);
  ASSERT_TRUE(LinkSumOf(k));
  sc::GcraAnswer a{};
  Dirtied d;
  for (int64_t n = 1; n <= 3; n++) {
    ASSERT_EQ(p_.ThrottleIfResident(k, H(k), 1, kLimit, Write{200, 150}, &a, &d), Probe::kFound);
    EXPECT_TRUE(a.allowed);
    EXPECT_EQ(a.tat, 200 + 10 * n);
    EXPECT_EQ(a.remaining, 3 - n);
  }
  EXPECT_EQ(t().at(i).value.load(), 230);
  EXPECT_EQ(t().at(i).last_write.load(), 200) << "an admitted call stamps the entry";
  EXPECT_NE(t().at(i).value.load(), t().at(i).flushed.load()) << "and makes it dirty";
  ASSERT_EQ(p_.ThrottleIfResident(k, H(k), 1, kLimit, Write{205, 150}, &a, &d), Probe::kFound);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_after, 5);
  EXPECT_EQ(t().at(i).value.load(), 230) << "a refusal writes nothing";
  EXPECT_EQ(t().at(i).last_write.load(), 200) << "nor stamps";
  ASSERT_EQ(p_.ThrottleIfResident(k, H(k), 0, kLimit, Write{215, 150}, &a, &d), Probe::kFound);
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 1) << "a read (cost 0) after one interval and a half";
  EXPECT_EQ(t().at(i).last_write.load(), 200) << "a read stamps nothing";
  EXPECT_EQ(p_.ThrottleIfResident(Key(2), H(Key(2)), 1, kLimit, Write{215, 150}, &a, &d),
            Probe::kMissing);
}

TEST_F(ExpiryTest, AnExpiredLimiterKeyIsFull) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 130, 100);  // its TAT 130, last written at 100
  ASSERT_TRUE(LinkSumOf(k));
  sc::GcraAnswer a{};
  Dirtied d;
  // At 131 with a cutoff of 100 (a tolerance of 31 later): expired, so full: the whole burst.
  ASSERT_EQ(p_.ThrottleIfResident(k, H(k), 3, kLimit, Write{131, 100}, &a, &d), Probe::kFound);
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.tat, 161);
  EXPECT_EQ(t().at(i).value.load(), 161);
}

TEST_F(ExpiryTest, AGiveBackReturnsTheCostButNeverMakesAKeyFullerThanFull) {
  CounterKey k = Key(1);
  uint32_t i = Load(k, 0, 100);
  ASSERT_TRUE(LinkSumOf(k));
  sc::GcraAnswer a{};
  Dirtied d;
  ASSERT_EQ(p_.ThrottleIfResident(k, H(k), 3, kLimit, Write{200, 150}, &a, &d), Probe::kFound);
  ASSERT_EQ(t().at(i).value.load(), 230);
  EXPECT_EQ(p_.GiveBackIfResident(k, H(k), 1, kLimit, Write{200, 150}, &d), Probe::kFound);
  EXPECT_EQ(t().at(i).value.load(), 220);
  // At 215, two units back would leave 200: it stops at now, full.
  EXPECT_EQ(p_.GiveBackIfResident(k, H(k), 2, kLimit, Write{215, 150}, &d), Probe::kFound);
  EXPECT_EQ(t().at(i).value.load(), 215);
  EXPECT_EQ(p_.GiveBackIfResident(k, H(k), 1, kLimit, Write{250, 150}, &d), Probe::kFound);
  EXPECT_EQ(t().at(i).value.load(), 215) << "a full key has nothing to take back";
  // Expired (last written at 215, cutoff 215): left as it is, not zeroed.
  EXPECT_EQ(p_.GiveBackIfResident(k, H(k), 1, kLimit, Write{300, 215}, &d), Probe::kFound);
  EXPECT_EQ(t().at(i).value.load(), 215);
  EXPECT_EQ(p_.GiveBackIfResident(Key(2), H(Key(2)), 1, kLimit, Write{300, 215}, &d),
            Probe::kMissing);
}

}  // namespace
