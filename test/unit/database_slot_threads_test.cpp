// src/core/database_slot.hpp from threads (normally and under ThreadSanitizer): backends of
// three databases share two slots; each backend writes, makes sure its database has a flusher
// (starting one as a thread, or failing to, as RegisterDynamicBackgroundWorker can), asks for a
// flush and waits for it on a condition variable; flushers claim their slot, serve tickets (some
// of their flushes fail), leave when idle or asked to, finish a last flush after leaving while a
// new flusher may already have claimed the slot, and free it. What a user would notice is
// checked: every sc_rollup returns, and only after a committed flush that began after it asked
// (so its write is in the table) or with that flush's failure; a flusher never serves a slot of
// another database, nor beside another live claimant.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "core/database_slot.hpp"

namespace {

constexpr int kSlots = 2;
constexpr int kDatabases = 3;
constexpr int kBackendsPerDb = 2;
constexpr int kRounds = 1000;

struct StdMutex {
  std::mutex m;
  void lock() { m.lock(); }
  void unlock() { m.unlock(); }
};

struct Slot {
  sc::SlotClaim claim;
  StdMutex mutex;
  sc::FlushTickets tickets;
  uint64_t flushed_upto;  // mutex: the writes of the slot's database that a committed flush wrote
  std::mutex cv_mutex;
  std::condition_variable done_cv;  // broadcast after each flush and each leave
};

struct World {
  Slot slots[kSlots];
  std::shared_mutex slots_lock;
  std::atomic<uint64_t> writes[kDatabases + 1] = {};
  std::atomic<int> clients[kDatabases + 1] = {};
  // Flushers of a database that left their slot and have not finished their last flush. The
  // server does not count them: a newer flusher that left idle can free the slot, and another
  // database take it, while an older one still finishes its last flush in it (EndFlush ignores a
  // ticket above those handed out; a lower one would answer the new database's). Here the slot
  // is not freed under one, so that each flush is recorded in its own database's slot.
  std::atomic<int> finishing[kDatabases + 1] = {};
  std::atomic<int32_t> next_pid{100};
  std::atomic<int> wrong_claims{0}, early_answers{0}, served{0}, failed{0}, flushers{0};
  std::mutex threads_mutex;
  std::vector<std::thread> threads;

  World() {
    for (Slot& s : slots) {
      sc::InitSlotClaim(s.claim);
      sc::InitFlushTickets(s.tickets);
      s.flushed_upto = 0;
    }
  }
  static void Reset(Slot& s) {
    s.mutex.lock();
    sc::InitFlushTickets(s.tickets);
    s.flushed_upto = 0;
    s.mutex.unlock();
  }
  static void Wake(Slot& s) {
    std::lock_guard<std::mutex> g(s.cv_mutex);
    s.done_cv.notify_all();
  }
};

// One flush of db in slot s: the writes it holds are those made before it began.
bool FlushOnce(World& w, Slot& s, uint32_t db, uint32_t& r) {
  sc::FlushBegun b = sc::BeginFlush(s.tickets, s.mutex);
  uint64_t holds = w.writes[db].load();
  std::this_thread::yield();  // the flush's transaction
  r = r * 1103515245u + 12345u;
  bool committed = (r >> 16) % 5 != 0;
  sc::EndFlush(s.tickets, s.mutex, b.ticket, committed, [&] {
    if (committed && holds > s.flushed_upto) s.flushed_upto = holds;
  });
  World::Wake(s);
  return committed;
}

void Flusher(World& w, uint32_t db) {
  int32_t pid = w.next_pid.fetch_add(1);
  uint32_t r = uint32_t(pid) * 2654435761u;
  Slot* s = sc::ClaimForFlusher(w.slots_lock, w.slots, kSlots, db, pid, &w, World::Reset);
  if (s == nullptr) return;
  w.flushers++;
  sc::SetWorkerState(s->tickets, s->mutex, sc::kWorkerIdle);
  int idle = 0;
  for (;;) {
    if (s->claim.worker_pid.load() != pid || s->claim.db.load() != db) w.wrong_claims++;
    if (sc::TicketsPending(s->tickets, s->mutex)) {
      FlushOnce(w, *s, db, r);
      idle = 0;
    } else {
      idle++;
    }
    bool asked = sc::TakeLeaveRequest(s->claim);
    // Leaves more often than the server's flusher, which waits for its database's clients to go
    // too (worker.cpp: Idle), so that hand-overs come while backends ask for flushes.
    if ((asked || idle > 20) && !sc::TicketsPending(s->tickets, s->mutex)) {
      // Leave: give the slot up, then the last flush, beside a new flusher perhaps.
      sc::SetWorkerState(s->tickets, s->mutex, sc::kWorkerStopping);
      w.finishing[db]++;
      bool owned = sc::LeaveSlot(w.slots_lock, s->claim, pid);
      World::Wake(*s);
      bool committed = owned && FlushOnce(w, *s, db, r);
      w.finishing[db]--;
      if (owned && !committed) {
        Slot* again =
            sc::ClaimForFlusher(w.slots_lock, w.slots, kSlots, db, pid, &w, World::Reset);
        if (again == s) continue;  // stays, as the server's flusher does
        if (again != nullptr) w.wrong_claims++;
        return;
      }
      sc::FreeIfIdle(w.slots_lock, s->claim, db,
                     [&] { return w.clients[db].load() == 0 && w.finishing[db].load() == 0; });
      return;
    }
    std::this_thread::yield();
  }
}

void Backend(World& w, uint32_t db, int seed) {
  uint32_t r = uint32_t(seed) * 40503u + 1;
  for (int round = 0; round < kRounds; round++) {
    w.clients[db]++;
    uint64_t my_write = w.writes[db].fetch_add(1) + 1;
    // The slot, with a flusher running or started (EnsureFlusher, RequestFlush's loop).
    Slot* slot = nullptr;
    uint64_t ticket = 0;
    for (;;) {
      sc::StartRequest<Slot> req =
          sc::EnsureStart(w.slots_lock, w.slots, kSlots, db, /*now*/ 1, /*retry*/ 1, World::Reset);
      if (req.slot != nullptr && slot != nullptr && req.slot != slot) w.wrong_claims++;
      if (req.slot != nullptr && req.start) {
        r = r * 1103515245u + 12345u;
        // No worker process to be had, now and then; not for a slot this request assigned, whose
        // give-back can free it under another backend of the database that found it meanwhile
        // (the server has that race too: TryEnsureFlusher, shared/flusher_slots.cpp).
        if (!req.fresh && (r >> 16) % 6 == 0) {
          sc::StartFailed(w.slots_lock, req, db);
        } else {
          std::lock_guard<std::mutex> g(w.threads_mutex);
          w.threads.emplace_back(Flusher, std::ref(w), db);
        }
      }
      if (req.slot == nullptr) {
        sc::AskOthersToLeave(w.slots_lock, w.slots, kSlots, db, [](void*) {});
        std::this_thread::yield();
        continue;
      }
      slot = req.slot;
      if (ticket == 0) ticket = sc::RequestTicket(slot->tickets, slot->mutex);
      uint64_t flushed = 0;
      sc::TicketOutcome o = sc::CheckTicket(slot->tickets, slot->mutex, ticket,
                                            [&] { flushed = slot->flushed_upto; });
      if (o.done) {
        if (flushed < my_write) w.early_answers++;
        w.served++;
        break;
      }
      if (o.failed) {
        w.failed++;
        break;
      }
      std::unique_lock<std::mutex> g(slot->cv_mutex);
      slot->done_cv.wait_for(g, std::chrono::milliseconds(1));
    }
    w.clients[db]--;
  }
}

TEST(DatabaseSlotThreads, EveryFlushAskedForIsAnsweredAfterItsWrite) {
  World w;
  std::vector<std::thread> backends;
  for (uint32_t db = 1; db <= kDatabases; db++)
    for (int b = 0; b < kBackendsPerDb; b++) backends.emplace_back(Backend, std::ref(w), db, b);
  for (auto& t : backends) t.join();
  // Flushers leave once idle; join every one started (they may start more: none, with no
  // backend left).
  for (;;) {
    std::vector<std::thread> batch;
    {
      std::lock_guard<std::mutex> g(w.threads_mutex);
      batch.swap(w.threads);
    }
    if (batch.empty()) break;
    for (auto& t : batch) t.join();
  }
  EXPECT_EQ(w.served.load() + w.failed.load(), kDatabases * kBackendsPerDb * kRounds)
      << "a request not answered";
  EXPECT_EQ(w.early_answers.load(), 0) << "answered before a flush that holds its write";
  EXPECT_EQ(w.wrong_claims.load(), 0);
  EXPECT_GT(w.served.load(), 0);
  EXPECT_GT(w.flushers.load(), kDatabases) << "flushers came and went";
  // A slot is freed by the flusher that leaves it, unless a client of its database is connected
  // (the server's ReleaseSlot too): here, where flushers leave beside clients, a slot can stay
  // assigned, with no flusher and nothing asked of it, until its database needs a flusher again.
  for (Slot& s : w.slots) {
    EXPECT_EQ(s.claim.worker_pid.load(), 0) << "every flusher left";
    EXPECT_FALSE(sc::TicketsPending(s.tickets, s.mutex)) << "nothing asked of a slot left behind";
  }
}

}  // namespace
