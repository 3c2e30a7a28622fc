// Single-threaded tests of every step of src/core/database_slot.hpp: a slot's assignment, the
// start of its flusher, the flusher's claim, leave and hand-over, the ways a slot is freed, the
// closing mark, the requests to leave, and the flush tickets. The lock policies record what is
// held, so a test checks that each step works under its lock and acts where another process
// would have acted between two steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/database_slot.hpp"

namespace {

using sc::FlushTickets;
using sc::SlotClaim;

struct TestSlot {
  SlotClaim claim;
  FlushTickets tickets;
  int resets;
};

// slots_lock: counts, and says what is held.
struct SlotsLog {
  int exclusive = 0, shared = 0;
  int held = 0;  // -1 exclusive, >0 shared holders
  std::vector<const char*> errors;
};

class RecordingSlotsLock {
 public:
  explicit RecordingSlotsLock(SlotsLog* log) : log_(log) {}
  void lock() {
    if (log_->held != 0) log_->errors.push_back("exclusive over a held lock");
    log_->held = -1;
    log_->exclusive++;
  }
  void unlock() {
    if (log_->held != -1) log_->errors.push_back("exclusive release of a lock not held so");
    log_->held = 0;
  }
  void lock_shared() {
    if (log_->held < 0) log_->errors.push_back("shared over an exclusive lock");
    log_->held++;
    log_->shared++;
  }
  void unlock_shared() {
    if (log_->held <= 0) log_->errors.push_back("shared release of a lock not held so");
    log_->held--;
  }

 private:
  SlotsLog* log_;
};

struct TicketMutex {
  bool held = false;
  int locks = 0;
  void lock() {
    EXPECT_FALSE(held);
    held = true;
    locks++;
  }
  void unlock() {
    EXPECT_TRUE(held);
    held = false;
  }
};

constexpr int kSlots = 2;
constexpr int64_t kRetry = 10000000;  // 10 s in microseconds

class DatabaseSlotTest : public ::testing::Test {
 protected:
  DatabaseSlotTest() : lock_(&log_) {
    for (TestSlot& s : slots_) {
      sc::InitSlotClaim(s.claim);
      sc::InitFlushTickets(s.tickets);
      s.resets = 0;
    }
  }
  void TearDown() override {
    EXPECT_TRUE(log_.errors.empty()) << log_.errors.front();
    EXPECT_EQ(log_.held, 0);
    EXPECT_FALSE(mutex_.held);
  }

  // The caller's reset: under the exclusive lock, before the slot names its database.
  void Reset(TestSlot& s) {
    EXPECT_EQ(log_.held, -1);
    EXPECT_EQ(s.claim.db.load(), 0u) << "reset after the slot names its database";
    s.resets++;
    sc::InitFlushTickets(s.tickets);
  }
  auto Resetter() {
    return [this](TestSlot& s) { Reset(s); };
  }
  sc::StartRequest<TestSlot> Start(uint32_t db, int64_t now) {
    return sc::EnsureStart(lock_, slots_, kSlots, db, now, kRetry, Resetter());
  }
  TestSlot* Claim(uint32_t db, int32_t pid) {
    return sc::ClaimForFlusher(lock_, slots_, kSlots, db, pid, &latches_[pid % 4], Resetter());
  }
  TestSlot* Find(uint32_t db) { return sc::FindSlot(slots_, kSlots, db); }
  bool MayFreeUnderLock() {
    EXPECT_EQ(log_.held, -1) << "may_free is asked under the lock";
    return true;
  }

  TestSlot slots_[kSlots];
  SlotsLog log_;
  RecordingSlotsLock lock_;
  TicketMutex mutex_;
  int latches_[4] = {};
};

TEST_F(DatabaseSlotTest, AStartAssignsAFreeSlotAndAsksOnceWithinTheRetryTime) {
  EXPECT_EQ(Find(7), nullptr);
  sc::StartRequest<TestSlot> r = Start(7, 1000);
  ASSERT_EQ(r.slot, &slots_[0]);
  EXPECT_TRUE(r.fresh);
  EXPECT_TRUE(r.start);
  EXPECT_EQ(r.slot->resets, 1);
  EXPECT_EQ(Find(7), r.slot);
  EXPECT_EQ(log_.exclusive, 1);
  sc::StartRequest<TestSlot> again = Start(7, 1000 + kRetry - 1);
  EXPECT_EQ(again.slot, r.slot);
  EXPECT_FALSE(again.fresh);
  EXPECT_FALSE(again.start) << "a flusher was asked for a moment ago";
  EXPECT_EQ(r.slot->resets, 1);
  EXPECT_TRUE(Start(7, 1000 + kRetry).start) << "the worker never came: ask again";
  sc::StartRequest<TestSlot> other = Start(8, 1000);
  EXPECT_EQ(other.slot, &slots_[1]);
  EXPECT_EQ(Start(9, 1000).slot, nullptr) << "every slot taken";
}

TEST_F(DatabaseSlotTest, NoStartWhileAFlusherClaimsTheSlotOrItIsClosing) {
  sc::StartRequest<TestSlot> r = Start(7, 1000);
  ASSERT_EQ(Claim(7, 101), r.slot);
  EXPECT_FALSE(Start(7, 1000 + 2 * kRetry).start);
  EXPECT_TRUE(sc::LeaveSlot(lock_, r.slot->claim, 101));
  sc::MarkClosing(r.slot->claim);
  EXPECT_TRUE(sc::Closing(r.slot->claim));
  EXPECT_FALSE(Start(7, 1000 + 2 * kRetry).start) << "a command on the whole database runs";
  sc::UnmarkClosing(r.slot->claim);
  EXPECT_FALSE(sc::Closing(r.slot->claim));
  EXPECT_TRUE(Start(7, 1000 + 2 * kRetry).start);
}

TEST_F(DatabaseSlotTest, AFailedStartFreesOnlyTheSlotItAssigned) {
  sc::StartRequest<TestSlot> r = Start(7, 1000);
  sc::StartFailed(lock_, r, 7);
  EXPECT_EQ(Find(7), nullptr) << "no value was written to it";
  EXPECT_EQ(r.slot->claim.start_requested, 0);
  // Not fresh: the slot stays, ready for the next try.
  r = Start(7, 1000);
  EXPECT_TRUE(r.fresh);
  sc::StartRequest<TestSlot> retry = Start(7, 1000 + kRetry);
  EXPECT_FALSE(retry.fresh);
  ASSERT_TRUE(retry.start);
  sc::StartFailed(lock_, retry, 7);
  EXPECT_EQ(Find(7), r.slot) << "assigned by another request";
  r = Start(7, 1000 + kRetry);
  EXPECT_TRUE(r.start) << "the failed request was forgotten";
}

TEST_F(DatabaseSlotTest, AFailedStartKeepsASlotAFlusherOrACommandTookMeanwhile) {
  sc::StartRequest<TestSlot> r = Start(7, 1000);
  ASSERT_EQ(Claim(7, 101), r.slot);  // an earlier registration's flusher came
  sc::StartFailed(lock_, r, 7);
  EXPECT_EQ(Find(7), r.slot);
  EXPECT_EQ(r.slot->claim.worker_pid.load(), 101);
  EXPECT_TRUE(sc::LeaveSlot(lock_, r.slot->claim, 101));
  EXPECT_TRUE(sc::FreeIfIdle(lock_, r.slot->claim, 7, [] { return true; }));

  r = Start(7, 1000);
  ASSERT_TRUE(r.fresh);
  sc::MarkClosing(r.slot->claim);  // DROP DATABASE found the slot
  sc::StartFailed(lock_, r, 7);
  EXPECT_EQ(Find(7), r.slot) << "freed with a command's closing mark on it";
  EXPECT_TRUE(sc::ForgetDropped(lock_, r.slot->claim, 7, [] { return true; }));
  EXPECT_EQ(Find(7), nullptr);
  EXPECT_FALSE(sc::Closing(r.slot->claim));
}

TEST_F(DatabaseSlotTest, OneFlusherClaimsASlotOfItsOwnDatabase) {
  TestSlot* mine = Claim(7, 101);
  ASSERT_NE(mine, nullptr) << "a flusher assigns the slot if need be";
  EXPECT_EQ(mine->claim.db.load(), 7u);
  EXPECT_EQ(mine->claim.worker_pid.load(), 101);
  EXPECT_EQ(sc::FlusherLatch(mine->claim), &latches_[1]);
  EXPECT_EQ(Claim(7, 102), nullptr) << "a second live claimant";
  EXPECT_EQ(mine->claim.worker_pid.load(), 101);
  TestSlot* other = Claim(8, 102);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, mine) << "a flusher claims only its database's slot";
  EXPECT_EQ(Claim(9, 103), nullptr) << "no slot free";
  EXPECT_TRUE(sc::FlusherRuns(mine->claim, 7));
  EXPECT_FALSE(sc::FlusherRuns(mine->claim, 8));
  uint32_t owner = 0;
  EXPECT_EQ(sc::FlusherOf(lock_, other->claim, &owner), 102);
  EXPECT_EQ(owner, 8u);
  EXPECT_EQ(log_.shared, 1);
}

// WithFlusherOf: fn runs under the slots lock shared, with the pid of db's flusher, none for a
// slot of another database, and none once the flusher left (which it does under the lock
// exclusive, so never while fn runs).
TEST_F(DatabaseSlotTest, WithFlusherOfRunsUnderTheLock) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  int calls = 0;
  auto look = [&](uint32_t db, bool* ours) {
    return sc::WithFlusherOf(lock_, s->claim, db, [&](bool o, int32_t pid) {
      calls++;
      EXPECT_GT(log_.held, 0) << "fn runs under the lock shared";
      *ours = o;
      return pid;
    });
  };
  bool ours = false;
  EXPECT_EQ(look(7, &ours), 101);
  EXPECT_TRUE(ours);
  EXPECT_EQ(log_.held, 0) << "released after fn";
  EXPECT_EQ(look(8, &ours), 0) << "the slot is another database's";
  EXPECT_FALSE(ours);
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  EXPECT_EQ(look(7, &ours), 0) << "the flusher left";
  EXPECT_TRUE(ours);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(log_.errors.empty());
}

// The hand-over: the old flusher leaves, a new one claims, the old one's exit leaves again.
TEST_F(DatabaseSlotTest, AHandOverKeepsTheNewClaim) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  EXPECT_FALSE(sc::FlusherRuns(s->claim, 7));
  EXPECT_EQ(sc::FlusherLatch(s->claim), nullptr);
  EXPECT_EQ(Claim(7, 102), s) << "the new flusher takes over";
  EXPECT_FALSE(sc::LeaveSlot(lock_, s->claim, 101)) << "the old one's exit, again";
  EXPECT_EQ(s->claim.worker_pid.load(), 102);
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; }))
      << "freed under the new flusher";
  EXPECT_EQ(Find(7), s);
  EXPECT_EQ(s->resets, 1) << "a slot of its own database is not reset";
}

TEST_F(DatabaseSlotTest, AnIdleSlotIsFreedOnlyWithNothingToKeepIt) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; })) << "its flusher runs";
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return false; })) << "a client, say";
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 8, [] { return true; })) << "another database";
  EXPECT_TRUE(Start(7, 5000).start);
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; }))
      << "a backend asked for a flusher";
  ASSERT_EQ(Claim(7, 102), s);
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 102));
  sc::MarkClosing(s->claim);
  EXPECT_FALSE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; })) << "closing";
  sc::UnmarkClosing(s->claim);
  EXPECT_TRUE(sc::FreeIfIdle(lock_, s->claim, 7, [this] { return MayFreeUnderLock(); }));
  EXPECT_EQ(Find(7), nullptr);
  EXPECT_EQ(s->claim.db.load(), 0u);
  EXPECT_EQ(s->claim.worker_pid.load(), 0);
}

TEST_F(DatabaseSlotTest, AFlusherThatFindsTheExtensionGoneFreesTheSlot) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  sc::MarkClosing(s->claim);
  sc::GiveUpAndFree(lock_, s->claim, 101);
  EXPECT_EQ(s->claim.worker_pid.load(), 0);
  EXPECT_EQ(Find(7), s) << "freed with a closing mark on it";
  sc::UnmarkClosing(s->claim);
  ASSERT_EQ(Claim(7, 102), s);
  sc::GiveUpAndFree(lock_, s->claim, 102);
  EXPECT_EQ(Find(7), nullptr);
  EXPECT_EQ(s->claim.worker_pid.load(), 0);
}

TEST_F(DatabaseSlotTest, ADroppedDatabaseFreesItsSlotAndTakesItsMarkBack) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  sc::MarkClosing(s->claim);
  EXPECT_FALSE(sc::ForgetDropped(lock_, s->claim, 7, [] { return true; })) << "its flusher";
  EXPECT_FALSE(sc::Closing(s->claim)) << "the mark goes back whatever happens";
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  sc::MarkClosing(s->claim);
  EXPECT_FALSE(sc::ForgetDropped(lock_, s->claim, 7, [] { return false; })) << "its attacher";
  sc::MarkClosing(s->claim);
  EXPECT_TRUE(sc::ForgetDropped(lock_, s->claim, 7, [this] { return MayFreeUnderLock(); }));
  EXPECT_EQ(Find(7), nullptr);
  EXPECT_FALSE(sc::Closing(s->claim));
  // Given to another database: reset, no mark.
  TestSlot* next = Claim(8, 102);
  EXPECT_EQ(next, s);
  EXPECT_EQ(next->resets, 2);
}

TEST_F(DatabaseSlotTest, OtherDatabasesFlushersAreAskedToLeave) {
  std::vector<void*> woken;
  auto wake = [&](void* latch) { woken.push_back(latch); };
  EXPECT_FALSE(sc::AskOthersToLeave(lock_, slots_, kSlots, 9, wake)) << "no flusher runs";
  TestSlot* a = Claim(7, 101);
  TestSlot* b = Claim(8, 102);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  EXPECT_TRUE(sc::AskOthersToLeave(lock_, slots_, kSlots, 8, wake));
  ASSERT_EQ(woken.size(), 1u);
  EXPECT_EQ(woken[0], &latches_[1]);
  EXPECT_FALSE(sc::TakeLeaveRequest(b->claim)) << "its own database's flusher stays";
  EXPECT_TRUE(sc::TakeLeaveRequest(a->claim));
  EXPECT_FALSE(sc::TakeLeaveRequest(a->claim)) << "taken once";
  EXPECT_EQ(log_.shared, 2);
  // A slot reassigned forgets a request meant for its former database.
  EXPECT_TRUE(sc::AskOthersToLeave(lock_, slots_, kSlots, 9, wake));
  EXPECT_TRUE(sc::LeaveSlot(lock_, a->claim, 101));
  EXPECT_TRUE(sc::FreeIfIdle(lock_, a->claim, 7, [] { return true; }));
  ASSERT_EQ(Claim(9, 103), a);
  EXPECT_FALSE(sc::TakeLeaveRequest(a->claim));
}

// ---- flush tickets ----

TEST_F(DatabaseSlotTest, AFlushServesTheTicketsHandedOutBeforeItBegan) {
  FlushTickets& t = slots_[0].tickets;
  uint64_t first = sc::RequestTicket(t, mutex_);
  uint64_t second = sc::RequestTicket(t, mutex_);
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(second, 2u);
  EXPECT_TRUE(sc::TicketsPending(t, mutex_));
  sc::FlushBegun b = sc::BeginFlush(t, mutex_);
  EXPECT_EQ(b.ticket, 2u);
  EXPECT_TRUE(b.requested);
  EXPECT_EQ(t.worker_state, sc::kWorkerFlushing);
  uint64_t late = sc::RequestTicket(t, mutex_);  // asked while the flush runs
  int copies = 0;
  auto copy = [&] {
    EXPECT_TRUE(mutex_.held);
    copies++;
  };
  EXPECT_FALSE(sc::CheckTicket(t, mutex_, first, copy).done);
  bool recorded = false;
  sc::EndFlush(t, mutex_, b.ticket, true, [&] {
    EXPECT_TRUE(mutex_.held);
    recorded = true;
  });
  EXPECT_TRUE(recorded);
  EXPECT_EQ(t.worker_state, sc::kWorkerIdle);
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, first, copy).done);
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, second, copy).done);
  sc::TicketOutcome o = sc::CheckTicket(t, mutex_, late, copy);
  EXPECT_FALSE(o.done) << "a flush that began before the request cannot hold its writes";
  EXPECT_FALSE(o.failed);
  EXPECT_EQ(copies, 4);
  EXPECT_TRUE(sc::TicketsPending(t, mutex_));
  sc::EndFlush(t, mutex_, sc::BeginFlush(t, mutex_).ticket, true, [] {});
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, late, [] {}).done);
  EXPECT_FALSE(sc::TicketsPending(t, mutex_));
  EXPECT_FALSE(sc::BeginFlush(t, mutex_).requested) << "the interval's flush, not asked for";
}

TEST_F(DatabaseSlotTest, ATicketForTheWritesAloneAsksForNoRollup) {
  FlushTickets& t = slots_[0].tickets;
  uint64_t writes = sc::RequestTicket(t, mutex_, false);
  sc::FlushBegun b = sc::BeginFlush(t, mutex_);
  EXPECT_TRUE(b.requested);
  EXPECT_FALSE(b.rollup) << "a commit's wait asks for the writes only";
  sc::EndFlush(t, mutex_, b.ticket, true, [] {});
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, writes, [] {}).done);
  (void)sc::RequestTicket(t, mutex_, false);
  (void)sc::RequestTicket(t, mutex_);  // sc_rollup's, among them
  (void)sc::RequestTicket(t, mutex_, false);
  EXPECT_TRUE(sc::BeginFlush(t, mutex_).rollup) << "one rollup among the tickets asks for it";
  sc::EndFlush(t, mutex_, sc::BeginFlush(t, mutex_).ticket, true, [] {});
  sc::AskForTicket(t, mutex_);
  EXPECT_TRUE(sc::BeginFlush(t, mutex_).rollup) << "an asked-for flush is a whole one, as before";
}

TEST_F(DatabaseSlotTest, AFailedFlushFailsItsTicketsUntilOneCommits) {
  FlushTickets& t = slots_[0].tickets;
  uint64_t ticket = sc::RequestTicket(t, mutex_);
  sc::FlushBegun b = sc::BeginFlush(t, mutex_);
  uint64_t next = sc::RequestTicket(t, mutex_);  // asked while the flush runs
  sc::EndFlush(t, mutex_, b.ticket, false, [] {});
  EXPECT_EQ(t.worker_state, sc::kWorkerFailing);
  sc::TicketOutcome o = sc::CheckTicket(t, mutex_, ticket, [] {});
  EXPECT_FALSE(o.done);
  EXPECT_TRUE(o.failed);
  o = sc::CheckTicket(t, mutex_, next, [] {});
  EXPECT_FALSE(o.failed) << "a ticket asked during the failed flush waits for the next one";
  EXPECT_FALSE(o.done);
  sc::EndFlush(t, mutex_, sc::BeginFlush(t, mutex_).ticket, true, [] {});
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, next, [] {}).done);
  o = sc::CheckTicket(t, mutex_, ticket, [] {});
  EXPECT_TRUE(o.done);
  EXPECT_FALSE(o.failed) << "done wins over failed";
}

// Two flushers overlap during a hand-over: the old one's flush may end after the new one's.
TEST_F(DatabaseSlotTest, AnOlderFlushEndingLastLowersNothing) {
  FlushTickets& t = slots_[0].tickets;
  sc::RequestTicket(t, mutex_);
  sc::FlushBegun old_flush = sc::BeginFlush(t, mutex_);
  uint64_t ticket = sc::RequestTicket(t, mutex_);
  sc::FlushBegun new_flush = sc::BeginFlush(t, mutex_);
  sc::EndFlush(t, mutex_, new_flush.ticket, true, [] {});
  sc::EndFlush(t, mutex_, old_flush.ticket, true, [] {});
  EXPECT_EQ(t.done, ticket) << "flush_done went backwards";
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, ticket, [] {}).done);
  EXPECT_FALSE(sc::TicketsPending(t, mutex_)) << "a needless flush";
  // And an older failure after a newer failure keeps the newer one's word.
  uint64_t third = sc::RequestTicket(t, mutex_);
  old_flush = sc::BeginFlush(t, mutex_);
  uint64_t fourth = sc::RequestTicket(t, mutex_);
  new_flush = sc::BeginFlush(t, mutex_);
  sc::EndFlush(t, mutex_, new_flush.ticket, false, [] {});
  sc::EndFlush(t, mutex_, old_flush.ticket, false, [] {});
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, fourth, [] {}).failed);
  EXPECT_TRUE(sc::CheckTicket(t, mutex_, third, [] {}).failed);
}

// A flusher that left a slot finishes its last flush after the slot went to another database:
// its ticket answers none of the new database's.
TEST_F(DatabaseSlotTest, AStaleFlushAnswersNoTicketOfTheNextDatabase) {
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 5; i++) sc::RequestTicket(s->tickets, mutex_);
  sc::FlushBegun stale = sc::BeginFlush(s->tickets, mutex_);
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  EXPECT_TRUE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; }));
  ASSERT_EQ(Claim(8, 102), s);
  uint64_t ticket = sc::RequestTicket(s->tickets, mutex_);
  EXPECT_EQ(ticket, 1u) << "the tickets start anew";
  sc::EndFlush(s->tickets, mutex_, stale.ticket, true, [] {});
  EXPECT_FALSE(sc::CheckTicket(s->tickets, mutex_, ticket, [] {}).done);
}

TEST_F(DatabaseSlotTest, AskingForAFlushAddsNoneWhileOneIsToCome) {
  FlushTickets& t = slots_[0].tickets;
  sc::AskForTicket(t, mutex_);
  sc::AskForTicket(t, mutex_);
  EXPECT_EQ(t.requested, 1u);
  sc::EndFlush(t, mutex_, sc::BeginFlush(t, mutex_).ticket, true, [] {});
  sc::AskForTicket(t, mutex_);
  EXPECT_EQ(t.requested, 2u);
  sc::SetWorkerState(t, mutex_, sc::kWorkerStopping);
  EXPECT_EQ(t.worker_state, sc::kWorkerStopping);
}

// The whole life: free, assigned by a backend's start, claimed, tickets served, left, freed, and
// assigned anew to another database with nothing of the first left in it.
TEST_F(DatabaseSlotTest, TheWholeLifeCycle) {
  sc::StartRequest<TestSlot> r = Start(7, 1000);
  ASSERT_TRUE(r.start);
  TestSlot* s = Claim(7, 101);
  ASSERT_EQ(s, r.slot);
  uint64_t ticket = sc::RequestTicket(s->tickets, mutex_);
  sc::EndFlush(s->tickets, mutex_, sc::BeginFlush(s->tickets, mutex_).ticket, true, [] {});
  EXPECT_TRUE(sc::CheckTicket(s->tickets, mutex_, ticket, [] {}).done);
  EXPECT_TRUE(sc::LeaveSlot(lock_, s->claim, 101));
  EXPECT_TRUE(sc::FreeIfIdle(lock_, s->claim, 7, [] { return true; }));
  EXPECT_EQ(Find(7), nullptr);
  r = Start(8, 2000);
  EXPECT_EQ(r.slot, s);
  EXPECT_TRUE(r.fresh);
  EXPECT_TRUE(r.start) << "the old database's start request is not the new one's";
  EXPECT_EQ(s->tickets.requested, 0u);
  EXPECT_EQ(s->tickets.done, 0u);
  EXPECT_EQ(s->resets, 2);
}

using DatabaseSlotDeathTest = DatabaseSlotTest;

TEST_F(DatabaseSlotDeathTest, BrokenStatesAssert) {
  FlushTickets& t = slots_[0].tickets;
  EXPECT_DEATH(sc::CheckTicket(t, mutex_, 1, [] {}), "SC_ASSERT") << "a ticket not handed out";
  EXPECT_DEATH(sc::UnmarkClosing(slots_[0].claim), "SC_ASSERT") << "a mark not taken";
  EXPECT_DEATH(Claim(7, 0), "SC_ASSERT") << "a flusher with no pid";
  TestSlot* s = Claim(7, 101);
  ASSERT_NE(s, nullptr);
  EXPECT_DEATH(Claim(7, 101), "SC_ASSERT") << "a flusher claims twice";
  s->claim.db.store(0);  // freed under its flusher
  EXPECT_DEATH(Claim(8, 102), "SC_ASSERT");
  s->claim.db.store(7);
  t.done = 3;  // a flush answered a ticket never handed out
  EXPECT_DEATH(sc::RequestTicket(t, mutex_), "SC_ASSERT");
  t.done = 0;
}

}  // namespace
