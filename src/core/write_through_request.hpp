// write_through_request.hpp: the handshake of a write-through request between the backend that
// asks (an increment the buffer has no room for) and the flusher of its database, who adds the
// delta to slotted_counter.key_values in its own transaction and answers.
//
// Pure C++ (no PostgreSQL header). The server runs these steps over its shared requests
// (shared/shmem.hpp: WriteThroughRequest, one per backend, each with a spinlock) and the glue in
// shared/write_through.cpp, workers/write_through.cpp and buffer/; the unit tests over std::mutex
// (test/unit/). Nothing here allocates, throws, sleeps or fails: the caller waits, reports and
// writes.
//
// The lock rule (said here once): every field of a request (ThroughRequest) is read and written
// under that request's own mutex (a spinlock, a few instructions, never held with another), with
// two exceptions: while a request is TAKEN its flusher reads key, delta, nbatch and batch without
// it (only Publish writes them, and only an EMPTY request is published); and `open` (OpenCounts:
// the requests PENDING or TAKEN by database, in cells of atomics, so that a loader or a flusher of
// a database with none open skips the scan whatever other databases write through) is changed
// by the step that enters or leaves those states under the request's mutex, in the cell of the
// request's database, so that a look at every mutex at once sees each cell equal to the requests
// open of its databases.
//
// The states, and who moves a request between them (each step asserts the state it expects):
//
//   EMPTY --Publish (the requester)--> PENDING --Take (the flusher)--> TAKEN
//   TAKEN --Answer (the flusher, after its transaction ended)--> DONE or FAILED
//   DONE, FAILED (and EMPTY) --Collect (the requester, who reads the answer)--> EMPTY
//   PENDING --Withdraw (the requester: cancelled, or no flusher took it in time; or a backend
//             that reuses the slot of a process of another database)--> EMPTY
//   PENDING --Fail (a drop of its counter or database)--> FAILED
//   TAKEN --GiveBack (the flusher, whose transaction failed or asks to retry; or the requester,
//           when the flusher that took it is gone)--> PENDING
//   TAKEN: Cancel (the requester, cancelled) asks the flusher to give a batch up; the flusher
//          still answers (FAILED, or DONE if it had finished).
//
// A request for one key is published only under the key's partition lock EXCLUSIVE, having
// checked the key is not resident (PublishForKey); a loader checks, under the same exclusive lock,
// that no request for its key is open (OpenFor). So a stored value is never read into the buffer
// while a write-through of the same key is changing it. A batch's keys are covered by the
// partition holds instead (core/through_holds.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"
#include "core/protocol.hpp"

namespace sc {

enum RequestState : uint32_t { kRequestEmpty = 0, kRequestPending, kRequestTaken, kRequestDone,
                               kRequestFailed };

// One backend's request, in shared memory beside its mutex.
struct ThroughRequest {
  uint32_t state;       // RequestState
  CounterKey key;       // a batch: key.counter and key.bucket only
  int64_t delta;        // a single key's delta
  Write write;          // the write's stamp and its counter's cutoff (counter_table.hpp)
  int64_t result;       // the new value, when DONE
  int32_t sqlerrcode;   // why, when FAILED (the caller's SQLSTATE code)
  // A batch (nbatch > 0): its keys of one counter and bucket, in the dynamic shared memory
  // segment `batch` (a dsm_handle; 0 for a single key), written in one transaction.
  int32_t nbatch;
  uint32_t batch;
  int32_t server_pid;   // the flusher that took it (TAKEN)
  // A batch's requester was cancelled after a flusher took it: the flusher checks this before
  // each chunk it writes and, if set, rolls the batch back and answers FAILED.
  bool cancel;
  // Not an increment: the batch's segment holds texts of key.counter that need an id
  // (definitions/text_keys.hpp), which the flusher gives them in slotted_counter.keys.
  bool intern;
  // An intern request for a counter its requester's transaction created: that (sub)transaction
  // (a FullTransactionId), whose abort leaves ids of a counter that never was; else 0.
  uint64_t creator;
};
static_assert(std::is_standard_layout<ThroughRequest>::value &&
                  std::is_trivially_copyable<ThroughRequest>::value,
              "shared structs have a standard layout");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the open count is lock-free");

struct RequestAnswer {
  RequestState state;  // kRequestDone or kRequestFailed (or kRequestEmpty: nothing was asked)
  int64_t result;      // the new value of a single key, when done
  int sqlerrcode;      // why, when failed
};

// What a requester's look at its request found (WriteThroughs::Look).
enum class AwaitStep {
  kOpen,       // still PENDING or TAKEN: wait on
  kAnswered,   // collected: the answer is in Look::answer (kRequestEmpty if nothing was asked)
  kWithdrawn,  // it was PENDING and the requester withdrew it: nobody will write it
};
struct Look {
  AwaitStep step;
  RequestAnswer answer;  // when kAnswered
  RequestState state;    // what the look found
  int server;            // the flusher that had taken it (TAKEN), else 0
};

// The requests PENDING or TAKEN, database db's in cell db % kOpenCells (databases whose oids fall
// in one cell share it, and scan for each other's requests).
constexpr uint32_t kOpenCells = 16;
struct OpenCounts {
  std::atomic<uint32_t> cells[kOpenCells];

  std::atomic<uint32_t>& Of(uint32_t db) noexcept { return cells[db % kOpenCells]; }
  uint32_t Total() const noexcept {
    uint32_t n = 0;
    for (const std::atomic<uint32_t>& c : cells) n += c.load();
    return n;
  }
};
static_assert(std::is_standard_layout<OpenCounts>::value, "shared structs have a standard layout");

// The steps, under the request's mutex. Each asserts the state it expects; the ones that enter
// or leave PENDING/TAKEN move `open`, the cell of the request's database, with them.
namespace request_step {

inline void EnterOpen(std::atomic<uint32_t>& open) noexcept { open.fetch_add(1); }
inline void LeaveOpen(std::atomic<uint32_t>& open) noexcept {
  uint32_t before = open.fetch_sub(1);
  SC_ASSERT(before > 0);
}

inline void Publish(ThroughRequest& r, std::atomic<uint32_t>& open, const CounterKey& k,
                    int64_t delta, int32_t nbatch, uint32_t batch, Write w = Write{},
                    bool intern = false, uint64_t creator = 0) noexcept {
  SC_ASSERT(r.state == kRequestEmpty);
  SC_ASSERT(nbatch >= 0 && (!intern || nbatch > 0));
  r.key = k;
  r.delta = delta;
  r.write = w;
  r.result = 0;
  r.sqlerrcode = 0;
  r.nbatch = nbatch;
  r.batch = batch;
  r.server_pid = 0;
  r.cancel = false;
  r.intern = intern;
  r.creator = creator;
  r.state = kRequestPending;
  EnterOpen(open);
}

inline void Withdraw(ThroughRequest& r, std::atomic<uint32_t>& open) noexcept {
  SC_ASSERT(r.state == kRequestPending);
  r.state = kRequestEmpty;
  r.nbatch = 0;
  LeaveOpen(open);
}

inline void Cancel(ThroughRequest& r) noexcept {
  SC_ASSERT(r.state == kRequestTaken);
  r.cancel = true;
}

inline RequestAnswer Collect(ThroughRequest& r) noexcept {
  SC_ASSERT(r.state == kRequestEmpty || r.state == kRequestDone || r.state == kRequestFailed);
  RequestAnswer answer{RequestState(r.state), r.result, r.sqlerrcode};
  r.state = kRequestEmpty;
  r.nbatch = 0;
  return answer;
}

inline void Take(ThroughRequest& r, int server_pid) noexcept {
  SC_ASSERT(r.state == kRequestPending);
  r.state = kRequestTaken;
  r.server_pid = server_pid;
}

inline void GiveBack(ThroughRequest& r) noexcept {
  SC_ASSERT(r.state == kRequestTaken);
  r.state = kRequestPending;
}

inline void Answer(ThroughRequest& r, std::atomic<uint32_t>& open, RequestState outcome,
                   int64_t result, int sqlerrcode) noexcept {
  SC_ASSERT(r.state == kRequestTaken);
  SC_ASSERT(outcome == kRequestDone || outcome == kRequestFailed);
  r.state = outcome;
  r.result = result;
  r.sqlerrcode = sqlerrcode;
  LeaveOpen(open);
}

inline void Fail(ThroughRequest& r, std::atomic<uint32_t>& open, int sqlerrcode) noexcept {
  SC_ASSERT(r.state == kRequestPending);
  r.state = kRequestFailed;
  r.sqlerrcode = sqlerrcode;
  LeaveOpen(open);
}

}  // namespace request_step

// The requests of every backend and their open count. Requests: a view of them,
//   struct Requests {
//     int size();
//     Mutex mutex(int i);           // lock()/unlock(): request i's mutex (a spinlock)
//     ThroughRequest& at(int i);
//   };
// in the server over SharedState::requests (shared/shmem.hpp), in the tests over std::mutex.
template <typename Requests>
class WriteThroughs {
 public:
  WriteThroughs(Requests requests, OpenCounts* open) noexcept
      : requests_(requests), open_(*open) {}

  ThroughRequest& at(int i) noexcept { return requests_.at(i); }
  // The requests open of database db (and of the databases that share its cell).
  std::atomic<uint32_t>& open(uint32_t db) noexcept { return open_.Of(db); }

  // ---- the requester ----------------------------------------------------------------------------

  // Publishes request i (EMPTY, the caller's) for the single key k, under k's partition lock
  // EXCLUSIVE, unless k is resident: then false, nothing published (add to the buffer instead).
  template <typename Locks>
  bool PublishForKey(Protocol<Locks>& table, int i, const CounterKey& k, uint32_t hash,
                     int64_t delta, Write w = Write{}) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    table.locks().Exclusive(p);
    bool resident = table.table().Find(k, hash) != kNil;
    // A key resident without its sum entry holds nothing beyond its row (a write needs the sum
    // entry, for which the caller found no room): it leaves, and is written through.
    if (resident && table.SumOf(k, p) == nullptr && table.DropCleanLocked(k, hash))
      resident = false;
    if (!resident) Publish(i, k, delta, 0, 0, w, false);
    table.locks().Release(p);
    return !resident;
  }

  // Publishes request i (EMPTY, the caller's): a batch of nbatch keys of k.counter and k.bucket
  // in the segment `batch`, whose partitions the caller holds (core/through_holds.hpp).
  void PublishBatch(int i, const CounterKey& k, int32_t nbatch, uint32_t batch,
                    Write w = Write{}) noexcept {
    SC_ASSERT(nbatch > 0);
    Publish(i, k, 0, nbatch, batch, w, false);
  }

  // Publishes request i (EMPTY, the caller's): nbatch texts of counter `counter` of database db,
  // in the segment `batch`, to be given ids; creator: the transaction that created the counter,
  // if it is the requester's (0 otherwise). No partition is involved: an id is not a value.
  void PublishIntern(int i, uint32_t db, int32_t counter, int32_t nbatch, uint32_t batch,
                     uint64_t creator) noexcept {
    SC_ASSERT(nbatch > 0);
    Publish(i, CounterKey{db, counter, 0, kNoBucket}, 0, nbatch, batch, Write{}, true, creator);
  }

  // The requester's look at request i while it waits: an answer is collected (the request is
  // EMPTY again); an open one is withdrawn if still PENDING and the requester was cancelled or
  // waited long enough (withdraw_due), or, if TAKEN and the requester was cancelled, the flusher
  // is asked to give it up (it still answers).
  Look LookAt(int i, bool cancelled, bool withdraw_due) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    ThroughRequest& r = requests_.at(i);
    Look look{AwaitStep::kOpen, RequestAnswer{kRequestEmpty, 0, 0}, RequestState(r.state), 0};
    switch (r.state) {
      case kRequestPending:
        if (cancelled || withdraw_due) {
          request_step::Withdraw(r, open_.Of(r.key.db));
          look.step = AwaitStep::kWithdrawn;
        }
        break;
      case kRequestTaken:
        look.server = r.server_pid;
        if (cancelled) request_step::Cancel(r);
        break;
      default:
        look.answer = request_step::Collect(r);
        look.step = AwaitStep::kAnswered;
        break;
    }
    mutex.unlock();
    return look;
  }

  // Request i was TAKEN by `server`, which is gone (it could only have failed: a flusher answers
  // right after its commit): back to PENDING for the next flusher. False if it is no longer
  // taken by that server.
  bool GiveBackFromGone(int i, int server) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    ThroughRequest& r = requests_.at(i);
    bool give = r.state == kRequestTaken && r.server_pid == server;
    if (give) request_step::GiveBack(r);
    mutex.unlock();
    return give;
  }

  // A backend of database db about to use request i (its slot): a PENDING request of another
  // database, left by a process that had the slot before, is withdrawn (its requester is gone,
  // and db's flusher would never serve it). True if it was.
  bool ForgetForeign(int i, uint32_t db) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    ThroughRequest& r = requests_.at(i);
    bool foreign = r.state == kRequestPending && r.key.db != db;
    if (foreign) request_step::Withdraw(r, open_.Of(r.key.db));
    mutex.unlock();
    return foreign;
  }

  // ---- loaders and drops -----------------------------------------------------------------------

  // Whether a write-through of the single key k is open (PENDING or TAKEN): then no loader may
  // link k. Under k's partition lock EXCLUSIVE.
  bool OpenFor(const CounterKey& k) noexcept {
    if (open_.Of(k.db).load() == 0) return false;
    for (int i = 0; i < requests_.size(); i++) {
      auto mutex = requests_.mutex(i);
      mutex.lock();
      const ThroughRequest& r = requests_.at(i);
      bool match = (r.state == kRequestPending || r.state == kRequestTaken) && r.nbatch == 0 &&
                   r.key == k;
      mutex.unlock();
      if (match) return true;
    }
    return false;
  }

  // Fails the PENDING requests of counter `counter` of database db (counter 0: every counter of
  // db) with sqlerrcode: dropped, so no later flusher adds a stale delta to a counter that
  // reuses the id. TAKEN ones are answered by their flusher, whose write finds no counter.
  // Returns how many.
  int FailPending(uint32_t db, int32_t counter, int sqlerrcode) noexcept {
    int failed = 0;
    for (int i = 0; i < requests_.size(); i++) {
      auto mutex = requests_.mutex(i);
      mutex.lock();
      ThroughRequest& r = requests_.at(i);
      bool fail = r.state == kRequestPending && r.key.db == db &&
                  (counter == 0 || r.key.counter == counter);
      if (fail) request_step::Fail(r, open_.Of(r.key.db), sqlerrcode);
      mutex.unlock();
      failed += fail ? 1 : 0;
    }
    return failed;
  }

  // ---- the flusher -----------------------------------------------------------------------------

  // Takes every PENDING request of database db for the flusher server_pid: their indexes go to
  // taken (room for size()); returns how many.
  int TakePending(uint32_t db, int server_pid, int* taken) noexcept {
    if (open_.Of(db).load() == 0) return 0;
    int n = 0;
    for (int i = 0; i < requests_.size(); i++) {
      auto mutex = requests_.mutex(i);
      mutex.lock();
      ThroughRequest& r = requests_.at(i);
      if (r.state == kRequestPending && r.key.db == db) {
        request_step::Take(r, server_pid);
        taken[n++] = i;
      }
      mutex.unlock();
    }
    return n;
  }

  // Whether the requester of request i (TAKEN by the caller) asked to give it up.
  bool CancelRequested(int i) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    const ThroughRequest& r = requests_.at(i);
    SC_ASSERT(r.state == kRequestTaken);
    bool cancel = r.cancel;
    mutex.unlock();
    return cancel;
  }

  // After the caller's transaction ended: answers request i (TAKEN by the caller) with outcome
  // kRequestDone or kRequestFailed, or gives it back (kRequestPending: to retry at a later
  // turn). Returns how many keys were answered (0 if given back).
  int Finish(int i, RequestState outcome, int64_t result, int sqlerrcode) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    ThroughRequest& r = requests_.at(i);
    int keys = r.nbatch > 0 ? r.nbatch : 1;  // read before the requester may reuse the request
    if (outcome == kRequestPending)
      request_step::GiveBack(r);
    else
      request_step::Answer(r, open_.Of(r.key.db), outcome, result, sqlerrcode);
    mutex.unlock();
    return outcome == kRequestPending ? 0 : keys;
  }

  // The caller's transaction failed before it answered: request i (TAKEN by the caller) goes
  // back to PENDING for the next turn.
  void GiveBack(int i) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    request_step::GiveBack(requests_.at(i));
    mutex.unlock();
  }

 private:
  void Publish(int i, const CounterKey& k, int64_t delta, int32_t nbatch, uint32_t batch,
               Write w, bool intern, uint64_t creator = 0) noexcept {
    auto mutex = requests_.mutex(i);
    mutex.lock();
    request_step::Publish(requests_.at(i), open_.Of(k.db), k, delta, nbatch, batch, w, intern,
                          creator);
    mutex.unlock();
  }

  Requests requests_;
  OpenCounts& open_;
};

}  // namespace sc
