// test_support.hpp: what the unit tests share: a table over heap memory, keys, and the lock
// policies that stand in for the server's LWLocks when the tests drive src/core/protocol.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/counter_table.hpp"
#include "core/partition_lock.hpp"
#include "core/protocol.hpp"

namespace sc_test {

using sc::Bounds;
using sc::CounterKey;
using sc::CounterTable;
using sc::Entry;
using sc::kNil;
using sc::kNoBucket;
using sc::kPartitions;
// The protocol's types, for the tests that drive it.
using sc::Claim;
using sc::Dirtied;
using sc::DirtyRef;
using sc::DirtyRing;
using sc::Loading;
using sc::LoadStart;
using sc::Pin;
using sc::Probe;
using sc::Reservation;
using sc::Reserve;
using sc::Take;

// A table over a 64-byte aligned buffer that starts out as garbage, so that Create must
// initialise everything it uses.
class TableMemory {
 public:
  explicit TableMemory(uint32_t capacity) {
    size_t bytes = (CounterTable::BytesFor(capacity) + 63) / 64 * 64;
    mem_ = std::aligned_alloc(64, bytes);
    std::memset(mem_, 0xA5, bytes);
    table_ = CounterTable::Create(mem_, capacity);
  }
  ~TableMemory() { std::free(mem_); }
  TableMemory(const TableMemory&) = delete;
  TableMemory& operator=(const TableMemory&) = delete;
  CounterTable& operator*() const { return *table_; }
  CounterTable* operator->() const { return table_; }
  CounterTable* get() const { return table_; }

 private:
  void* mem_;
  CounterTable* table_;
};

// The LWLocks with standard mutexes: one std::shared_mutex per partition.
class StdLocks {
 public:
  StdLocks() : m_(std::make_shared<Mutexes>()) {}
  void Shared(uint32_t p) { m_->m[p].lock_shared(); }
  void Exclusive(uint32_t p) { m_->m[p].lock(); }
  bool TryExclusive(uint32_t p) { return m_->m[p].try_lock(); }
  void ReleaseShared(uint32_t p) { m_->m[p].unlock_shared(); }
  void Release(uint32_t p) { m_->m[p].unlock(); }

 private:
  struct Mutexes {
    std::shared_mutex m[kPartitions];
  };
  std::shared_ptr<Mutexes> m_;
};

// A writer's wait for counted readers: yield to them.
struct YieldBackoff {
  void operator()() { std::this_thread::yield(); }
};

// The server's policy (shmem.hpp: PartitionLocks) with standard mutexes: readers counted in
// PartitionReaders, writers on a std::shared_mutex per partition. Copies share both.
class CountedStdLocks : public sc::CountedReaderLocks<StdLocks, YieldBackoff> {
 public:
  CountedStdLocks() : CountedStdLocks(std::make_shared<Readers>(), StdLocks()) {}
  // The same readers and mutexes (a test reaches under the policy, as an error would).
  CountedStdLocks(const CountedStdLocks&) = default;
  sc::PartitionReaders& readers(uint32_t p) { return keep_->r[p]; }
  StdLocks& slow() { return slow_copy_; }

 private:
  struct Readers {
    sc::PartitionReaders r[kPartitions] = {};
  };
  CountedStdLocks(std::shared_ptr<Readers> r, StdLocks slow)
      : CountedReaderLocks(r->r, slow), keep_(r), slow_copy_(slow) {}
  std::shared_ptr<Readers> keep_;
  StdLocks slow_copy_;
};

// A single-threaded policy that records every acquisition and release, checks the discipline
// (released as held, never two partitions at once), and lets a test act at a lock's acquisition
// or release: that is where another process would have run.
struct LockLog {
  struct Event {
    char op;  // 'S' shared, 'X' exclusive, 'T' try-exclusive taken, 'F' try-exclusive refused,
              // 'R' release
    uint32_t partition;
  };
  std::vector<Event> events;
  int mode[kPartitions] = {};  // 0 free, >0 shared holders, -1 exclusive
  int held = 0;                // partitions held now
  int max_held = 0;
  std::vector<std::string> errors;
  std::vector<uint32_t> refuse_try;  // TryExclusive fails on these partitions
  std::function<void(char, uint32_t)> on_acquire;
  std::function<void(uint32_t)> on_release;

  std::string Ops() const {
    std::string s;
    for (const Event& e : events) s += e.op;
    return s;
  }
  bool AllReleased() const {
    for (int m : mode)
      if (m != 0) return false;
    return true;
  }
};

class RecordingLocks {
 public:
  explicit RecordingLocks(LockLog* log) : log_(log) {}
  void Shared(uint32_t p) {
    if (log_->mode[p] < 0) log_->errors.push_back("shared lock on a partition held exclusively");
    Take(p, 'S');
    log_->mode[p]++;
    if (log_->on_acquire) log_->on_acquire('S', p);
  }
  void Exclusive(uint32_t p) {
    if (log_->mode[p] != 0) log_->errors.push_back("exclusive lock on a partition already held");
    Take(p, 'X');
    log_->mode[p] = -1;
    if (log_->on_acquire) log_->on_acquire('X', p);
  }
  bool TryExclusive(uint32_t p) {
    for (uint32_t q : log_->refuse_try)
      if (q == p) {
        log_->events.push_back({'F', p});
        return false;
      }
    if (log_->mode[p] != 0) {
      log_->events.push_back({'F', p});
      return false;
    }
    Take(p, 'T');
    log_->mode[p] = -1;
    if (log_->on_acquire) log_->on_acquire('T', p);
    return true;
  }
  void ReleaseShared(uint32_t p) {
    if (log_->mode[p] <= 0) log_->errors.push_back("shared release of a partition not held shared");
    Drop(p);
  }
  void Release(uint32_t p) {
    if (log_->mode[p] > 0) log_->errors.push_back("exclusive release of a partition held shared");
    Drop(p);
  }

 private:
  void Drop(uint32_t p) {
    if (log_->on_release) log_->on_release(p);
    if (log_->mode[p] == 0) log_->errors.push_back("release of a partition not held");
    log_->events.push_back({'R', p});
    log_->mode[p] = log_->mode[p] < 0 ? 0 : log_->mode[p] - 1;
    if (log_->mode[p] == 0) log_->held--;
  }
  void Take(uint32_t p, char op) {
    log_->events.push_back({op, p});
    if (log_->mode[p] == 0) log_->held++;
    if (log_->held > 1) log_->errors.push_back("two partition locks held at once");
    if (log_->held > log_->max_held) log_->max_held = log_->held;
  }
  LockLog* log_;
};

// A std::mutex standing in for a ring's spinlock.
struct RingMutex {
  std::mutex m;
  void lock() { m.lock(); }
  void unlock() { m.unlock(); }
};

inline CounterKey Key(int64_t key, uint32_t db = 7, int32_t counter = 3,
                      int64_t bucket = kNoBucket) {
  return CounterKey{db, counter, key, bucket};
}

// A dirty ring of `capacity` refs with its storage, as shared memory lays one out (zeroed: the
// tests make it overflow with RingReset, as a slot's (re)assignment does).
struct OwnedRing {
  explicit OwnedRing(int capacity) : storage(size_t(capacity)) {
    ring.count = 0;
    ring.capacity = capacity;
    ring.overflow = false;
    ring.refs = storage.data();
  }
  std::vector<sc::DirtyRef> storage;
  sc::DirtyRing ring;
};

}  // namespace sc_test

// ---- the handshakes of the shared state (core/write_through_request.hpp, core/through_holds.hpp)

#include "core/through_holds.hpp"
#include "core/write_through_request.hpp"

namespace sc_test {

using sc::AwaitStep;
using sc::Look;
using sc::RequestAnswer;
using sc::RequestState;
using sc::ThroughHolds;
using sc::ThroughRequest;

// Write-through requests over standard mutexes, as shared memory lays them out (every byte
// garbage first, then the state EMPTY). Copies share them. A test may count the lock taken by
// each step (locks()); a threaded test must not.
class StdRequests {
 public:
  explicit StdRequests(int n) : s_(std::make_shared<Shared>(n)) {}
  struct Mutex {
    std::mutex* m;
    std::atomic<int>* taken;
    void lock() {
      m->lock();
      taken->fetch_add(1, std::memory_order_relaxed);
    }
    void unlock() { m->unlock(); }
  };
  int size() const { return int(s_->r.size()); }
  Mutex mutex(int i) const { return Mutex{&s_->m[size_t(i)], &s_->taken}; }
  ThroughRequest& at(int i) const { return s_->r[size_t(i)]; }
  int locks() const { return s_->taken.load(); }
  // Every request's mutex at once, in order (no step holds two), and the requests PENDING or
  // TAKEN then: the steps keep the open count equal to it.
  // With every request's mutex held: how many cells of `open` differ from the requests PENDING
  // or TAKEN of their databases.
  int OpenDriftLocked(const sc::OpenCounts& open) {
    for (std::mutex& m : s_->m) m.lock();
    uint32_t n[sc::kOpenCells] = {};
    for (const ThroughRequest& r : s_->r)
      if (r.state == sc::kRequestPending || r.state == sc::kRequestTaken)
        n[r.key.db % sc::kOpenCells]++;
    int drift = 0;
    for (uint32_t c = 0; c < sc::kOpenCells; c++) drift += open.cells[c].load() != n[c] ? 1 : 0;
    for (std::mutex& m : s_->m) m.unlock();
    return drift;
  }

 private:
  struct Shared {
    explicit Shared(int n) : m(size_t(n)), r(size_t(n)) {
      std::memset(static_cast<void*>(r.data()), 0xA5, sizeof(ThroughRequest) * r.size());
      for (ThroughRequest& q : r) q.state = sc::kRequestEmpty;
    }
    std::vector<std::mutex> m;
    std::vector<ThroughRequest> r;
    std::atomic<int> taken{0};
  };
  std::shared_ptr<Shared> s_;
};

// Holds as shared memory lays them out (garbage, then InitThroughHolds).
struct OwnedHolds {
  OwnedHolds() : mem(new ThroughHolds) {
    std::memset(static_cast<void*>(mem.get()), 0xA5, sizeof(ThroughHolds));
    sc::InitThroughHolds(*mem);
  }
  ThroughHolds& operator*() const { return *mem; }
  std::unique_ptr<ThroughHolds> mem;
};

// A database whose holds are counted apart from db's (another hold group); db + 1 if none is
// (the test that asked then fails on the shared hold, rather than loop here).
inline uint32_t OtherGroupDb(uint32_t db) {
  for (uint32_t other = db + 1; other < db + 1000; other++)
    if (sc::HoldGroup(other) != sc::HoldGroup(db)) return other;
  return db + 1;
}

}  // namespace sc_test
