// Threaded tests of the counter table and its protocol (src/core/counter_table.*,
// src/core/protocol.hpp): concurrent adds, the lock-free free list, concurrent claims, and the
// whole protocol run by incrementers, loaders, committers, batches and two overlapping flushers at
// once, checked against a std::map standing in for the values table. The protocol code is the
// server's own (sc::Protocol) over the server's partition lock (src/core/partition_lock.hpp,
// tested here too); only what it stands on differs: std::shared_mutex per partition (StdLocks) for the LWLocks,
// std::mutex (RingMutex) for a ring's spinlock.
//
// Worker threads never use gtest assertions; they count problems, and the main thread asserts
// after joining. Run under ThreadSanitizer by run.sh.
//
// SC_UNIT_SCALE (environment, default 1) scales the operation counts; run.sh uses the default.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace sc_test;

using Proto = sc::Protocol<CountedStdLocks>;

constexpr int kThreads = 8;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// No single operation of a test may take longer than this; past it the test fails, never hangs.
// Both bounds are hang guards, not times: with a CPU hog on each core every thread that waits
// by yielding waits out the hog's time slices, and a test of 0.2 s took 53 s (one of 4.5 s, 78).
constexpr auto kStuck = std::chrono::seconds(120);
constexpr auto kWatchdog = std::chrono::seconds(900);

uint64_t Scaled(uint64_t n) {
  static const double scale = [] {
    const char* s = std::getenv("SC_UNIT_SCALE");
    double v = s ? std::atof(s) : 1.0;
    return v > 0 ? v : 1.0;
  }();
  uint64_t r = uint64_t(double(n) * scale);
  return r ? r : 1;
}

// Lets all threads start at once (maximises overlap on a 2-core machine).
class StartGate {
 public:
  void Wait() {
    while (!open_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void Open() { open_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> open_{false};
};

// Ends the process if a test runs far past its expected time: a corrupted chain (a cycle) makes
// Find loop forever under a lock, which no per-operation deadline inside the test can catch.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : thread_([this, limit] {
    std::unique_lock<std::mutex> g(mu_);
    if (!cv_.wait_for(g, limit, [this] { return done_; })) {
      std::fprintf(stderr, "watchdog: %s still running after %lld s, aborting\n",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                   (long long)limit.count());
      std::fflush(stderr);
      std::_Exit(3);
    }
  }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Threads that sleep for a few microseconds in a loop. Each wake-up preempts a running worker
// at an arbitrary instruction and sends it to the back of the run queue for a while, which
// makes preemptions inside the few-instruction windows of lock-free code (read head and next,
// then CAS) common instead of a once-a-second event.
class PreemptionNoise {
 public:
  PreemptionNoise(int nthreads, std::chrono::microseconds period) {
    for (int n = 0; n < nthreads; n++)
      threads_.emplace_back([this, period] {
        while (!stop_.load(std::memory_order_relaxed)) std::this_thread::sleep_for(period);
      });
  }
  ~PreemptionNoise() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};
// ---------------------------------------------------------------------------------------------
// The lock-free free list: with a tiny table and many threads popping and pushing, a slot is
// never owned by two threads at once (ABA), none is lost, and generations count the releases.

void RunFreeList(int nthreads, uint32_t kCap, size_t max_held, uint64_t per_thread,
                 std::chrono::milliseconds duration, int noise_threads) {
  SCOPED_TRACE("capacity " + std::to_string(kCap));
  Watchdog dog(kWatchdog);
  TableMemory t(kCap);
  std::unique_ptr<std::atomic<int>[]> owner(new std::atomic<int>[kCap]);
  for (uint32_t i = 0; i < kCap; i++) owner[i].store(0);
  std::vector<uint64_t> releases(nthreads, 0), doubles(nthreads, 0), bad_state(nthreads, 0);
  std::atomic<bool> stuck{false};
  StartGate gate;
  std::vector<std::thread> threads;
  for (int th = 0; th < nthreads; th++) {
    threads.emplace_back([&, th] {
      std::mt19937 rng(th);
      std::vector<uint32_t> held;
      gate.Wait();
      const auto start = std::chrono::steady_clock::now();
      const auto deadline = start + 4 * kStuck;
      for (uint64_t n = 0; n < per_thread && !stuck.load(std::memory_order_relaxed); n++) {
        if (n % 1024 == 0 && std::chrono::steady_clock::now() - start > duration) break;
        // Hold up to max_held slots so that pops and pushes interleave in varied orders.
        if (held.size() < max_held && (held.empty() || rng() % 2)) {
          uint32_t i = t->Allocate();
          if (i == kNil) {
            if (held.empty()) std::this_thread::yield();
            if (std::chrono::steady_clock::now() > deadline) stuck.store(true);
            continue;
          }
          if (i >= kCap || owner[i].exchange(th + 1) != 0) doubles[th]++;
          if (i < kCap && t->at(i).state.load() != sc::kOwned) bad_state[th]++;
          if (i < kCap) {
            // The owner may write the entry freely: TSan sees a race if someone else also does.
            t->at(i).id = CounterKey{uint32_t(th), int32_t(n), int64_t(n), kNoBucket};
            t->at(i).hash = uint32_t(n);
            held.push_back(i);
          }
        } else {
          uint32_t i = held.back();
          held.pop_back();
          owner[i].store(0);
          t->Release(i);
          releases[th]++;
        }
      }
      for (uint32_t i : held) {
        owner[i].store(0);
        t->Release(i);
        releases[th]++;
      }
    });
  }
  {
    PreemptionNoise noise(noise_threads, std::chrono::microseconds(20));
    gate.Open();
    for (auto& th : threads) th.join();
  }
  ASSERT_FALSE(stuck.load()) << "free list stopped handing out slots";

  uint64_t total_releases = 0, total_doubles = 0, total_bad = 0;
  for (int th = 0; th < nthreads; th++) {
    total_releases += releases[th];
    total_doubles += doubles[th];
    total_bad += bad_state[th];
  }
  EXPECT_EQ(total_doubles, 0u) << "a slot was owned by two threads at once";
  EXPECT_EQ(total_bad, 0u) << "Allocate returned an entry not in state kOwned";
  EXPECT_GT(total_releases, 10'000u);  // the test did real work
  EXPECT_EQ(t->used(), 0u);
  uint64_t gen_sum = 0;
  for (uint32_t i = 0; i < kCap; i++) {
    EXPECT_EQ(t->at(i).state.load(), sc::kFree) << i;
    gen_sum += t->at(i).generation.load();
  }
  EXPECT_EQ(gen_sum, total_releases) << "generation must change once per release";
  std::vector<uint32_t> drained, want;
  for (uint32_t n = 0; n < kCap; n++) {
    drained.push_back(t->Allocate());
    want.push_back(n);
  }
  std::sort(drained.begin(), drained.end());
  EXPECT_EQ(drained, want) << "free list lost or duplicated a slot";
  EXPECT_EQ(t->Allocate(), kNil);
}

TEST(ConcurrentFreeList, NoSlotIsHandedOutTwiceOrLost) {
  // Short list, often empty: contention on the head and on the last slot.
  RunFreeList(kThreads, /*capacity=*/4, /*max_held=*/2, Scaled(150'000),
              std::chrono::milliseconds(Scaled(2'000)), /*noise_threads=*/0);
}

// The tag on the free-list head is what stops an Allocate that read (head = i, next = j) and was
// preempted from installing a stale j after others popped i and j and pushed i back. That needs
// a preemption between two instructions; PreemptionNoise makes those frequent. With the tag
// removed this fails within a few hundred milliseconds (a slot handed out twice, or slots lost).
TEST(ConcurrentFreeList, PreemptedAllocateCannotInstallAStaleNext) {
  RunFreeList(kThreads, /*capacity=*/32, /*max_held=*/2, Scaled(50'000'000),
              std::chrono::milliseconds(Scaled(1'500)), /*noise_threads=*/2);
}


// ---------------------------------------------------------------------------------------------
// Several databases loading into a table smaller than their keys at once, each through its own
// sweep (TakeFreeOrClean for its database, which evicts its own entries and those of databases
// over their share), under ThreadSanitizer too: at rest every database's occupancy equals its
// linked entries.

TEST(ConcurrentOccupancy, CountsStayExactWhileDatabasesEvictEachOther) {
  constexpr uint32_t kCap = 64;
  constexpr uint32_t kDatabases = 4;
  sc_test::TableMemory mem(kCap);
  sc::Protocol<CountedStdLocks> p(mem.get(), CountedStdLocks());
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kThreads; w++) {
    threads.emplace_back([&, w] {
      uint32_t db = 1 + w % kDatabases;
      std::mt19937_64 rng(w);
      for (uint64_t n = 0; n < Scaled(20'000); n++) {
        CounterKey k{db, 1, int64_t(rng() % 500), kNoBucket};
        uint32_t h = sc::HashCounterKey(k);
        uint64_t evicted = 0;
        uint32_t index = p.TakeFreeOrClean(db, false, 64, [](const Entry&) { return true; },
                                           &evicted);
        if (index == kNil) continue;
        Loading loading;
        if (p.BeginLoad(index, k, h, [] { return LoadStart::kLinked; }, &loading) !=
            LoadStart::kLinked)
          continue;
        (void)p.FinishLoad(loading, 0, [] { return false; });
      }
    });
  }
  for (auto& t : threads) t.join();
  uint32_t linked[kDatabases + 1] = {};
  for (uint32_t i = 0; i < kCap; i++)
    if (mem->at(i).state.load() == sc::kResident) linked[mem->at(i).id.db]++;
  for (uint32_t db = 1; db <= kDatabases; db++)
    EXPECT_EQ(mem->OccupancyOf(db), linked[db]) << "database " << db;
  EXPECT_EQ(linked[1] + linked[2] + linked[3] + linked[4], uint32_t(mem->used()));
}

// ---------------------------------------------------------------------------------------------
// The partition lock (src/core/partition_lock.hpp): readers counted, writers on the slow lock.

// Writers change two plain integers together; readers must never see them differ, and (under
// ThreadSanitizer) no reader's read may race with a writer's write. Writers use Exclusive and
// TryExclusive; preemption noise puts readers to sleep inside their sections.
TEST(PartitionLock, ReadersNeverSeeAWriterHalfwayAndWritersAreNotStarved) {
  Watchdog dog(kWatchdog);
  CountedStdLocks locks;
  const uint32_t part = 5;
  int64_t a = 0, b = 0;  // plain: the lock alone orders them
  std::atomic<int> torn{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, writes{0}, tries_refused{0};
  StartGate gate;
  PreemptionNoise noise(2, std::chrono::microseconds(50));
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; th++)
    threads.emplace_back([&] {
      gate.Wait();
      while (!stop.load(std::memory_order_relaxed)) {
        locks.Shared(part);
        if (a != b) torn++;
        locks.ReleaseShared(part);
        reads++;
      }
    });
  for (int th = 0; th < 2; th++)
    threads.emplace_back([&, th] {
      gate.Wait();
      // At least n writes, and on until the readers have read a thousand times among them (a
      // count, not a time: on a loaded machine the writers could otherwise finish before a
      // reader ran at all).
      const uint64_t n = Scaled(20'000);
      for (uint64_t i = 0; i < n || reads.load(std::memory_order_relaxed) < 1000; i++) {
        if (th == 1 && i % 2 == 0) {
          if (!locks.TryExclusive(part)) {
            tries_refused++;
            continue;
          }
        } else {
          locks.Exclusive(part);
        }
        a++;
        b++;
        locks.Release(part);
        writes++;
      }
    });
  gate.Open();
  threads[4].join();
  threads[5].join();
  stop.store(true);
  for (int th = 0; th < 4; th++) threads[th].join();
  EXPECT_EQ(torn.load(), 0) << "a reader saw a writer's change halfway";
  EXPECT_EQ(uint64_t(a), writes.load());
  EXPECT_EQ(a, b);
  EXPECT_GE(reads.load(), 1000u);
  EXPECT_EQ(locks.readers(part).readers.load(), 0u) << "a reader's count was left behind";
  EXPECT_EQ(locks.readers(part).writer.load(), 0u);
}

// An Exclusive waits for a reader counted before it; TryExclusive refuses while one is counted
// and leaves nothing set that would send later readers to the slow lock.
TEST(PartitionLock, AWriterWaitsForACountedReaderAndATryRefuses) {
  Watchdog dog(kWatchdog);
  CountedStdLocks locks;
  const uint32_t part = 9;
  locks.Shared(part);
  EXPECT_FALSE(locks.TryExclusive(part));
  EXPECT_EQ(locks.readers(part).writer.load(), 0u) << "a refused try left the writer flag";
  std::atomic<bool> written{false};
  std::thread writer([&] {
    locks.Exclusive(part);
    written.store(true);
    locks.Release(part);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(written.load()) << "a writer entered while a reader held the lock";
  locks.ReleaseShared(part);
  writer.join();
  EXPECT_TRUE(written.load());
  EXPECT_TRUE(locks.TryExclusive(part));
  locks.Release(part);
}

// A writer whose error released the slow lock (as LWLockReleaseAll does) but not its flag: the
// next reader finds the flag stale under the slow lock, clears it, and holds the lock; writers
// work again after it.
TEST(PartitionLock, AWriterFlagLeftByAnErrorIsClearedByTheNextReader) {
  Watchdog dog(kWatchdog);
  CountedStdLocks locks;
  const uint32_t part = 3;
  locks.Exclusive(part);
  locks.slow().Release(part);  // the error's cleanup: the slow lock only
  EXPECT_EQ(locks.readers(part).writer.load(), 1u);
  locks.Shared(part);
  EXPECT_EQ(locks.readers(part).writer.load(), 0u) << "the stale flag was not cleared";
  EXPECT_EQ(locks.readers(part).readers.load(), 1u);
  locks.ReleaseShared(part);
  locks.Exclusive(part);
  locks.Release(part);
  EXPECT_EQ(locks.readers(part).readers.load(), 0u);
  EXPECT_EQ(locks.readers(part).writer.load(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Concurrent adds to one resident entry through the hot path (AddIfResident).

// Loads k as a resident, clean entry with the given value, and its sum entry (single-threaded
// setup).
void LoadResident(Proto& p, const CounterKey& k, int64_t value) {
  uint64_t evicted = 0;
  uint32_t h = sc::HashCounterKey(k);
  uint32_t sum = p.TakeFreeOrClean(k.db, false, 1024, [](const Entry&) { return true; }, &evicted);
  if (sum == kNil) std::abort();
  p.LinkSum(sum, k, h);
  uint32_t index =
      p.TakeFreeOrClean(k.db, false, 1024, [](const Entry&) { return true; }, &evicted);
  Loading loading;
  if (index == kNil ||
      p.BeginLoad(index, k, h, [] { return LoadStart::kLinked; }, &loading) != LoadStart::kLinked ||
      !p.FinishLoad(loading, value, [] { return false; }))
    std::abort();
}

TEST(ConcurrentAdd, DeltaOneHandsOutEveryValueExactlyOnce) {
  Watchdog dog(kWatchdog);
  const uint64_t per_thread = Scaled(250'000);
  TableMemory t(8);
  Proto p(t.get(), CountedStdLocks());
  const CounterKey key{1, 1, 42, kNoBucket};
  const uint32_t hash = sc::HashCounterKey(key);
  LoadResident(p, key, 0);

  std::vector<std::vector<int64_t>> seen(kThreads);
  std::atomic<uint64_t> failures{0}, dirtied{0};
  StartGate gate;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++) {
    threads.emplace_back([&, th] {
      std::vector<int64_t>& mine = seen[th];
      mine.reserve(per_thread);
      gate.Wait();
      for (uint64_t n = 0; n < per_thread; n++) {
        int64_t nv;
        bool overflow;
        Dirtied d;
        if (p.AddIfResident(key, hash, 1, &nv, &overflow, &d) != Probe::kFound || overflow) {
          failures.fetch_add(1);
          continue;
        }
        if (d.index != kNil) dirtied.fetch_add(1);
        mine.push_back(nv);
      }
    });
  }
  gate.Open();
  for (auto& th : threads) th.join();

  ASSERT_EQ(failures.load(), 0u);
  EXPECT_EQ(dirtied.load(), 1u) << "only the add that made the clean entry dirty notes it";
  const int64_t total = int64_t(per_thread) * kThreads;
  EXPECT_EQ(t->at(t->Find(key, hash)).value.load(), total);
  std::vector<int64_t> all;
  all.reserve(size_t(total));
  for (auto& v : seen) {
    // Each thread sees its own increments in increasing order.
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(all.end(), v.begin(), v.end());
  }
  ASSERT_EQ(all.size(), size_t(total));
  std::sort(all.begin(), all.end());
  // Distinct and exactly 1..total: no value handed out twice, none skipped.
  auto dup = std::adjacent_find(all.begin(), all.end());
  EXPECT_TRUE(dup == all.end()) << "new value " << *dup << " returned to two increments";
  EXPECT_EQ(all.front(), 1);
  EXPECT_EQ(all.back(), total);
}

// Threads race to the top of the range: exactly the room left succeeds, the rest is refused, and
// the value ends at the maximum, never wrapped.
TEST(ConcurrentAdd, OverflowIsRefusedExactlyAtTheLimit) {
  Watchdog dog(kWatchdog);
  TableMemory t(8);
  Proto p(t.get(), CountedStdLocks());
  const CounterKey key{1, 1, 7, kNoBucket};
  const uint32_t hash = sc::HashCounterKey(key);
  const int64_t room = 10'000;
  LoadResident(p, key, kMax - room);
  std::atomic<int64_t> ok{0}, refused{0}, wrong{0};
  StartGate gate;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++)
    threads.emplace_back([&] {
      gate.Wait();
      for (int n = 0; n < 5'000; n++) {
        int64_t nv;
        bool overflow;
        Dirtied d;
        p.AddIfResident(key, hash, 1, &nv, &overflow, &d);
        if (overflow) {
          refused.fetch_add(1);
          if (nv != kMax) wrong.fetch_add(1);
        } else {
          ok.fetch_add(1);
        }
      }
    });
  gate.Open();
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), room);
  EXPECT_EQ(refused.load(), int64_t(kThreads) * 5'000 - room);
  EXPECT_EQ(wrong.load(), 0) << "a refused add reports the unchanged (maximal) value";
  EXPECT_EQ(t->at(t->Find(key, hash)).value.load(), kMax);
}

// A limiter's key under every thread at once: with a burst of 1,000 and a unit an hour, 8 threads
// of 500 calls admit exactly 1,000, whatever their interleaving, and the TAT ends 1,000 hours on.
TEST(ConcurrentAdd, ThrottleAdmitsExactlyTheBurst) {
  Watchdog dog(kWatchdog);
  TableMemory t(8);
  Proto p(t.get(), CountedStdLocks());
  const CounterKey key{1, 1, 10, kNoBucket};
  const uint32_t hash = sc::HashCounterKey(key);
  LoadResident(p, key, 0);
  sc::Entry& e = t->at(t->Find(key, hash));
  sc::GcraLimit limit{};
  ASSERT_TRUE(sc::MakeGcraLimit(1, 3600LL * 1000000, 1000, &limit));
  const int64_t now = 850000000LL * 1000000;
  std::atomic<int64_t> admitted{0};
  StartGate gate;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; th++)
    threads.emplace_back([&] {
      gate.Wait();
      for (int n = 0; n < 500; n++)
        if (sc::CounterTable::Throttle(e, now, 1, limit).allowed) admitted.fetch_add(1);
    });
  gate.Open();
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 1000);
  EXPECT_EQ(e.value.load(), now + 1000 * limit.interval);
}

// A rate limit at its bound: each thread takes one unit of room (a bounded +1) and, if admitted,
// gives it back (a bounded -1, which must be admitted), so the value sits at the bound and every
// thread keeps racing for the last unit. Then the same at the lower bound with -1 first. No value
// outside the bounds is ever seen, every refusal saw the bound, and the value ends where it
// started.
TEST(ConcurrentAdd, BoundedAddsAtTheBoundAdmitOnlyWhatFits) {
  Watchdog dog(kWatchdog);
  TableMemory t(8);
  Proto p(t.get(), CountedStdLocks());
  const Bounds bounds{0, 1'000};
  for (int64_t first : {int64_t(1), int64_t(-1)}) {
    const CounterKey key{1, 1, first > 0 ? 8 : 9, kNoBucket};
    const uint32_t hash = sc::HashCounterKey(key);
    // Room for half the threads at once.
    const int64_t start = first > 0 ? bounds.upper - kThreads / 2 : bounds.lower + kThreads / 2;
    LoadResident(p, key, start);
    std::atomic<int64_t> admitted{0}, refused_at_bound{0}, wrong{0};
    StartGate gate;
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; th++)
      threads.emplace_back([&] {
        gate.Wait();
        for (int n = 0; n < 100'000; n++) {
          int64_t value = 0;
          bool refused = false;
          Dirtied d;
          if (p.AddIfResidentWithin(key, hash, first, bounds, &value, &refused, &d) !=
                  Probe::kFound ||
              !bounds.Admit(value))
            wrong.fetch_add(1);
          if (refused) {
            if (value != (first > 0 ? bounds.upper : bounds.lower)) wrong.fetch_add(1);
            refused_at_bound.fetch_add(1);
            continue;
          }
          admitted.fetch_add(1);
          p.AddIfResidentWithin(key, hash, -first, bounds, &value, &refused, &d);
          if (refused || !bounds.Admit(value)) wrong.fetch_add(1);
        }
      });
    gate.Open();
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0) << "a value outside the bounds, or a wrong refusal (first "
                               << first << ")";
    EXPECT_EQ(t->at(t->Find(key, hash)).value.load(), start);
    EXPECT_GT(admitted.load(), 0);
  }
}

// Flushers that overlap (during a hand-over) claim under a shared lock: exactly one of them may
// claim a dirty entry, however they interleave.
TEST(ConcurrentClaim, ExactlyOneOfOverlappingFlushersClaimsAnEntry) {
  Watchdog dog(kWatchdog);
  TableMemory t(8);
  Proto p(t.get(), CountedStdLocks());
  const CounterKey key{1, 1, 9, kNoBucket};
  const uint32_t hash = sc::HashCounterKey(key);
  const uint32_t part = CounterTable::PartitionOf(hash);
  LoadResident(p, key, 0);
  const uint32_t index = t->Find(key, hash);
  const int rounds = int(Scaled(20'000));
  std::atomic<int> round{-1}, arrived{0};
  std::atomic<int> double_claims{0}, no_claims{0};
  std::vector<int> taken(rounds, 0);
  std::mutex taken_mu;
  const int kFlushers = 4;
  std::vector<std::thread> threads;
  for (int th = 0; th < kFlushers; th++)
    threads.emplace_back([&] {
      for (int r = 0; r < rounds; r++) {
        while (round.load(std::memory_order_acquire) != r) std::this_thread::yield();
        arrived.fetch_add(1);
        p.locks().Shared(part);
        Claim c;
        Take take = Proto::ClaimForFlush(1, index, part, t->at(index),
                                         [](const Entry&) { return true; }, &c);
        p.locks().ReleaseShared(part);
        if (take == Take::kTaken) {
          std::lock_guard<std::mutex> g(taken_mu);
          taken[r]++;
        }
        arrived.fetch_add(1);
      }
    });
  for (int r = 0; r < rounds; r++) {
    // Dirty and unclaimed, then let the flushers race.
    t->at(index).value.fetch_add(1);
    round.store(r, std::memory_order_release);
    while (arrived.load() < 2 * kFlushers * (r + 1)) std::this_thread::yield();
    if (taken[r] > 1) double_claims++;
    if (taken[r] == 0) no_claims++;
    t->at(index).flushed.store(t->at(index).value.load());
    t->at(index).in_flush.store(0);
  }
  round.store(rounds);
  for (auto& th : threads) th.join();
  EXPECT_EQ(double_claims.load(), 0) << "two flushers claimed one entry (and would write it twice)";
  EXPECT_EQ(no_claims.load(), 0);
}


// ---------------------------------------------------------------------------------------------
// The whole protocol at once, as the server runs it (buffer/, transactions/transactional.cpp,
// flush.cpp), with a std::map for the values table and a std::mutex for its transactions.
//
// Keys of even counters are buffered, of odd counters transactional (as in the server, a counter
// is one or the other). Worker threads, on random keys from a key space larger than the table:
//   - buffered: AddIfResident (the hot path), or, one time in ten, as a batch does: pin the
//     entry, AddPinned, Unpin. A dirtied entry is noted in the database's ring.
//   - transactional: ReserveIfResident, then the "transaction" writes its delta to the map, then
//     SettleReservation commits it; one time in ten it aborts instead (no write, settle false).
//   - on a miss: TakeFreeOrClean (evicting; may_evict checks that the map holds the whole value of
//     what it evicts), BeginLoad, read the map without a lock, FinishLoad.
// Two flushers overlap the whole time (a hand-over): RingOverflowed, RingTake, ClaimAll or
// ClaimNoted, write the claimed deltas to the map, SettleClaim, note what stayed dirty. A purger
// runs PurgeClean now and then. At the end, after a last flush, the map must hold exactly each
// key's net sum of deltas, and every entry must be resident, clean and settled.

using IdTuple = std::tuple<uint32_t, int32_t, int64_t, int64_t>;
IdTuple Id(const CounterKey& k) { return IdTuple(k.db, k.counter, k.key, k.bucket); }

constexpr uint32_t kDb = 1;

struct WorkerStats {
  std::vector<int64_t> net;  // per key: the sum of the deltas this thread counted
  uint64_t hits = 0, loads = 0, lost_races = 0, evictions = 0, no_room = 0, loading_waits = 0,
           commits = 0, aborts = 0, pinned_adds = 0, errors = 0;
  std::string first_error;
  void Error(const std::string& what) {
    if (errors++ == 0) first_error = what;
  }
};

class ServerRun {
 public:
  ServerRun(uint32_t capacity, uint32_t nkeys) : mem_(capacity), p_(mem_.get(), CountedStdLocks()) {
    ring_owner_ = std::make_unique<OwnedRing>(int(sc::kMinDirtyRing));
    ring_ = &ring_owner_->ring;
    sc::RingReset(*ring_, ring_mu_);
    for (uint32_t k = 0; k < nkeys; k++) {
      // Spread over counters and buckets; all distinct because `key` is.
      CounterKey key{kDb, 1 + int32_t(k % 4), int64_t(k) * 7919 - 50'000,
                     k % 3 == 0 ? kNoBucket : int64_t(k % 7) * 3'600'000'000LL};
      keys_.push_back(key);
      hashes_.push_back(sc::HashCounterKey(key));
    }
  }

  uint32_t nkeys() const { return uint32_t(keys_.size()); }
  CounterTable& table() { return *mem_; }
  const CounterKey& key(uint32_t ki) const { return keys_[ki]; }
  uint32_t hash(uint32_t ki) const { return hashes_[ki]; }
  static bool Transactional(const CounterKey& k) { return k.counter % 2 == 0; }
  std::atomic<bool> abort{false};

  // Counts delta into key #ki; returns when it has been counted (or not, for an abort).
  void Count(uint32_t ki, int64_t delta, bool alternate, WorkerStats& st) {
    const CounterKey& k = keys_[ki];
    const uint32_t h = hashes_[ki];
    const auto deadline = std::chrono::steady_clock::now() + kStuck;
    int waits = 0;
    for (;;) {
      if (abort.load(std::memory_order_relaxed)) return;
      if (std::chrono::steady_clock::now() > deadline) {
        st.Error("one operation took longer than the deadline (livelock?)");
        abort.store(true);
        return;
      }
      Probe probe = Transactional(k) ? Commit(k, h, delta, alternate, ki, st)
                                     : Increment(k, h, delta, alternate, ki, st);
      if (probe == Probe::kFound) return;
      if (probe == Probe::kLoading) {  // back off like buffer/load.cpp's WaitForLoad
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::min<uint64_t>(1000, 20u << std::min(waits, 6))));
        waits++;
        st.loading_waits++;
        continue;
      }
      Load(k, h, st);
    }
  }

  // Adds delta to key #ki if it is buffered and resident with its sum entry (no load, no
  // flush needed); true if it did.
  bool AddIfResident(uint32_t ki, int64_t delta, WorkerStats& st) {
    if (Transactional(keys_[ki])) return false;
    return Increment(keys_[ki], hashes_[ki], delta, false, ki, st) == Probe::kFound;
  }

  // One flush (take the ring, claim, write, settle); false if it found nothing to write.
  bool Flush(uint64_t* flushed, bool everything) {
    if (everything) sc::RingMarkUntracked(*ring_, ring_mu_);
    bool overflowed = sc::RingOverflowed(*ring_, ring_mu_);
    std::vector<DirtyRef> refs(size_t(ring_->capacity));
    bool scan_all = false;
    int nrefs = sc::RingTake(*ring_, ring_mu_, overflowed, refs.data(), &scan_all);
    struct Item {
      Claim claim;
      IdTuple id;
    };
    std::vector<Item> items;
    items.reserve(mem_->capacity());
    auto eligible = [](const Entry&) { return true; };
    auto taken = [&](const Claim& c, const Entry& e) { items.push_back(Item{c, Id(e.id)}); };
    auto left = [&](uint32_t index, uint32_t generation) {
      sc::RingNote(*ring_, ring_mu_, index, generation);
    };
    if (scan_all)
      p_.ClaimAll(kDb, eligible, [&] { return items.size() < mem_->capacity(); }, taken, left,
                  [&](const Entry&) { sc::RingMarkUntracked(*ring_, ring_mu_); });
    else
      p_.ClaimNoted(kDb, refs.data(), nrefs, eligible, taken, left);
    if (items.empty()) return false;
    // The server commits a transaction here: give the others time to move values.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    {
      std::lock_guard<std::mutex> g(values_mu_);
      for (const Item& it : items) values_[it.id] += it.claim.delta;
    }
    std::this_thread::yield();
    for (const Item& it : items)
      if (p_.SettleClaim(it.claim, true))
        sc::RingNote(*ring_, ring_mu_, it.claim.index, it.claim.generation);
    *flushed += items.size();
    return true;
  }

  void PurgeClean(WorkerStats& st) {
    p_.PurgeClean(kDb, [&](const Entry& e) { return CheckStored(e, st, "purging"); });
  }

  std::map<IdTuple, int64_t> Values() {
    std::lock_guard<std::mutex> g(values_mu_);
    return values_;
  }

 private:
  Probe Increment(const CounterKey& k, uint32_t h, int64_t delta, bool pinned, uint32_t ki,
                  WorkerStats& st) {
    int64_t nv;
    Dirtied d;
    Probe probe = Probe::kMissing;
    if (pinned) {
      Pin pin{kNil, 0, 0};
      p_.Exclusively(CounterTable::PartitionOf(h), [&] { probe = p_.PinLocked(k, h, &pin); });
      if (probe != Probe::kFound) return probe;
      if (!p_.AddPinned(pin, delta, &nv, &d)) st.Error("AddPinned refused an add far from overflow");
      p_.Unpin(pin);
      st.pinned_adds++;
    } else {
      bool overflow;
      probe = p_.AddIfResident(k, h, delta, &nv, &overflow, &d);
      if (probe != Probe::kFound) return probe;
      if (overflow) st.Error("AddIfResident refused an add far from overflow");
    }
    if (d.index != kNil) sc::RingNote(*ring_, ring_mu_, d.index, d.generation);
    st.net[ki] += delta;
    st.hits++;
    return Probe::kFound;
  }

  Probe Commit(const CounterKey& k, uint32_t h, int64_t delta, bool abort_it, uint32_t ki,
               WorkerStats& st) {
    Reservation r{kNil, 0, 0, 0, 0, sc::kNoWrite};
    int64_t committed = 0;
    switch (p_.ReserveIfResident(k, h, delta, &r, &committed)) {
      case Reserve::kMissing:
        return Probe::kMissing;
      case Reserve::kLoading:
        return Probe::kLoading;
      case Reserve::kOverflow:
      case Reserve::kOutOfBounds:
        st.Error("ReserveIfResident refused a delta far from overflow");
        return Probe::kFound;
      case Reserve::kBusy:
        st.Error("ReserveIfResident found an expired key where nothing expires");
        return Probe::kFound;
      case Reserve::kReserved:
        break;
    }
    if (!abort_it) {  // the transaction's deltas row, committed before the settle
      std::lock_guard<std::mutex> g(values_mu_);
      values_[Id(k)] += delta;
    }
    std::this_thread::yield();
    if (!p_.SettleReservation(r, !abort_it, 1)) st.Error("a reserved entry left the buffer");
    if (abort_it) {
      st.aborts++;
    } else {
      st.net[ki] += delta;
      st.commits++;
    }
    st.hits++;
    return Probe::kFound;
  }

  // A free entry or an evicted one, or kNil.
  uint32_t Take(WorkerStats& st) {
    uint64_t evicted = 0;
    uint32_t index = p_.TakeFreeOrClean(
        kDb, false, 1024, [&](const Entry& e) { return CheckStored(e, st, "evicting"); }, &evicted);
    st.evictions += evicted;
    if (index == kNil) {
      st.no_room++;
      std::this_thread::yield();
    }
    return index;
  }

  // As buffer/load.cpp: the key's sum entry first (a key resident without it needs only that),
  // then the key.
  void Load(const CounterKey& k, uint32_t h, WorkerStats& st) {
    if (!p_.HasSum(k, h)) {
      uint32_t spare = Take(st);
      if (spare == kNil) return;
      p_.LinkSum(spare, k, h);
      int64_t ignored;
      if (p_.ReadIfResident(k, h, &ignored) != Probe::kMissing) return;
    }
    uint32_t index = Take(st);
    if (index == kNil) return;
    if (mem_->at(index).state.load() != sc::kOwned) st.Error("a taken entry is not kOwned");
    Loading loading;
    if (p_.BeginLoad(index, k, h, [] { return LoadStart::kLinked; }, &loading) !=
        LoadStart::kLinked) {
      st.lost_races++;
      return;
    }
    // Read the stored value outside the partition lock, as the server reads its table.
    int64_t stored = 0;
    {
      std::lock_guard<std::mutex> g(values_mu_);
      auto it = values_.find(Id(k));
      if (it != values_.end()) stored = it->second;
    }
    if (!p_.FinishLoad(loading, stored, [] { return false; })) st.Error("a load went stale");
    st.loads++;
  }

  // An entry about to leave the buffer is clean and settled: the map must hold its whole value
  // (a sum entry's: 0, in no row).
  bool CheckStored(const Entry& e, WorkerStats& st, const char* what) {
    std::lock_guard<std::mutex> g(values_mu_);
    auto it = values_.find(Id(e.id));
    int64_t stored = it == values_.end() ? 0 : it->second;
    int64_t value = e.value.load(std::memory_order_relaxed);
    if (stored != value) {
      std::ostringstream os;
      os << what << " key " << e.id.key << " with value " << value << " but the table holds "
         << stored;
      st.Error(os.str());
    }
    return true;
  }

  TableMemory mem_;
  Proto p_;
  std::unique_ptr<OwnedRing> ring_owner_;
  DirtyRing* ring_;
  RingMutex ring_mu_;
  std::vector<CounterKey> keys_;
  std::vector<uint32_t> hashes_;
  std::mutex values_mu_;
  std::map<IdTuple, int64_t> values_;
};

struct RunParams {
  uint32_t capacity;
  uint32_t nkeys;
  uint32_t hot;          // size of the hot set
  uint32_t hot_percent;  // share of operations that go to the hot set
  uint64_t ops_per_thread;
  int purge_every_ms;    // 0: no purger
};

void RunServer(const RunParams& prm) {
  Watchdog dog(kWatchdog);
  ASSERT_GT(prm.nkeys, prm.capacity) << "the key space must not fit in the table";
  ServerRun m(prm.capacity, prm.nkeys);
  std::vector<WorkerStats> stats(kThreads + 1);
  for (auto& s : stats) s.net.assign(prm.nkeys, 0);

  std::atomic<bool> stop{false};
  uint64_t flushed[2] = {0, 0}, purges = 0;
  std::vector<std::thread> background;
  for (int f = 0; f < 2; f++)
    background.emplace_back([&, f] {
      while (!stop.load(std::memory_order_acquire)) {
        m.Flush(&flushed[f], false);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  if (prm.purge_every_ms > 0)
    background.emplace_back([&] {
      while (!stop.load(std::memory_order_acquire)) {
        m.PurgeClean(stats[kThreads]);
        purges++;
        std::this_thread::sleep_for(std::chrono::milliseconds(prm.purge_every_ms));
      }
    });

  StartGate gate;
  std::vector<std::thread> workers;
  for (int th = 0; th < kThreads; th++) {
    workers.emplace_back([&, th] {
      std::mt19937 rng(7 * th + 1);
      std::uniform_int_distribution<uint32_t> pct(0, 99), hot(0, prm.hot - 1),
          any(0, prm.nkeys - 1);
      gate.Wait();
      for (uint64_t n = 0; n < prm.ops_per_thread && !m.abort.load(std::memory_order_relaxed);
           n++) {
        uint32_t ki = pct(rng) < prm.hot_percent ? hot(rng) : any(rng);
        int64_t delta = pct(rng) < 30 ? -1 : 1;
        m.Count(ki, delta, pct(rng) < 10, stats[th]);
      }
    });
  }
  {
    PreemptionNoise noise(2, std::chrono::microseconds(50));
    gate.Open();
    for (auto& w : workers) w.join();
  }
  stop.store(true, std::memory_order_release);
  for (auto& b : background) b.join();
  // At rest, before the last flush (the flushers caught up: make resident keys dirty again):
  // each sum entry holds what its keys' entries in its partition hold beyond the table
  // (value - flushed), and every key that does has its sum entry.
  uint64_t touched = 0;
  for (uint32_t k = 0; k < prm.nkeys; k++) touched += m.AddIfResident(k, 3, stats[kThreads]);
  // On a loaded machine the sweep may have evicted every key by now: then one is counted into
  // (loaded, dirty), so that the check below has a resident key to look at.
  if (touched == 0) {
    m.Count(0, 3, false, stats[kThreads]);
    touched = 1;
  }
  {
    CounterTable& t = m.table();
    std::map<std::tuple<int32_t, int64_t, uint32_t>, int64_t> beyond, sums;
    for (uint32_t i = 0; i < t.capacity(); i++) {
      const Entry& e = t.at(i);
      if (e.state.load() != sc::kResident) continue;
      uint32_t part = CounterTable::PartitionOf(e.hash.load());
      if (sc::IsSum(e.id)) {
        EXPECT_EQ(e.sum_wrapped.load(), 0u);
        sums[{-e.id.counter, e.id.bucket, part}] += e.value.load();
        EXPECT_EQ(e.id.key, int64_t(part)) << "a sum entry outside its partition";
      } else if (e.value.load() != e.flushed.load()) {
        beyond[{e.id.counter, e.id.bucket, part}] += e.value.load() - e.flushed.load();
      }
    }
    uint64_t mismatched = 0, dirty_sums = 0;
    for (const auto& [group, value] : beyond) {
      auto it = sums.find(group);
      if (it == sums.end() || it->second != value) mismatched++;
    }
    for (const auto& [group, value] : sums) {
      if (value != 0) dirty_sums++;
      auto it = beyond.find(group);
      if ((it == beyond.end() ? 0 : it->second) != value) mismatched++;
    }
    EXPECT_EQ(mismatched, 0u) << "sum entries that differ from their keys";
    std::printf("[   info   ] at rest: %zu groups of keys beyond the table, %llu sum entries not 0\n",
                beyond.size(), (unsigned long long)dirty_sums);
  }
  uint64_t last = 0;
  m.Flush(&last, true);  // flush everything that is left

  WorkerStats total;
  total.net.assign(prm.nkeys, 0);
  std::string first_error;
  for (auto& s : stats) {
    for (uint32_t k = 0; k < prm.nkeys; k++) total.net[k] += s.net[k];
    total.hits += s.hits;
    total.loads += s.loads;
    total.lost_races += s.lost_races;
    total.evictions += s.evictions;
    total.no_room += s.no_room;
    total.loading_waits += s.loading_waits;
    total.commits += s.commits;
    total.aborts += s.aborts;
    total.pinned_adds += s.pinned_adds;
    total.errors += s.errors;
    if (first_error.empty()) first_error = s.first_error;
  }
  std::printf(
      "[   info   ] capacity %u keys %u: %llu operations, %llu loads, %llu evictions, %llu lost "
      "races, %llu without room, %llu loading waits, %llu commits, %llu aborts, %llu pinned "
      "adds; flushers: %llu + %llu entries; %llu purges\n",
      prm.capacity, prm.nkeys, (unsigned long long)total.hits, (unsigned long long)total.loads,
      (unsigned long long)total.evictions, (unsigned long long)total.lost_races,
      (unsigned long long)total.no_room, (unsigned long long)total.loading_waits,
      (unsigned long long)total.commits, (unsigned long long)total.aborts,
      (unsigned long long)total.pinned_adds, (unsigned long long)flushed[0],
      (unsigned long long)flushed[1], (unsigned long long)purges);

  ASSERT_FALSE(m.abort.load()) << first_error;
  EXPECT_EQ(total.errors, 0u) << first_error;

  // Every delta counted exactly once: no lost and no double counts.
  const std::map<IdTuple, int64_t> values = m.Values();
  uint64_t wrong = 0;
  for (uint32_t k = 0; k < prm.nkeys; k++) {
    auto it = values.find(Id(m.key(k)));
    int64_t stored = it == values.end() ? 0 : it->second;
    if (stored != total.net[k]) {
      if (wrong++ < 10)
        ADD_FAILURE() << "key #" << k << ": table holds " << stored << ", net of the deltas "
                      << total.net[k];
    }
  }
  EXPECT_EQ(wrong, 0u) << "keys with a lost or double count";
  EXPECT_EQ(total.hits, uint64_t(kThreads) * prm.ops_per_thread + touched)
      << "every operation applied once";
  EXPECT_LE(values.size(), size_t(prm.nkeys)) << "counts went to keys nobody counted into";

  // The table is consistent at rest: every used entry is resident under a distinct key, clean,
  // settled, unpinned, unreserved and agrees with the values table; nothing leaked in the
  // kOwned/kLoading states.
  CounterTable& t = m.table();
  uint64_t resident = 0, sums = 0;
  for (uint32_t i = 0; i < t.capacity(); i++) {
    const Entry& e = t.at(i);
    if (e.state.load() != sc::kResident || !sc::IsSum(e.id)) continue;
    sums++;
    EXPECT_EQ(e.value.load(), 0) << "a sum entry holds something once every key is flushed";
  }
  for (uint32_t k = 0; k < prm.nkeys; k++) {
    uint32_t i = t.Find(m.key(k), m.hash(k));
    if (i == kNil) continue;
    resident++;
    const Entry& e = t.at(i);
    EXPECT_EQ(e.state.load(), sc::kResident) << k;
    EXPECT_EQ(e.in_flush.load(), 0u) << k;
    EXPECT_EQ(e.pins.load(), 0u) << k;
    EXPECT_EQ(e.reserved_up.load(), 0) << k;
    EXPECT_EQ(e.reserved_down.load(), 0) << k;
    EXPECT_EQ(e.value.load(), e.flushed.load()) << k;
    EXPECT_EQ(e.value.load(), total.net[k]) << k;
  }
  EXPECT_EQ(t.used(), resident + sums) << "entries allocated but not linked (leaked)";
  EXPECT_LE(t.used(), uint64_t(prm.capacity));
  EXPECT_EQ(uint64_t(t.OccupancyOf(kDb)), resident + sums)
      << "the database's occupancy drifted from its linked entries (loads, evictions, purges)";

  // The interesting paths really ran, otherwise the counts above prove little.
  EXPECT_GT(total.evictions, uint64_t(prm.capacity)) << "eviction path barely exercised";
  EXPECT_GT(total.hits, total.loads);
  EXPECT_GT(total.commits, 0u);
  EXPECT_GT(total.aborts, 0u);
  EXPECT_GT(total.pinned_adds, 0u);
  EXPECT_GT(flushed[0] + flushed[1], uint64_t(prm.capacity));
}

TEST(ServerProtocol, EveryDeltaCountedOnceUnderHeavyEviction) {
  RunServer({/*capacity=*/64, /*nkeys=*/1024, /*hot=*/32, /*hot_percent=*/70, Scaled(100'000),
             /*purge_every_ms=*/5});
}

TEST(ServerProtocol, EveryDeltaCountedOnceWithHotKeys) {
  RunServer({/*capacity=*/512, /*nkeys=*/4096, /*hot=*/128, /*hot_percent=*/90, Scaled(200'000),
             /*purge_every_ms=*/0});
}

}  // namespace
