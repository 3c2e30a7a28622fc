// Single-threaded tests of every step of src/core/fold_epochs.hpp, with a mutex that records each
// acquisition (FoldLog): a step takes the mutex where the protocol says, releases it, and the
// invariants hold after every step. Where another process would act between two steps (a commit
// between a flush's take of the epoch and its fold, a bucket drop during a fold, a second flusher
// during a hand-over), the test acts there.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/fold_epochs.hpp"

namespace {

using sc::FoldEpochs;

// The slot's spinlock: counts acquisitions, fails the test on a lock held twice or a release of
// a lock not held, and lets a test act while it is held (on_lock).
struct FoldLog {
  int locks = 0;
  bool held = false;
  std::vector<const char*> errors;
  std::function<void()> on_lock;
};

class RecordingMutex {
 public:
  explicit RecordingMutex(FoldLog* log) : log_(log) {}
  void lock() {
    if (log_->held) log_->errors.push_back("lock taken twice");
    log_->held = true;
    log_->locks++;
    if (log_->on_lock) log_->on_lock();
  }
  void unlock() {
    if (!log_->held) log_->errors.push_back("release of a lock not held");
    log_->held = false;
  }

 private:
  FoldLog* log_;
};

class FoldEpochsTest : public ::testing::Test {
 protected:
  FoldEpochsTest() : mutex_(&log_) { sc::InitFoldEpochs(f_); }

  void TearDown() override {
    EXPECT_TRUE(log_.errors.empty()) << log_.errors.front();
    EXPECT_FALSE(log_.held);
    CheckInvariants();
  }

  // The rules of fold_epochs.hpp that hold at every moment.
  void CheckInvariants() {
    uint32_t fold = f_.fold_epoch.load();
    EXPECT_LE(f_.deltas_until.load(), fold);
    EXPECT_LT(f_.folded_epoch.load(), fold);
    EXPECT_LT(f_.evictable_epoch.load(), fold);
    EXPECT_LE(f_.folded_epoch.load(), f_.evictable_epoch.load());
    EXPECT_GE(f_.unfolded_count, 0);
    EXPECT_LE(f_.unfolded_count, sc::kMaxUnfolded);
  }

  uint32_t Take() {
    uint32_t v = sc::TakeFoldEpoch(f_);
    CheckInvariants();
    return v;
  }
  void Publish(uint32_t epoch, std::vector<int32_t> skipped = {}) {
    sc::PublishFold(f_, mutex_, epoch, skipped.data(), int(skipped.size()));
    CheckInvariants();
  }
  bool Folded(int32_t counter, uint32_t epoch) { return sc::Folded(f_, mutex_, counter, epoch); }
  bool ReadsDeltas() { return sc::LoadsReadDeltas(f_); }
  // One complete fold that skips nothing.
  uint32_t Fold() {
    uint32_t v = Take();
    Publish(v);
    return v;
  }

  FoldEpochs f_;
  FoldLog log_;
  RecordingMutex mutex_;
};

TEST_F(FoldEpochsTest, AFreshSlotReadsDeltasUntilItsFirstFold) {
  EXPECT_TRUE(ReadsDeltas()) << "deltas from before a restart";
  uint32_t tag = sc::CommitEpoch(f_);
  EXPECT_FALSE(Folded(3, tag));
  uint32_t v = Take();
  EXPECT_EQ(v, tag);
  EXPECT_TRUE(ReadsDeltas()) << "the fold has not committed yet";
  EXPECT_FALSE(Folded(3, tag));
  Publish(v);
  EXPECT_FALSE(ReadsDeltas());
  EXPECT_TRUE(Folded(3, tag));
  EXPECT_EQ(sc::CommitEpoch(f_), v + 1) << "later commits tag the next epoch";
}

TEST_F(FoldEpochsTest, EachStepTakesTheMutexOnceAndReleasesIt) {
  uint32_t v = Take();
  EXPECT_EQ(log_.locks, 0) << "the take is one atomic add";
  Publish(v);
  EXPECT_EQ(log_.locks, 1);
  (void)Folded(3, v);
  EXPECT_EQ(log_.locks, 2);
  sc::RequireDeltaReads(f_);
  (void)ReadsDeltas();
  (void)sc::CommitEpoch(f_);
  EXPECT_EQ(log_.locks, 2) << "deltas_until and the tag are atomics";
  sc::ResetFoldEpochs(f_, mutex_);
  EXPECT_EQ(log_.locks, 3);
}

// A commit that becomes visible between the flush's take and its fold's snapshot tags the next
// epoch: the fold may miss it, so its entry stays until the next fold.
TEST_F(FoldEpochsTest, ACommitBetweenTheTakeAndTheFoldWaitsForTheNextFold) {
  Fold();
  uint32_t v = Take();
  uint32_t tag = sc::CommitEpoch(f_);  // the commit settles here
  EXPECT_GT(tag, v);
  Publish(v);  // its fold read the deltas before the commit
  EXPECT_FALSE(Folded(3, tag)) << "evicted with its delta still in slotted_counter.deltas";
  uint32_t w = Take();
  EXPECT_EQ(w, tag);
  Publish(w);
  EXPECT_TRUE(Folded(3, tag));
}

// A commit that settled before the take tags the taken epoch, and the fold (whose snapshot comes
// after the take) sees it.
TEST_F(FoldEpochsTest, ACommitBeforeTheTakeIsInThatFold) {
  Fold();
  uint32_t tag = sc::CommitEpoch(f_);
  uint32_t v = Take();
  EXPECT_EQ(tag, v);
  EXPECT_FALSE(Folded(3, tag)) << "not before the fold committed";
  Publish(v);
  EXPECT_TRUE(Folded(3, tag));
  EXPECT_TRUE(Folded(3, tag - 1));
  EXPECT_TRUE(Folded(3, 0));
}

// A counter locked by a transaction dropping it (or its buckets) is skipped: its entries stay, the
// others may go, and loads go on reading deltas until a fold that skips none.
TEST_F(FoldEpochsTest, ASkippedCounterKeepsItsEntries) {
  Fold();
  uint32_t tag = sc::CommitEpoch(f_);
  sc::RequireDeltaReads(f_);  // say, a bucket drop purged entries
  uint32_t v = Take();
  Publish(v, {5, 9});
  EXPECT_FALSE(Folded(5, tag));
  EXPECT_FALSE(Folded(9, tag));
  EXPECT_TRUE(Folded(3, tag));
  EXPECT_TRUE(Folded(6, tag));
  EXPECT_TRUE(ReadsDeltas()) << "a fold that skipped counters is not complete";
  uint32_t w = Take();
  Publish(w);
  EXPECT_TRUE(Folded(5, tag));
  EXPECT_TRUE(Folded(9, tag));
  EXPECT_FALSE(ReadsDeltas());
}

TEST_F(FoldEpochsTest, AFoldThatSkippedTooManyMovesNothing) {
  uint32_t first = Fold();
  uint32_t tag = sc::CommitEpoch(f_);
  sc::RequireDeltaReads(f_);
  uint32_t v = Take();
  std::vector<int32_t> many;
  for (int32_t c = 1; c <= sc::kMaxUnfolded + 1; c++) many.push_back(c);
  Publish(v, many);
  EXPECT_FALSE(Folded(sc::kMaxUnfolded + 5, tag)) << "not even a counter it did not skip";
  EXPECT_TRUE(Folded(1, first));
  EXPECT_TRUE(ReadsDeltas());
  EXPECT_EQ(f_.evictable_epoch.load(), first);
  EXPECT_EQ(f_.folded_epoch.load(), first);
  // Exactly kMaxUnfolded still publishes.
  uint32_t w = Take();
  many.pop_back();
  Publish(w, many);
  EXPECT_TRUE(Folded(sc::kMaxUnfolded + 5, tag));
  EXPECT_FALSE(Folded(sc::kMaxUnfolded, tag));
  EXPECT_EQ(f_.unfolded_count, sc::kMaxUnfolded);
}

// A bucket drop purges entries whose deltas a commit after its DELETE kept; it makes loads read
// the deltas (RequireDeltaReads) while a fold that took its epoch before may not see that commit.
TEST_F(FoldEpochsTest, ABucketDropDuringAFoldWaitsForTheNextFold) {
  Fold();
  EXPECT_FALSE(ReadsDeltas());
  uint32_t v = Take();
  sc::RequireDeltaReads(f_);  // the drop, during the fold
  EXPECT_TRUE(ReadsDeltas());
  Publish(v);
  EXPECT_TRUE(ReadsDeltas()) << "a fold that began before the drop says nothing of its deltas";
  Publish(Take());
  EXPECT_FALSE(ReadsDeltas());
}

TEST_F(FoldEpochsTest, ABucketDropBeforeAFoldEndsWithIt) {
  Fold();
  sc::RequireDeltaReads(f_);
  EXPECT_TRUE(ReadsDeltas());
  uint32_t v = Take();
  EXPECT_TRUE(ReadsDeltas());
  Publish(v);
  EXPECT_FALSE(ReadsDeltas());
  sc::RequireDeltaReads(f_);
  sc::RequireDeltaReads(f_);
  EXPECT_EQ(f_.deltas_until.load(), f_.fold_epoch.load()) << "twice is once";
}

// Two flushers overlap during a hand-over: the old one's fold may end after the new one's. An
// older fold moves nothing back.
TEST_F(FoldEpochsTest, AnOlderFoldEndingLastMovesNothingBack) {
  Fold();
  uint32_t old_fold = Take();
  uint32_t new_fold = Take();
  uint32_t tag = sc::CommitEpoch(f_);
  (void)tag;
  Publish(new_fold, {5});
  EXPECT_TRUE(Folded(3, new_fold));
  Publish(old_fold);
  EXPECT_EQ(f_.evictable_epoch.load(), new_fold);
  EXPECT_TRUE(Folded(3, new_fold)) << "the newer fold's progress is kept";
  EXPECT_FALSE(Folded(5, new_fold)) << "the newer fold skipped 5";
  EXPECT_EQ(f_.folded_epoch.load(), old_fold) << "the older fold skipped none";
}

TEST_F(FoldEpochsTest, AnOlderCompleteFoldEndingLastKeepsLoadsOffTheDeltas) {
  Fold();
  uint32_t old_fold = Take();
  sc::RequireDeltaReads(f_);  // a bucket drop between the two takes
  uint32_t new_fold = Take();
  Publish(new_fold);
  EXPECT_FALSE(ReadsDeltas());
  Publish(old_fold);
  EXPECT_FALSE(ReadsDeltas()) << "the newer fold already folded the drop's deltas";
  EXPECT_EQ(f_.folded_epoch.load(), new_fold);
}

TEST_F(FoldEpochsTest, AnOlderFoldThatSkippedEndingLastKeepsTheNewerOnesWord) {
  Fold();
  sc::RequireDeltaReads(f_);
  uint32_t old_fold = Take();
  uint32_t new_fold = Take();
  Publish(new_fold);
  EXPECT_FALSE(ReadsDeltas());
  Publish(old_fold, {5});
  EXPECT_TRUE(Folded(5, new_fold)) << "the newer fold folded 5";
  EXPECT_FALSE(ReadsDeltas());
  EXPECT_EQ(f_.folded_epoch.load(), new_fold);
  EXPECT_EQ(f_.evictable_epoch.load(), new_fold);
}

// Publishing changes evictable_epoch and unfolded together under the mutex: a reader that takes
// the mutex sees both old or both new.
TEST_F(FoldEpochsTest, EvictableAndUnfoldedChangeTogetherUnderTheMutex) {
  uint32_t v = Take();
  Publish(v, {5});
  uint32_t w = Take();
  bool checked = false;
  log_.on_lock = [&] {
    // The fold's publish holds the mutex now: nothing of it is visible yet.
    EXPECT_EQ(f_.evictable_epoch.load(), v);
    ASSERT_EQ(f_.unfolded_count, 1);
    EXPECT_EQ(f_.unfolded[0], 5);
    checked = true;
  };
  Publish(w, {7});
  log_.on_lock = nullptr;
  EXPECT_TRUE(checked);
  EXPECT_EQ(f_.evictable_epoch.load(), w);
  EXPECT_TRUE(Folded(5, w));
  EXPECT_FALSE(Folded(7, w));
}

// A slot given to another database: a new epoch, nothing folded for it, nothing of the old
// database's skipped counters left.
TEST_F(FoldEpochsTest, AReassignedSlotStartsAnewAndForward) {
  uint32_t v = Take();
  Publish(v, {5});
  Fold();
  uint32_t w = Take();
  Publish(w, {5});
  uint32_t before = f_.fold_epoch.load();
  EXPECT_FALSE(Folded(5, v));
  sc::ResetFoldEpochs(f_, mutex_);
  CheckInvariants();
  EXPECT_GT(f_.fold_epoch.load(), before) << "epochs move forward only";
  EXPECT_TRUE(ReadsDeltas()) << "the new database's deltas from before";
  uint32_t tag = sc::CommitEpoch(f_);
  EXPECT_FALSE(Folded(5, tag));
  EXPECT_FALSE(Folded(3, tag)) << "a commit of the new database is not folded by the old's fold";
  EXPECT_TRUE(Folded(5, w)) << "the old database's skipped counter is not the new one's";
  Publish(Take());
  EXPECT_TRUE(Folded(3, tag));
  EXPECT_FALSE(ReadsDeltas());
}

// The asserts at the seams: a fold published for an epoch no flush took, a deltas_until ahead of
// fold_epoch, a folded_epoch ahead of evictable_epoch.
using FoldEpochsDeathTest = FoldEpochsTest;

TEST_F(FoldEpochsDeathTest, PublishingAnEpochNotTakenAsserts) {
  EXPECT_DEATH(Publish(f_.fold_epoch.load()), "SC_ASSERT");
}

TEST_F(FoldEpochsDeathTest, ABrokenOrderAsserts) {
  f_.deltas_until.store(f_.fold_epoch.load() + 1);
  EXPECT_DEATH(sc::RequireDeltaReads(f_), "SC_ASSERT");
  f_.deltas_until.store(1);
  f_.fold_epoch.store(5);
  f_.folded_epoch.store(3);  // evictable_epoch is 0
  EXPECT_DEATH(Publish(4), "SC_ASSERT");
  f_.fold_epoch.store(3);
  EXPECT_DEATH((void)sc::TakeFoldEpoch(f_), "SC_ASSERT") << "fold_epoch did not move on";
  f_.fold_epoch.store(5);
  f_.folded_epoch.store(0);
}

}  // namespace
