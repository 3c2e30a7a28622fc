// database_slot.hpp: the life of a database's slot in shared memory, and of the flusher that
// serves it: a free slot is assigned to a database, a flusher claims it, serves flush tickets,
// leaves when idle (or when asked, or at shutdown) while a new flusher may already take over, and
// the slot is freed when nothing of its database needs it.
//
// Pure C++ (no PostgreSQL header). Each step is a template over the lock policies:
//   SlotsLock: lock() / unlock() / lock_shared() / unlock_shared() - in the server the LWLock
//     slots_lock (shared/shmem.hpp: SlotsLWLock), in the tests a std::shared_mutex. It guards
//     SlotClaim's db, worker_pid, worker_latch and start_requested: each is written only under it
//     held exclusively. db, worker_pid and worker_latch are atomics besides, read without the lock
//     where a stale answer is safe (FindSlot, FlusherRuns, FlusherLatch); start_requested is
//     read only under it.
//   Mutex: lock() / unlock() - in the server the slot's spinlock `mutex` (sc::SpinMutex), in
//     the tests a std::mutex. It guards FlushTickets (and, in the glue, the slot's statistics,
//     which the steps let the caller read or write under it through a callback).
//   closing and leave_requested are atomics changed without a lock.
//
// The life cycle:
//   - Assignment (under the slots lock): the slot of db, or else the first free one (db 0), which
//     is reset (the caller's reset: dirty ring, fold epochs, statistics; here the claim and the
//     tickets) before it names db with a release store, so that a reader that finds it by db
//     (FindSlot, without the lock) sees it reset.
//   - Start: a backend that needs a flusher asks for one (EnsureStart) when the slot has none,
//     is not closing, and none was asked for in the last retry_us; it records start_requested.
//     If no worker could be registered, StartFailed forgets the request and frees a slot the
//     attempt itself assigned.
//   - Claim (ClaimForFlusher): a flusher claims its database's slot (assigned now if need be)
//     only if no flusher claims it: at most one live claimant, worker_pid.
//   - Leave (LeaveSlot): the claimant gives the claim up (worker_pid 0, start_requested 0); it
//     may still finish a last flush while a new flusher claims the slot: two flushers overlap
//     during a hand-over, so every ticket step tolerates a flush that ends after a newer one.
//   - Free: only with no flusher, no start asked for and no closing mark (FreeIfIdle, by the
//     flusher that left; GiveUpAndFree, by one that found the extension gone), or by the command
//     that dropped the database, taking its own closing mark back in the same step
//     (ForgetDropped). A freed slot has db 0 and no claimant.
//   - closing (MarkClosing / UnmarkClosing): how many commands on the whole database are
//     running; while nonzero no flusher starts, and one that runs leaves.
//   - leave_requested: set by a backend of another database that needs a slot or a worker
//     (AskOthersToLeave); the flusher takes it (TakeLeaveRequest) and leaves if idle.
//   - Flush tickets (under the Mutex): a backend takes ticket requested + 1 (RequestTicket, or
//     AskForTicket if none is outstanding) and waits until done or failed reaches it
//     (CheckTicket). A flush takes the ticket `requested` when it begins (BeginFlush), so every
//     ticket handed out before it began is served by it, and on its end (EndFlush) raises done
//     (committed) or failed to that ticket: never lowers them, for an older flush may end after
//     a newer one. A ticket asks for the whole of a flush (`rollup`: sc_rollup's, which runs the
//     retention pass before it answers), or only for its writes (a transactional rate limiter's
//     commit: transactions/throttles.hpp).
//
// Nothing here allocates, throws or fails: every function is noexcept. SC_ASSERT checks each
// state before it changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"

namespace sc {

// What a slot's flusher is doing, for slotted_counter.stats (functions/stats.cpp).
enum WorkerState : uint32_t { kWorkerNone = 0, kWorkerStarting, kWorkerIdle, kWorkerFlushing,
                              kWorkerServing, kWorkerStopping, kWorkerFailing };

// The slot's assignment and its flusher (the slots lock; see the top).
struct SlotClaim {
  std::atomic<uint32_t> db;          // 0 when the slot is free
  std::atomic<int32_t> worker_pid;   // 0 when no flusher claims it
  std::atomic<void*> worker_latch;   // the claimant's latch, to wake it
  int64_t start_requested;           // when a backend last asked for a flusher (us); 0: none
  std::atomic<uint32_t> closing;     // commands on the whole database running
  std::atomic<uint32_t> leave_requested;
};

// The flush tickets of sc_rollup (the Mutex).
struct FlushTickets {
  uint32_t worker_state;             // WorkerState
  uint64_t requested;                // tickets handed out
  uint64_t done;                     // the highest ticket served by a committed flush
  uint64_t failed;                   // the highest ticket whose flush failed
  uint64_t rollup;                   // the highest ticket that asked for the whole of a flush
};
static_assert(std::is_standard_layout<SlotClaim>::value &&
                  std::is_standard_layout<FlushTickets>::value,
              "shared structs have a standard layout");
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free &&
                  std::atomic<void*>::is_always_lock_free,
              "the atomics of shared memory are lock-free");

// A slot when shared memory is made: free.
inline void InitSlotClaim(SlotClaim& c) noexcept {
  c.db.store(0, std::memory_order_relaxed);
  c.worker_pid.store(0, std::memory_order_relaxed);
  c.worker_latch.store(nullptr, std::memory_order_relaxed);
  c.start_requested = 0;
  c.closing.store(0, std::memory_order_relaxed);
  c.leave_requested.store(0, std::memory_order_relaxed);
}

inline void InitFlushTickets(FlushTickets& t) noexcept {
  t.worker_state = kWorkerNone;
  t.requested = t.done = t.failed = t.rollup = 0;
}

// ---- finding and assigning ---------------------------------------------------------------------
// Slot: any type with a SlotClaim `claim` (the server's DatabaseSlot, the tests' own).

// The slot of db, read without the lock; nullptr if it has none. A slot changes hands only after
// its database stopped using it, so the answer is stale only for a database that has no use for it.
template <typename Slot>
Slot* FindSlot(Slot* slots, int n, uint32_t db) noexcept {
  for (int i = 0; i < n; i++)
    if (slots[i].claim.db.load(std::memory_order_acquire) == db) return &slots[i];
  return nullptr;
}

// The slot of db, or the first free one now assigned to db (reset(slot) first, then named);
// nullptr if none is free. *fresh: it was assigned now. The slots lock held exclusively.
template <typename Slot, typename Reset>
Slot* SlotForLocked(Slot* slots, int n, uint32_t db, Reset&& reset, bool* fresh) noexcept {
  SC_ASSERT(db != 0);
  Slot* free_slot = nullptr;
  *fresh = false;
  for (int i = 0; i < n; i++) {
    SlotClaim& c = slots[i].claim;
    uint32_t owner = c.db.load(std::memory_order_relaxed);
    if (owner == db) return &slots[i];
    if (owner == 0 && free_slot == nullptr) free_slot = &slots[i];
  }
  if (free_slot == nullptr) return nullptr;
  SlotClaim& c = free_slot->claim;
  SC_ASSERT(c.worker_pid.load(std::memory_order_relaxed) == 0);  // freed with no flusher
  c.worker_latch.store(nullptr, std::memory_order_relaxed);
  c.start_requested = 0;
  c.leave_requested.store(0, std::memory_order_relaxed);
  reset(*free_slot);
  c.db.store(db, std::memory_order_release);
  *fresh = true;
  return free_slot;
}

// Frees a slot. The slots lock held exclusively; no flusher claims it.
inline void FreeLocked(SlotClaim& c) noexcept {
  SC_ASSERT(c.db.load(std::memory_order_relaxed) != 0);
  SC_ASSERT(c.worker_pid.load(std::memory_order_relaxed) == 0);
  c.start_requested = 0;
  c.db.store(0, std::memory_order_release);
}

// ---- starting a flusher ------------------------------------------------------------------------

template <typename Slot>
struct StartRequest {
  Slot* slot;   // db's slot; nullptr if none is free
  bool fresh;   // assigned by this request
  bool start;   // the caller registers a flusher now
};

// A backend of db that needs its flusher: the slot (assigned now if need be) and whether to
// register a flusher (none claims the slot, it is not closing, and none was asked for in the
// last retry_us before now).
template <typename SlotsLock, typename Slot, typename Reset>
StartRequest<Slot> EnsureStart(SlotsLock& lock, Slot* slots, int n, uint32_t db, int64_t now,
                               int64_t retry_us, Reset&& reset) noexcept {
  lock.lock();
  StartRequest<Slot> r{nullptr, false, false};
  r.slot = SlotForLocked(slots, n, db, reset, &r.fresh);
  if (r.slot != nullptr) {
    SlotClaim& c = r.slot->claim;
    if (c.worker_pid.load(std::memory_order_relaxed) == 0 &&
        c.closing.load(std::memory_order_seq_cst) == 0) {
      r.start = c.start_requested == 0 || now - c.start_requested >= retry_us;
      if (r.start) c.start_requested = now;
    }
  }
  lock.unlock();
  return r;
}

// No worker could be registered for a start EnsureStart asked for: the request is forgotten, and
// a slot that request assigned is freed (nothing was written to it yet) unless a flusher claimed
// it or a command marked it closing meanwhile.
template <typename SlotsLock, typename Slot>
void StartFailed(SlotsLock& lock, const StartRequest<Slot>& r, uint32_t db) noexcept {
  SC_ASSERT(r.slot != nullptr && r.start);
  lock.lock();
  SlotClaim& c = r.slot->claim;
  c.start_requested = 0;
  if (r.fresh && c.db.load(std::memory_order_relaxed) == db &&
      c.worker_pid.load(std::memory_order_relaxed) == 0 &&
      c.closing.load(std::memory_order_seq_cst) == 0)
    FreeLocked(c);
  lock.unlock();
}

// ---- the flusher's claim -----------------------------------------------------------------------

// The flusher of db (process pid, latch) claims db's slot, assigned now if need be: nullptr if
// another flusher claims it or no slot is free.
template <typename SlotsLock, typename Slot, typename Reset>
Slot* ClaimForFlusher(SlotsLock& lock, Slot* slots, int n, uint32_t db, int32_t pid, void* latch,
                      Reset&& reset) noexcept {
  SC_ASSERT(pid != 0);
  lock.lock();
  bool fresh;
  Slot* slot = SlotForLocked(slots, n, db, reset, &fresh);
  if (slot != nullptr) {
    SlotClaim& c = slot->claim;
    if (c.worker_pid.load(std::memory_order_relaxed) == 0) {
      SC_ASSERT(c.db.load(std::memory_order_relaxed) == db);
      c.worker_pid.store(pid, std::memory_order_seq_cst);
      c.worker_latch.store(latch, std::memory_order_relaxed);
    } else {
      SC_ASSERT(c.worker_pid.load(std::memory_order_relaxed) != pid);  // claims once
      slot = nullptr;
    }
  }
  lock.unlock();
  return slot;
}

// The flusher pid gives up its claim, if it still holds it (a no-op the second time): true if it
// did. New backends then start a new flusher, which may run beside this one's last flush.
template <typename SlotsLock>
bool LeaveSlot(SlotsLock& lock, SlotClaim& c, int32_t pid) noexcept {
  lock.lock();
  bool owned = c.worker_pid.load(std::memory_order_relaxed) == pid;
  if (owned) {
    SC_ASSERT(c.db.load(std::memory_order_relaxed) != 0);  // a claimed slot is assigned
    c.worker_pid.store(0, std::memory_order_seq_cst);
    c.worker_latch.store(nullptr, std::memory_order_relaxed);
    c.start_requested = 0;
  }
  lock.unlock();
  return owned;
}

// After the flusher of db left for being idle: frees the slot unless a flusher claims it again,
// a start was asked for, a command marks it closing, or may_free() (called under the lock: no
// client, nothing of db left in the buffer, no attacher) says no. True if freed.
template <typename SlotsLock, typename MayFree>
bool FreeIfIdle(SlotsLock& lock, SlotClaim& c, uint32_t db, MayFree&& may_free) noexcept {
  lock.lock();
  bool freed = c.db.load(std::memory_order_relaxed) == db &&
               c.worker_pid.load(std::memory_order_relaxed) == 0 && c.start_requested == 0 &&
               c.closing.load(std::memory_order_seq_cst) == 0 && may_free();
  if (freed) FreeLocked(c);
  lock.unlock();
  return freed;
}

// The flusher pid found the extension gone from its database: gives up its claim and frees the
// slot, unless a command marks it closing (that command's end, or the next flusher, frees it).
template <typename SlotsLock>
void GiveUpAndFree(SlotsLock& lock, SlotClaim& c, int32_t pid) noexcept {
  lock.lock();
  if (c.worker_pid.load(std::memory_order_relaxed) == pid) {
    c.worker_pid.store(0, std::memory_order_seq_cst);
    c.worker_latch.store(nullptr, std::memory_order_relaxed);
  }
  if (c.worker_pid.load(std::memory_order_relaxed) == 0 &&
      c.closing.load(std::memory_order_seq_cst) == 0 && c.db.load(std::memory_order_relaxed) != 0)
    FreeLocked(c);
  lock.unlock();
}

// ---- commands on the whole database ------------------------------------------------------------

inline void MarkClosing(SlotClaim& c) noexcept {
  c.closing.fetch_add(1, std::memory_order_seq_cst);
}

inline void UnmarkClosing(SlotClaim& c) noexcept {
  uint32_t before = c.closing.fetch_sub(1, std::memory_order_seq_cst);
  SC_ASSERT(before > 0);
  (void)before;
}

inline bool Closing(const SlotClaim& c) noexcept {
  return c.closing.load(std::memory_order_seq_cst) > 0;
}

// After DROP DATABASE db (whose command marked the slot closing): takes that mark back and frees
// the slot if it is still db's and neither a flusher nor may_free() (no attacher) keeps it, in
// one step, so that the slot is never given to another database with the mark still on it.
template <typename SlotsLock, typename MayFree>
bool ForgetDropped(SlotsLock& lock, SlotClaim& c, uint32_t db, MayFree&& may_free) noexcept {
  lock.lock();
  bool freed = c.db.load(std::memory_order_relaxed) == db &&
               c.worker_pid.load(std::memory_order_relaxed) == 0 && may_free();
  if (freed) FreeLocked(c);
  UnmarkClosing(c);
  lock.unlock();
  return freed;
}

// ---- reading who runs, asking to leave ---------------------------------------------------------

// The flusher of db in this slot (0: none), under the slots lock shared. *owner: the slot's db.
template <typename SlotsLock>
int32_t FlusherOf(SlotsLock& lock, const SlotClaim& c, uint32_t* owner) noexcept {
  lock.lock_shared();
  *owner = c.db.load(std::memory_order_relaxed);
  int32_t pid = c.worker_pid.load(std::memory_order_relaxed);
  lock.unlock_shared();
  return pid;
}

// Under the slots lock shared: calls fn(ours, pid), where ours says whether the slot is db's and
// pid is its flusher's (0: none, or the slot is another database's), and returns what fn
// returns. A flusher gives its claim up under the lock exclusive before it exits (LeaveSlot,
// GiveUpAndFree), so while fn runs the pid names that live process: a signal sent from fn cannot
// reach another process that reused the pid, as one sent after the lock went could. The same
// holds for any pid its owner clears under the lock exclusive (the attacher's: shmem.hpp).
template <typename SlotsLock, typename Fn>
auto WithFlusherOf(SlotsLock& lock, const SlotClaim& c, uint32_t db, Fn&& fn) noexcept {
  lock.lock_shared();
  bool ours = c.db.load(std::memory_order_relaxed) == db;
  int32_t pid = ours ? c.worker_pid.load(std::memory_order_relaxed) : 0;
  auto result = fn(ours, pid);
  lock.unlock_shared();
  return result;
}

// Without a lock: whether a flusher claims the slot and the slot is still db's. A slot is
// reassigned only after its flusher left, so a live claimant of a slot that names db is db's.
inline bool FlusherRuns(const SlotClaim& c, uint32_t db) noexcept {
  return c.worker_pid.load(std::memory_order_seq_cst) != 0 &&
         c.db.load(std::memory_order_acquire) == db;
}

// Without a lock: the latch of the slot's flusher, if one claims it.
inline void* FlusherLatch(const SlotClaim& c) noexcept {
  return c.worker_latch.load(std::memory_order_relaxed);
}

// A backend of db that found every slot or worker taken asks the flushers of other databases to
// leave if idle, waking each (wake(latch), under the lock shared). False if there is none.
template <typename SlotsLock, typename Slot, typename Wake>
bool AskOthersToLeave(SlotsLock& lock, Slot* slots, int n, uint32_t db, Wake&& wake) noexcept {
  bool asked = false;
  lock.lock_shared();
  for (int i = 0; i < n; i++) {
    SlotClaim& c = slots[i].claim;
    if (c.db.load(std::memory_order_relaxed) == db ||
        c.worker_pid.load(std::memory_order_relaxed) == 0)
      continue;
    c.leave_requested.store(1, std::memory_order_seq_cst);
    if (void* latch = c.worker_latch.load(std::memory_order_relaxed)) wake(latch);
    asked = true;
  }
  lock.unlock_shared();
  return asked;
}

// The flusher: whether it was asked to leave since it last looked.
inline bool TakeLeaveRequest(SlotClaim& c) noexcept {
  return c.leave_requested.exchange(0, std::memory_order_seq_cst) != 0;
}

// ---- flush tickets -----------------------------------------------------------------------------

template <typename Mutex>
void SetWorkerState(FlushTickets& t, Mutex& mutex, WorkerState state) noexcept {
  mutex.lock();
  t.worker_state = state;
  mutex.unlock();
}

// A backend's ticket for a flush that begins after this call; rollup: for the whole of it, else
// for its writes only.
template <typename Mutex>
uint64_t RequestTicket(FlushTickets& t, Mutex& mutex, bool rollup = true) noexcept {
  mutex.lock();
  SC_ASSERT(t.done <= t.requested && t.failed <= t.requested);
  uint64_t ticket = ++t.requested;
  if (rollup) t.rollup = ticket;
  mutex.unlock();
  return ticket;
}

// A flush as soon as the flusher can, unless one asked for is still to come.
template <typename Mutex>
void AskForTicket(FlushTickets& t, Mutex& mutex) noexcept {
  mutex.lock();
  SC_ASSERT(t.done <= t.requested);
  if (t.requested <= t.done) t.rollup = ++t.requested;
  mutex.unlock();
}

struct TicketOutcome {
  bool done;    // a committed flush served it
  bool failed;  // not done, and the flush that would have failed
};

// Whether ticket is answered; copy() runs under the mutex (the glue copies the last flush's rows
// or error with the answer).
template <typename Mutex, typename Copy>
TicketOutcome CheckTicket(FlushTickets& t, Mutex& mutex, uint64_t ticket, Copy&& copy) noexcept {
  mutex.lock();
  SC_ASSERT(ticket != 0 && ticket <= t.requested);  // handed out
  TicketOutcome o;
  o.done = t.done >= ticket;
  o.failed = !o.done && t.failed >= ticket;
  copy();
  mutex.unlock();
  return o;
}

// Whether a ticket is handed out that no committed flush served.
template <typename Mutex>
bool TicketsPending(FlushTickets& t, Mutex& mutex) noexcept {
  mutex.lock();
  bool pending = t.requested > t.done;
  mutex.unlock();
  return pending;
}

struct FlushBegun {
  uint64_t ticket;  // every ticket up to this one is served by this flush
  bool requested;   // one of them is not served yet
  bool rollup;      // one of those asked for the whole flush
};

// A flush begins: it serves every ticket handed out so far.
template <typename Mutex>
FlushBegun BeginFlush(FlushTickets& t, Mutex& mutex) noexcept {
  mutex.lock();
  SC_ASSERT(t.done <= t.requested);
  FlushBegun b{t.requested, t.requested > t.done, t.rollup > t.done};
  t.worker_state = kWorkerFlushing;
  mutex.unlock();
  return b;
}

// The flush that took `ticket` ended: committed, every ticket up to it is done; else they failed
// (unless a newer flush committed them). record() runs under the mutex (the glue's statistics).
template <typename Mutex, typename Record>
void EndFlush(FlushTickets& t, Mutex& mutex, uint64_t ticket, bool committed,
              Record&& record) noexcept {
  mutex.lock();
  uint64_t done = t.done;
  t.worker_state = committed ? kWorkerIdle : kWorkerFailing;
  // A ticket above those handed out: the slot changed hands while a flusher that had left it
  // finished its last flush (the hand-over): it answers none of the new database's tickets.
  if (ticket > t.requested) ticket = 0;
  if (committed) {
    if (ticket > t.done) t.done = ticket;
  } else {
    if (ticket > t.failed) t.failed = ticket;
  }
  SC_ASSERT(t.done >= done);  // never goes backwards
  SC_ASSERT(t.done <= t.requested && t.failed <= t.requested);
  record();
  mutex.unlock();
}

}  // namespace sc
