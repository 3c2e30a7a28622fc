// Single-threaded tests of the write-through request's handshake
// (src/core/write_through_request.hpp): each step alone, the whole life cycle, and the races the
// design names, played in the order two processes could run them (the requester and the flusher,
// a drop, a flusher that is gone). After every step the open count equals the number of requests
// PENDING or TAKEN; a step applied in the wrong state fails its SC_ASSERT.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace sc_test;

constexpr int kPid = 100;      // the flusher
constexpr int kOtherPid = 200;  // another flusher
constexpr int kCancelled = 57014;
constexpr int kDropped = 42704;

class RequestTest : public ::testing::Test {
 protected:
  RequestTest()
      : requests_(4),
        open_(),
        w_(requests_, &open_),
        mem_(16),
        p_(mem_.get(), RecordingLocks(&log_)) {}

  ThroughRequest& r(int i) { return requests_.at(i); }
  RequestState State(int i) { return RequestState(r(i).state); }
  static uint32_t H(const CounterKey& k) { return sc::HashCounterKey(k); }
  static uint32_t P(const CounterKey& k) { return CounterTable::PartitionOf(H(k)); }

  // Takes an entry and links it for k as loading (BeginLoad); index kNil if that failed.
  sc::Loading StartLoad(const CounterKey& k) {
    uint64_t evicted = 0;
    uint32_t index = p_.TakeFreeOrClean(7, false, 16, [](const Entry&) { return true; }, &evicted);
    sc::Loading loading{kNil, 0, 0};
    if (index == kNil ||
        p_.BeginLoad(index, k, H(k), [] { return LoadStart::kLinked; }, &loading) !=
            LoadStart::kLinked)
      loading.index = kNil;
    return loading;
  }

  bool Publish(int i, const CounterKey& k, int64_t delta) {
    return w_.PublishForKey(p_, i, k, H(k), delta);
  }
  std::vector<int> Take(uint32_t db = 7, int pid = kPid) {
    std::vector<int> taken(size_t(requests_.size()));
    taken.resize(size_t(w_.TakePending(db, pid, taken.data())));
    return taken;
  }
  Look LookAt(int i, bool cancelled = false, bool due = false) {
    return w_.LookAt(i, cancelled, due);
  }
  // Each cell of the open counts is the number of its databases' requests PENDING or TAKEN.
  void CheckOpen() {
    EXPECT_EQ(requests_.OpenDriftLocked(open_), 0) << "the open count drifted from the requests' states";
  }
  void TearDown() override {
    CheckOpen();
    EXPECT_TRUE(log_.errors.empty()) << log_.errors.front();
    EXPECT_TRUE(log_.AllReleased());
  }

  StdRequests requests_;
  sc::OpenCounts open_;
  sc::WriteThroughs<StdRequests> w_;
  LockLog log_;
  TableMemory mem_;
  sc::Protocol<RecordingLocks> p_;
};

// ---- the whole life cycle -----------------------------------------------------------------------

TEST_F(RequestTest, ASingleKeyIsPublishedTakenAnsweredAndCollected) {
  CounterKey k = Key(1);
  ASSERT_TRUE(Publish(0, k, 5));
  EXPECT_EQ(State(0), sc::kRequestPending);
  EXPECT_EQ(open_.Total(), 1u);
  EXPECT_EQ(r(0).key, k);
  EXPECT_EQ(r(0).delta, 5);
  EXPECT_EQ(r(0).nbatch, 0);
  CheckOpen();

  EXPECT_EQ(LookAt(0).step, AwaitStep::kOpen) << "nobody answered yet";
  std::vector<int> taken = Take();
  ASSERT_EQ(taken, std::vector<int>{0});
  EXPECT_EQ(State(0), sc::kRequestTaken);
  EXPECT_EQ(r(0).server_pid, kPid);
  EXPECT_EQ(open_.Total(), 1u) << "a taken request is still open";
  Look look = LookAt(0);
  EXPECT_EQ(look.step, AwaitStep::kOpen);
  EXPECT_EQ(look.server, kPid) << "the requester learns who serves it";
  CheckOpen();

  EXPECT_EQ(w_.Finish(0, sc::kRequestDone, 15, 0), 1);
  EXPECT_EQ(State(0), sc::kRequestDone);
  EXPECT_EQ(open_.Total(), 0u);
  EXPECT_TRUE(Take().empty()) << "an answered request is not taken again";
  look = LookAt(0);
  EXPECT_EQ(look.step, AwaitStep::kAnswered);
  EXPECT_EQ(look.answer.state, sc::kRequestDone);
  EXPECT_EQ(look.answer.result, 15);
  EXPECT_EQ(State(0), sc::kRequestEmpty) << "collected: free for the next request";
  look = LookAt(0);
  EXPECT_EQ(look.step, AwaitStep::kAnswered) << "a free request answers at once";
  EXPECT_EQ(look.answer.state, sc::kRequestEmpty);
}

TEST_F(RequestTest, ABatchIsAnsweredForAllItsKeys) {
  w_.PublishBatch(2, CounterKey{7, 3, 0, 1000}, 40, 77);
  EXPECT_EQ(State(2), sc::kRequestPending);
  EXPECT_EQ(r(2).nbatch, 40);
  EXPECT_EQ(r(2).batch, 77u);
  EXPECT_EQ(open_.Total(), 1u);
  ASSERT_EQ(Take(), std::vector<int>{2});
  EXPECT_EQ(w_.Finish(2, sc::kRequestDone, 0, 0), 40) << "a batch answers its keys";
  EXPECT_EQ(LookAt(2).answer.state, sc::kRequestDone);
  EXPECT_EQ(r(2).nbatch, 0) << "a collected request is no batch any more";
}

TEST_F(RequestTest, AnInternRequestIsABatchOfTextsThatNoLoaderWaitsFor) {
  w_.PublishIntern(1, 7, 3, 5, 88, 4242);
  EXPECT_EQ(State(1), sc::kRequestPending);
  EXPECT_TRUE(r(1).intern);
  EXPECT_EQ(r(1).creator, 4242u);
  EXPECT_EQ(r(1).key.counter, 3);
  EXPECT_EQ(r(1).nbatch, 5);
  EXPECT_EQ(r(1).batch, 88u);
  EXPECT_FALSE(w_.OpenFor(CounterKey{7, 3, 0, kNoBucket})) << "an id is not a value";
  ASSERT_EQ(Take(), std::vector<int>{1});
  EXPECT_EQ(w_.Finish(1, sc::kRequestDone, 0, 0), 5);
  EXPECT_EQ(LookAt(1).answer.state, sc::kRequestDone);
  w_.PublishBatch(1, CounterKey{7, 3, 0, kNoBucket}, 2, 9);
  EXPECT_FALSE(r(1).intern) << "the slot's next request is an increment again";
  EXPECT_EQ(r(1).creator, 0u);
}

TEST_F(RequestTest, ADropFailsAPendingInternRequest) {
  w_.PublishIntern(0, 7, 3, 1, 88, 0);
  EXPECT_EQ(w_.FailPending(7, 3, kDropped), 1);
  sc::RequestAnswer answer = LookAt(0).answer;
  EXPECT_EQ(answer.state, sc::kRequestFailed);
  EXPECT_EQ(answer.sqlerrcode, kDropped);
  EXPECT_EQ(open_.Total(), 0u);
}

TEST_F(RequestTest, ANewRequestStartsAfresh) {
  ASSERT_TRUE(Publish(0, Key(1), 5));
  ASSERT_EQ(Take().size(), 1u);
  LookAt(0, true);  // cancelled while taken
  ASSERT_EQ(w_.Finish(0, sc::kRequestFailed, 0, kCancelled), 1);
  EXPECT_EQ(LookAt(0).answer.sqlerrcode, kCancelled);
  ASSERT_TRUE(Publish(0, Key(2), 6));
  EXPECT_EQ(r(0).sqlerrcode, 0);
  EXPECT_EQ(r(0).result, 0);
  ASSERT_EQ(Take().size(), 1u);
  EXPECT_FALSE(w_.CancelRequested(0)) << "the new request inherited the old one's cancel";
  EXPECT_EQ(w_.Finish(0, sc::kRequestDone, 6, 0), 1);
  EXPECT_EQ(LookAt(0).answer.result, 6);
}

// ---- publishing a single key: under its partition lock, not when resident -----------------------

TEST_F(RequestTest, ASingleKeyIsPublishedUnderItsPartitionLockExclusive) {
  CounterKey k = Key(1);
  RequestState at_acquire = sc::kRequestDone, at_release = sc::kRequestEmpty;
  uint32_t open_at_release = 0;
  log_.on_acquire = [&](char, uint32_t) { at_acquire = State(0); };
  log_.on_release = [&](uint32_t) {
    at_release = State(0);
    open_at_release = open_.Total();
  };
  ASSERT_TRUE(Publish(0, k, 5));
  EXPECT_EQ(log_.Ops(), "XR");
  EXPECT_EQ(log_.events[0].partition, P(k));
  EXPECT_EQ(at_acquire, sc::kRequestEmpty);
  EXPECT_EQ(at_release, sc::kRequestPending) << "published after the lock was released";
  EXPECT_EQ(open_at_release, 1u) << "counted open after the lock was released";
}

TEST_F(RequestTest, AResidentKeyIsNotPublished) {
  CounterKey k = Key(1);
  sc::Loading loading = StartLoad(k);
  ASSERT_NE(loading.index, kNil);
  EXPECT_FALSE(Publish(0, k, 5)) << "a key being loaded is linked: add to it instead";
  ASSERT_TRUE(p_.FinishLoad(loading, 3, [] { return false; }));
  uint64_t evicted = 0;
  uint32_t sum = p_.TakeFreeOrClean(7, false, 16, [](const Entry&) { return true; }, &evicted);
  p_.LinkSum(sum, k, H(k));
  EXPECT_FALSE(Publish(0, k, 5));
  EXPECT_EQ(State(0), sc::kRequestEmpty);
  EXPECT_EQ(open_.Total(), 0u);
}

// A resident key without its sum entry (core/protocol.hpp: sums) cannot be written in the buffer,
// and the caller found no room for the sum entry: clean, it holds nothing beyond its row, so it
// leaves and its write goes through.
TEST_F(RequestTest, AResidentKeyWithoutItsSumEntryLeavesAndIsPublished) {
  CounterKey k = Key(1);
  sc::Loading loading = StartLoad(k);
  ASSERT_NE(loading.index, kNil);
  ASSERT_TRUE(p_.FinishLoad(loading, 3, [] { return false; }));
  p_.table().at(loading.index).in_flush.store(1);
  EXPECT_FALSE(Publish(0, k, 5)) << "one a flush claimed stays until it is settled";
  p_.table().at(loading.index).in_flush.store(0);
  EXPECT_TRUE(Publish(0, k, 5));
  EXPECT_EQ(p_.table().Find(k, H(k)), kNil);
  EXPECT_EQ(State(0), sc::kRequestPending);
  ASSERT_EQ(Take().size(), 1u);
  EXPECT_EQ(w_.Finish(0, sc::kRequestDone, 8, 0), 1);
  EXPECT_EQ(LookAt(0).answer.result, 8);
}

// A loader checks, under the key's exclusive lock, that no request for the key is open.
TEST_F(RequestTest, ALoaderSeesASingleKeysRequestUntilItIsAnswered) {
  CounterKey k = Key(1);
  EXPECT_FALSE(w_.OpenFor(k));
  ASSERT_TRUE(Publish(0, k, 5));
  EXPECT_TRUE(w_.OpenFor(k));
  EXPECT_FALSE(w_.OpenFor(Key(2)));
  EXPECT_FALSE(w_.OpenFor(Key(1, 8))) << "another database's key";
  EXPECT_FALSE(w_.OpenFor(Key(1, 7, 4))) << "another counter's key";
  EXPECT_FALSE(w_.OpenFor(Key(1, 7, 3, 1000))) << "another bucket";
  ASSERT_EQ(Take().size(), 1u);
  EXPECT_TRUE(w_.OpenFor(k)) << "the flusher is writing it";
  w_.GiveBack(0);
  EXPECT_TRUE(w_.OpenFor(k)) << "given back, it is pending again";
  ASSERT_EQ(Take().size(), 1u);
  w_.Finish(0, sc::kRequestDone, 5, 0);
  EXPECT_FALSE(w_.OpenFor(k)) << "answered: the key may be loaded (the table has its delta)";
}

TEST_F(RequestTest, ABatchIsNotALoadersConcern) {
  // A batch's keys are covered by the partition holds; its key field names no key.
  w_.PublishBatch(0, CounterKey{7, 3, 1, kNoBucket}, 10, 1);
  EXPECT_FALSE(w_.OpenFor(Key(1)));
}

TEST_F(RequestTest, WithNothingOpenTheScansTakeNoLock) {
  int before = requests_.locks();
  EXPECT_FALSE(w_.OpenFor(Key(1)));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(requests_.locks(), before) << "loaders and flushers skip the scan when nothing is open";
}

// One database's open requests cost the loaders and the flusher of another nothing: each counts
// its own (but for databases whose oids share a cell).
TEST_F(RequestTest, AnotherDatabasesOpenRequestsTakeNoLockEither) {
  ASSERT_TRUE(Publish(0, Key(1), 5));  // database 7
  EXPECT_EQ(open_.Of(7).load(), 1u);
  int before = requests_.locks();
  EXPECT_FALSE(w_.OpenFor(Key(1, 8)));
  EXPECT_TRUE(Take(8).empty());
  EXPECT_EQ(requests_.locks(), before) << "database 8 has none open: no scan";
  EXPECT_FALSE(w_.OpenFor(Key(1, 7 + sc::kOpenCells)));
  EXPECT_GT(requests_.locks(), before) << "a database sharing 7's cell scans";
  ASSERT_EQ(Take().size(), 1u);
  EXPECT_EQ(w_.Finish(0, sc::kRequestDone, 5, 0), 1);
  EXPECT_EQ(open_.Total(), 0u);
}

// ---- the requester's withdraw and cancel --------------------------------------------------------

TEST_F(RequestTest, APendingRequestIsWithdrawnWhenCancelledOrDue) {
  for (int how = 0; how < 2; how++) {
    ASSERT_TRUE(Publish(0, Key(1), 5));
    EXPECT_EQ(LookAt(0).step, AwaitStep::kOpen);
    Look look = how == 0 ? LookAt(0, true, false) : LookAt(0, false, true);
    EXPECT_EQ(look.step, AwaitStep::kWithdrawn) << how;
    EXPECT_EQ(State(0), sc::kRequestEmpty);
    EXPECT_EQ(open_.Total(), 0u);
    EXPECT_TRUE(Take().empty()) << "a withdrawn request is never written";
    EXPECT_FALSE(w_.OpenFor(Key(1)));
  }
}

// The race: the flusher takes the request just before the requester's look withdraws it.
TEST_F(RequestTest, ATakenRequestIsNotWithdrawnButAskedToBeGivenUp) {
  ASSERT_TRUE(Publish(0, Key(1), 5));
  ASSERT_EQ(Take().size(), 1u);
  EXPECT_EQ(LookAt(0, false, true).step, AwaitStep::kOpen) << "due, but taken: wait for it";
  EXPECT_FALSE(w_.CancelRequested(0));
  EXPECT_EQ(LookAt(0, true, true).step, AwaitStep::kOpen);
  EXPECT_EQ(State(0), sc::kRequestTaken);
  EXPECT_TRUE(w_.CancelRequested(0)) << "the flusher gives up before its next chunk";
  EXPECT_EQ(w_.Finish(0, sc::kRequestFailed, 0, kCancelled), 1);
  Look look = LookAt(0, true, true);
  EXPECT_EQ(look.step, AwaitStep::kAnswered);
  EXPECT_EQ(look.answer.state, sc::kRequestFailed);
  EXPECT_EQ(look.answer.sqlerrcode, kCancelled);
}

// The other order: withdrawn first, the flusher finds nothing to take.
TEST_F(RequestTest, AWithdrawnRequestIsNotTaken) {
  ASSERT_TRUE(Publish(0, Key(1), 5));
  EXPECT_EQ(LookAt(0, true).step, AwaitStep::kWithdrawn);
  EXPECT_TRUE(Take().empty());
}

// A cancel that comes after the flusher finished: the increment is in; the requester learns so.
TEST_F(RequestTest, ACancelAfterTheAnswerCollectsTheAnswer) {
  ASSERT_TRUE(Publish(0, Key(1), 5));
  ASSERT_EQ(Take().size(), 1u);
  ASSERT_EQ(w_.Finish(0, sc::kRequestDone, 9, 0), 1);
  Look look = LookAt(0, true, true);
  EXPECT_EQ(look.step, AwaitStep::kAnswered);
  EXPECT_EQ(look.answer.state, sc::kRequestDone);
  EXPECT_EQ(look.answer.result, 9);
}

// ---- the flusher --------------------------------------------------------------------------------

TEST_F(RequestTest, AFlusherTakesOnlyItsDatabasesPendingRequests) {
  ASSERT_TRUE(Publish(0, Key(1, 7), 1));
  ASSERT_TRUE(Publish(1, Key(1, 8), 1));
  ASSERT_TRUE(Publish(2, Key(2, 7), 1));
  EXPECT_EQ(Take(7), (std::vector<int>{0, 2}));
  EXPECT_TRUE(Take(7, kOtherPid).empty()) << "an overlapping flusher takes none of them again";
  EXPECT_EQ(Take(8, kOtherPid), std::vector<int>{1});
  EXPECT_EQ(open_.Total(), 3u);
  EXPECT_EQ(w_.Finish(0, sc::kRequestDone, 1, 0) + w_.Finish(2, sc::kRequestDone, 1, 0) +
                w_.Finish(1, sc::kRequestDone, 1, 0),
            3);
}

TEST_F(RequestTest, AFailedTurnGivesItsRequestsBackForTheNext) {
  ASSERT_TRUE(Publish(0, Key(1), 1));
  ASSERT_TRUE(Publish(1, Key(2), 1));
  ASSERT_EQ(Take().size(), 2u);
  w_.GiveBack(0);                                            // the whole turn failed
  EXPECT_EQ(w_.Finish(1, sc::kRequestPending, 0, 0), 0);     // or one asks to retry
  EXPECT_EQ(State(0), sc::kRequestPending);
  EXPECT_EQ(State(1), sc::kRequestPending);
  EXPECT_EQ(open_.Total(), 2u) << "given back, still open";
  EXPECT_EQ(LookAt(0).step, AwaitStep::kOpen) << "not answered";
  EXPECT_EQ(Take(7, kOtherPid), (std::vector<int>{0, 1}));
  EXPECT_EQ(r(0).server_pid, kOtherPid);
  w_.Finish(0, sc::kRequestDone, 1, 0);
  w_.Finish(1, sc::kRequestDone, 1, 0);
}

// A flusher that took a request and is gone: the requester gives it back, unless another
// flusher took it meanwhile.
TEST_F(RequestTest, ARequestWhoseFlusherIsGoneGoesBackOnce) {
  ASSERT_TRUE(Publish(0, Key(1), 1));
  ASSERT_EQ(Take(7, kPid).size(), 1u);
  EXPECT_FALSE(w_.GiveBackFromGone(0, kOtherPid)) << "not the server that took it";
  EXPECT_EQ(State(0), sc::kRequestTaken);
  EXPECT_TRUE(w_.GiveBackFromGone(0, kPid));
  EXPECT_EQ(State(0), sc::kRequestPending);
  EXPECT_EQ(open_.Total(), 1u);
  ASSERT_EQ(Take(7, kOtherPid).size(), 1u);
  EXPECT_FALSE(w_.GiveBackFromGone(0, kPid)) << "the requester's look was older than the new take";
  EXPECT_EQ(r(0).server_pid, kOtherPid);
  w_.Finish(0, sc::kRequestDone, 1, 0);
  EXPECT_FALSE(w_.GiveBackFromGone(0, kOtherPid)) << "an answer is never given back";
  EXPECT_EQ(LookAt(0).answer.state, sc::kRequestDone);
}

// ---- drops and reused slots ---------------------------------------------------------------------

TEST_F(RequestTest, ADropFailsTheCountersPendingRequestsOnly) {
  ASSERT_TRUE(Publish(0, Key(1, 7, 3), 1));
  ASSERT_TRUE(Publish(1, Key(1, 7, 4), 1));
  ASSERT_TRUE(Publish(2, Key(1, 8, 3), 1));
  ASSERT_EQ(Take(7).size(), 2u);  // requests 0 and 1 taken
  w_.GiveBack(1);
  ASSERT_TRUE(Publish(3, Key(2, 7, 3), 1));
  EXPECT_EQ(w_.FailPending(7, 3, kDropped), 1) << "request 3: pending, db 7, counter 3";
  EXPECT_EQ(State(3), sc::kRequestFailed);
  EXPECT_EQ(State(0), sc::kRequestTaken) << "its flusher answers a taken one";
  EXPECT_EQ(State(1), sc::kRequestPending) << "another counter";
  EXPECT_EQ(State(2), sc::kRequestPending) << "another database";
  EXPECT_EQ(open_.Total(), 3u);
  Look look = LookAt(3);
  EXPECT_EQ(look.answer.state, sc::kRequestFailed);
  EXPECT_EQ(look.answer.sqlerrcode, kDropped);
  EXPECT_EQ(w_.FailPending(7, 0, kDropped), 1) << "a database's drop: every counter of it";
  EXPECT_EQ(State(1), sc::kRequestFailed);
  EXPECT_EQ(State(2), sc::kRequestPending);
  EXPECT_TRUE(Take(7).empty()) << "a failed request is not written";
  w_.Finish(0, sc::kRequestFailed, 0, kDropped);
}

TEST_F(RequestTest, ABackendForgetsAnotherDatabasesPendingRequestInItsSlot) {
  ASSERT_TRUE(Publish(0, Key(1, 8), 1));  // left by a process of database 8
  EXPECT_FALSE(w_.ForgetForeign(0, 8)) << "its own database's request is waited for";
  EXPECT_TRUE(w_.ForgetForeign(0, 7));
  EXPECT_EQ(State(0), sc::kRequestEmpty);
  EXPECT_EQ(open_.Total(), 0u);
  ASSERT_TRUE(Publish(0, Key(1, 8), 1));
  ASSERT_EQ(Take(8).size(), 1u);
  EXPECT_FALSE(w_.ForgetForeign(0, 7)) << "a taken one is answered by its flusher: wait for it";
  EXPECT_EQ(State(0), sc::kRequestTaken);
  w_.Finish(0, sc::kRequestDone, 1, 0);
  EXPECT_FALSE(w_.ForgetForeign(0, 7)) << "an answer is collected, not forgotten";
  EXPECT_EQ(LookAt(0).answer.state, sc::kRequestDone);
}

// ---- the seams: every step asserts the state it expects -----------------------------------------

using RequestDeathTest = RequestTest;

TEST_F(RequestDeathTest, EachStepAssertsItsState) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  std::atomic<uint32_t> open{1};
  ThroughRequest q{};
  q.state = sc::kRequestPending;
  EXPECT_DEATH(sc::request_step::Publish(q, open, Key(1), 1, 0, 0), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Cancel(q), "SC_ASSERT");
  EXPECT_DEATH((void)sc::request_step::Collect(q), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::GiveBack(q), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Answer(q, open, sc::kRequestDone, 1, 0), "SC_ASSERT");
  q.state = sc::kRequestTaken;
  EXPECT_DEATH(sc::request_step::Withdraw(q, open), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Take(q, kPid), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Fail(q, open, kDropped), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Answer(q, open, sc::kRequestPending, 1, 0), "SC_ASSERT");
  q.state = sc::kRequestDone;
  EXPECT_DEATH(sc::request_step::Withdraw(q, open), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Take(q, kPid), "SC_ASSERT");
  EXPECT_DEATH(sc::request_step::Publish(q, open, Key(1), 1, 0, 0), "SC_ASSERT")
      << "an answer must be collected before the next request";
  std::atomic<uint32_t> none{0};
  q.state = sc::kRequestPending;
  EXPECT_DEATH(sc::request_step::Withdraw(q, none), "SC_ASSERT") << "the open count below zero";
  // Through the table: the flusher's steps on a request it did not take.
  ASSERT_TRUE(Publish(0, Key(1), 1));
  EXPECT_DEATH(w_.Finish(0, sc::kRequestDone, 1, 0), "SC_ASSERT");
  EXPECT_DEATH(w_.GiveBack(0), "SC_ASSERT");
  EXPECT_DEATH((void)w_.CancelRequested(0), "SC_ASSERT");
  EXPECT_EQ(LookAt(0, true).step, AwaitStep::kWithdrawn);
}

}  // namespace
