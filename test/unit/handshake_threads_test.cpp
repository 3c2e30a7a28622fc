// Threaded tests of the shared-state handshakes around write-throughs, run from both sides at
// once (normally and under ThreadSanitizer, by run.sh):
//   - the write-through request (src/core/write_through_request.hpp): requesters that publish,
//     wait, get cancelled or withdraw; two flushers that take, write, fail whole turns, ask to
//     retry, or die holding requests (their requesters give them back); a drop that fails a
//     counter's requests; loaders, incrementers and a flush of the buffer beside them. Checked:
//     the values table holds exactly the deltas the requesters were told were counted (nothing
//     lost, nothing twice), a resident value never misses a write-through (no stale load), and the
//     open count always equals the requests PENDING or TAKEN.
//   - the partition holds (src/core/through_holds.hpp): batches that pin or hold and write
//     through, loaders and a flush: no key is linked while a batch writes it through, and every
//     value ends as the table's.
// The steps are the server's own; the locks are the server's partition lock over
// std::shared_mutex (CountedStdLocks) and std::mutex for the requests' spinlocks. Worker threads
// count problems; the main thread asserts after joining.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace sc_test;

using Proto = sc::Protocol<CountedStdLocks>;
using Requests = sc::WriteThroughs<StdRequests>;

constexpr uint32_t kDb = 7;
constexpr int kKeys = 8;
constexpr int kCancelled = 57014;
constexpr int kDropped = 42704;
// A wait that goes on for this many looks is stuck: the test fails instead of hanging.
constexpr int kStuckLooks = 20000000;

CounterKey KeyOf(int key, int32_t counter) { return Key(key, kDb, counter); }
int Slot(int key, int32_t counter) { return (counter - 3) * kKeys + key; }

struct Values {
  // The values table (stored) and what the requesters were told was counted (told), per key of
  // counters 3 and 4.
  std::atomic<int64_t> stored[2 * kKeys] = {};
  std::atomic<int64_t> told[2 * kKeys] = {};
};

// Loads k if it is not resident, as LoadEntry does: not while a write-through of k is open.
void LoadIfMissing(Proto& table, Requests& requests, Values& v, const CounterKey& k, int slot) {
  uint32_t hash = sc::HashCounterKey(k);
  int64_t ignored;
  uint64_t evicted = 0;
  if (!table.HasSum(k, hash)) {  // the sum entry first, as LoadEntry links it
    uint32_t spare =
        table.TakeFreeOrClean(kDb, false, 64, [](const Entry&) { return true; }, &evicted);
    if (spare == kNil) return;
    table.LinkSum(spare, k, hash);
  }
  if (table.ReadIfResident(k, hash, &ignored) != Probe::kMissing) return;
  uint32_t index =
      table.TakeFreeOrClean(kDb, false, 64, [](const Entry&) { return true; }, &evicted);
  if (index == kNil) return;
  sc::Loading loading{kNil, 0, 0};
  if (table.BeginLoad(index, k, hash,
                      [&] { return requests.OpenFor(k) ? LoadStart::kRetry : LoadStart::kLinked; },
                      &loading) != LoadStart::kLinked)
    return;
  int64_t stored = v.stored[slot].load();
  table.FinishLoad(loading, stored, [] { return false; });
}

// A flush of the buffer: every dirty entry's delta into the table, then settled.
void FlushBuffer(Proto& table, Values& v) {
  std::vector<std::pair<Claim, int>> claims;
  table.ClaimAll(
      kDb, [](const Entry&) { return true; }, [] { return true; },
      [&](const Claim& c, const Entry& e) {
        claims.emplace_back(c, Slot(int(e.id.key), e.id.counter));
      },
      [](uint32_t, uint32_t) {}, [](const Entry&) {});
  for (auto& [claim, slot] : claims) {
    v.stored[slot].fetch_add(claim.delta);
    table.SettleClaim(claim, true);
  }
}

TEST(WriteThroughRequests, EveryToldIncrementIsInTheTableOnceAndNoLoadIsStale) {
  constexpr int kRequesters = 4;
  constexpr int kFlushers = 2;
  const int kRounds = 4000;
  TableMemory mem(4);  // four entries for sixteen keys: misses, write-throughs, evictions
  CountedStdLocks locks;
  sc::OpenCounts open{};
  StdRequests slots(kRequesters);
  Values v;
  std::atomic<bool> gone[64] = {};  // flusher pids 1..63 that died
  std::atomic<int> next_pid{kFlushers + 1};
  std::atomic<int> requesters_left{kRequesters};
  std::atomic<int> stuck{0}, drift{0}, withdrawn{0}, failed{0}, done{0}, added{0};
  std::atomic<int> died{0}, given_back{0};
  std::atomic<bool> start{false};

  std::vector<std::thread> threads;
  for (int t = 0; t < kRequesters; t++)
    threads.emplace_back([&, t] {
      Proto table(mem.get(), locks);
      Requests requests(slots, &open);
      std::mt19937 rng(uint32_t(t) * 7919u + 1);
      while (!start.load()) std::this_thread::yield();
      for (int round = 0; round < kRounds; round++) {
        int key = int(rng() % kKeys);
        int32_t counter = 3 + int32_t(rng() % 2);
        CounterKey k = KeyOf(key, counter);
        uint32_t hash = sc::HashCounterKey(k);
        int64_t delta = 1 + int64_t(rng() % 5);
        int slot = Slot(key, counter);
        // The hot path first; a missing key is written through (a loader may beat us to it).
        int64_t value;
        bool overflow;
        Dirtied dirtied;
        if (table.AddIfResident(k, hash, delta, &value, &overflow, &dirtied) == Probe::kFound) {
          v.told[slot].fetch_add(delta);
          added++;
          continue;
        }
        if (!requests.PublishForKey(table, t, k, hash, delta)) {
          round--;  // resident (or loading) now: try the buffer again
          continue;
        }
        // Some requesters are cancelled, some give up waiting, at their first look or later.
        int cancel_at = rng() % 6 == 0 ? int(rng() % 4) : -1;
        int withdraw_at = rng() % 6 == 0 ? int(rng() % 4) : -1;
        for (int looks = 0;; looks++) {
          Look look = requests.LookAt(t, cancel_at >= 0 && looks >= cancel_at,
                                      withdraw_at >= 0 && looks >= withdraw_at);
          if (look.step == AwaitStep::kWithdrawn) {
            withdrawn++;
            break;
          }
          if (look.step == AwaitStep::kAnswered) {
            if (look.answer.state == sc::kRequestDone) {
              v.told[slot].fetch_add(delta);
              done++;
            } else {
              failed++;
            }
            break;
          }
          if (look.server > 0 && gone[look.server].load() &&
              requests.GiveBackFromGone(t, look.server))
            given_back++;
          if (looks > kStuckLooks) {
            stuck++;
            return;
          }
          std::this_thread::yield();
        }
      }
      requesters_left--;
    });
  for (int f = 0; f < kFlushers; f++)
    threads.emplace_back([&, f] {
      Proto table(mem.get(), locks);
      Requests requests(slots, &open);
      std::mt19937 rng(uint32_t(f) * 104729u + 3);
      int pid = f + 1;
      std::vector<int> taken(kRequesters);
      while (requesters_left.load() > 0) {
        int n = requests.TakePending(kDb, pid, taken.data());
        uint32_t fate = rng() % 16;
        if (n > 0 && fate == 0 && next_pid.load() < 63) {
          // This flusher dies holding its requests (its transaction rolled back); another starts.
          gone[pid].store(true);
          pid = next_pid++;
          died++;
          continue;
        }
        if (n > 0 && fate == 1) {
          for (int j = 0; j < n; j++) requests.GiveBack(taken[size_t(j)]);  // the turn failed
          continue;
        }
        for (int j = 0; j < n; j++) {
          int i = taken[size_t(j)];
          const ThroughRequest& r = requests.at(i);  // taken: ours to read
          int slot = Slot(int(r.key.key), r.key.counter);
          if (requests.CancelRequested(i)) {
            requests.Finish(i, sc::kRequestFailed, 0, kCancelled);
          } else if (rng() % 10 == 0) {
            requests.Finish(i, sc::kRequestPending, 0, 0);  // a lock timeout: retry later
          } else {
            int64_t result = v.stored[slot].fetch_add(r.delta) + r.delta;
            requests.Finish(i, sc::kRequestDone, result, 0);
          }
        }
        if (rng() % 4 == 0) FlushBuffer(table, v);
        std::this_thread::yield();
      }
    });
  // A loader and a flush of the buffer, a drop of counter 4's pending requests, and a look at the
  // open count with every request's mutex held.
  threads.emplace_back([&] {
    Proto table(mem.get(), locks);
    Requests requests(slots, &open);
    std::mt19937 rng(99);
    while (requesters_left.load() > 0) {
      int key = int(rng() % kKeys);
      int32_t counter = 3 + int32_t(rng() % 2);
      LoadIfMissing(table, requests, v, KeyOf(key, counter), Slot(key, counter));
      if (rng() % 64 == 0) requests.FailPending(kDb, 4, kDropped);
      if (rng() % 16 == 0 && slots.OpenDriftLocked(open) != 0) drift++;
      std::this_thread::yield();
    }
  });
  start.store(true);
  for (std::thread& th : threads) th.join();

  ASSERT_EQ(stuck.load(), 0) << "a requester waited forever";
  EXPECT_EQ(drift.load(), 0) << "the open count differed from the requests PENDING or TAKEN";
  EXPECT_EQ(open.Total(), 0u);
  for (int i = 0; i < kRequesters; i++) EXPECT_EQ(slots.at(i).state, sc::kRequestEmpty) << i;
  EXPECT_GT(done.load(), 0) << "nothing was written through: the test tested nothing";
  Proto table(mem.get(), locks);
  FlushBuffer(table, v);
  for (int slot = 0; slot < 2 * kKeys; slot++) {
    EXPECT_EQ(v.stored[slot].load(), v.told[slot].load())
        << "key slot " << slot << ": the table holds other than what the requesters were told";
    CounterKey k = KeyOf(slot % kKeys, 3 + slot / kKeys);
    int64_t value;
    if (table.ReadIfResident(k, sc::HashCounterKey(k), &value) == Probe::kFound) {
      EXPECT_EQ(value, v.stored[slot].load()) << "a resident value misses a write-through: a "
                                                 "load read the table while it was written";
    }
  }
  std::printf("write-throughs done %d, failed %d, withdrawn %d, given back from a dead flusher "
              "%d (%d died); buffered adds %d\n",
              done.load(), failed.load(), withdrawn.load(), given_back.load(), died.load(),
              added.load());
}

// A loader's step for a missing key k: an entry taken (a clean one evicted if none is free),
// linked unless a hold refuses it, and made resident with the table's value read after the link.
void LoadUnlessHeld(Proto& table, ThroughHolds& holds, const CounterKey& k,
                    const std::atomic<int64_t>& stored) {
  uint64_t evicted = 0;
  uint32_t index =
      table.TakeFreeOrClean(kDb, false, 64, [](const Entry&) { return true; }, &evicted);
  sc::Loading loading{kNil, 0, 0};
  if (index != kNil &&
      sc::BeginLoadUnlessHeld(table, holds, index, k, sc::HashCounterKey(k),
                              [] { return LoadStart::kLinked; },
                              &loading) == LoadStart::kLinked)
    table.FinishLoad(loading, stored.load(), [] { return false; });
}

TEST(PartitionHolds, NoKeyIsLoadedWhileABatchWritesItThrough) {
  constexpr int kLoaders = 2;
  constexpr int kBatchers = 2;
  const int kRounds = 2000;
  TableMemory mem(4);
  CountedStdLocks locks;
  OwnedHolds holds;
  // Six keys of one partition: a batch covers all of them.
  std::vector<CounterKey> keys;
  uint32_t p = CounterTable::PartitionOf(sc::HashCounterKey(KeyOf(0, 3)));
  for (int key = 0; keys.size() < 6; key++)
    if (CounterTable::PartitionOf(sc::HashCounterKey(KeyOf(key, 3))) == p)
      keys.push_back(KeyOf(key, 3));
  auto slot_of = [&](const CounterKey& k) {
    for (size_t s = 0; s < keys.size(); s++)
      if (keys[s] == k) return int(s);
    return -1;
  };
  std::atomic<int64_t> stored[6] = {};
  std::atomic<int64_t> expected[6] = {};
  // A flush of every dirty entry into `stored` (the table), settled as committed.
  auto flush = [&](Proto& table) {
    std::vector<Claim> claims;
    std::vector<int> slots;
    table.ClaimAll(
        kDb, [](const Entry&) { return true; }, [] { return true; },
        [&](const Claim& c, const Entry& e) {
          claims.push_back(c);
          slots.push_back(slot_of(e.id));
        },
        [](uint32_t, uint32_t) {}, [](const Entry&) {});
    for (size_t c = 0; c < claims.size(); c++) {
      stored[slots[c]].fetch_add(claims[c].delta);
      table.SettleClaim(claims[c], true);
    }
  };
  std::atomic<int> batchers_left{kBatchers};
  std::atomic<int> linked_while_held{0}, written_through{0}, pinned_adds{0};
  std::atomic<bool> start{false};

  std::vector<std::thread> threads;
  for (int b = 0; b < kBatchers; b++)
    threads.emplace_back([&] {
      Proto table(mem.get(), locks);
      while (!start.load()) std::this_thread::yield();
      for (int round = 0; round < kRounds; round++) {
        std::vector<bool> pinned(keys.size(), false);
        std::vector<std::pair<Pin, int>> pins;
        while (!sc::HoldPartitionForBatch(
            table, *holds, kDb, p, int(keys.size()),
            [&](int j, CounterKey* k, uint32_t* hash) {
              if (pinned[size_t(j)]) return false;
              *k = keys[size_t(j)];
              *hash = sc::HashCounterKey(*k);
              return true;
            },
            [&](int j, const Pin& pin) {
              pinned[size_t(j)] = true;
              pins.emplace_back(pin, j);
            }))
          std::this_thread::yield();
        for (size_t j = 0; j < keys.size(); j++) {
          if (pinned[j]) continue;
          // The flusher writes the key through; meanwhile no loader may link it.
          stored[j].fetch_add(1);
          expected[j].fetch_add(1);
          int64_t value;
          if (table.ReadIfResident(keys[j], sc::HashCounterKey(keys[j]), &value) !=
              Probe::kMissing)
            linked_while_held++;
          written_through++;
        }
        for (auto& [pin, j] : pins) {
          int64_t value;
          Dirtied dirtied;
          if (table.AddPinned(pin, 1, &value, &dirtied)) {
            expected[j].fetch_add(1);
            pinned_adds++;
          }
          table.Unpin(pin);
        }
        sc::ReleaseHold(*holds, kDb, p);
        // Room for the loaders between two batches.
        for (int y = 0; y < 50; y++) std::this_thread::yield();
      }
      batchers_left--;
    });
  for (int l = 0; l < kLoaders; l++)
    threads.emplace_back([&, l] {
      Proto table(mem.get(), locks);
      std::mt19937 rng(uint32_t(l) + 11);
      while (!start.load()) std::this_thread::yield();
      while (batchers_left.load() > 0) {
        const CounterKey& k = keys[rng() % keys.size()];
        uint32_t hash = sc::HashCounterKey(k);
        int64_t value;
        if (!table.HasSum(k, hash)) {  // the sum entry first, as LoadEntry links it
          uint64_t evicted = 0;
          uint32_t spare =
              table.TakeFreeOrClean(kDb, false, 64, [](const Entry&) { return true; }, &evicted);
          if (spare != kNil) table.LinkSum(spare, k, hash);
        }
        if (table.ReadIfResident(k, hash, &value) == Probe::kMissing)
          LoadUnlessHeld(table, *holds, k, stored[slot_of(k)]);
        if (rng() % 4 == 0) {
          // A flush: the pinned adds into the table, so that entries turn clean and evictable.
          flush(table);
        }
        std::this_thread::yield();
      }
    });
  start.store(true);
  for (std::thread& th : threads) th.join();

  EXPECT_EQ(linked_while_held.load(), 0) << "a key was loaded while a batch wrote it through";
  EXPECT_EQ(sc::HoldOf(*holds, kDb, p).load(), 0u) << "every hold was released";
  EXPECT_GT(written_through.load(), 0);
  EXPECT_GT(pinned_adds.load(), 0) << "no key was ever resident: the loaders never ran between";
  Proto table(mem.get(), locks);
  flush(table);
  for (size_t j = 0; j < keys.size(); j++) {
    EXPECT_EQ(stored[j].load(), expected[j].load()) << "key " << j;
    int64_t value;
    if (table.ReadIfResident(keys[j], sc::HashCounterKey(keys[j]), &value) == Probe::kFound) {
      EXPECT_EQ(value, stored[j].load()) << "key " << j << ": a stale load";
    }
  }
  std::printf("written through %d, pinned adds %d\n", written_through.load(), pinned_adds.load());
}

// Large commits (core/through_holds.hpp: counter holds) against loaders: a commit holds its
// counter, reserves the keys whose entries it must keep and writes the others' values into the
// table itself (stored), visible at its commit, then settles and releases; small commits of
// resident keys run between. No loader may link a key the commit writes itself until the hold is
// released, so every entry ends equal to the table.
TEST(CounterHolds, NoValueReadBeforeALargeCommitIsLinkedAfterIt) {
  constexpr int kLoaders = 2;
  constexpr int kCommitters = 2;
  const int kRounds = 2000;
  constexpr int kKeys = 6;
  TableMemory mem(16);  // room for every key: evictions only when a loader finds none free
  CountedStdLocks locks;
  OwnedHolds holds;
  std::atomic<int64_t> stored[kKeys] = {};
  std::atomic<int64_t> expected[kKeys] = {};
  std::atomic<int> committers_left{kCommitters};
  std::atomic<int> linked_while_held{0}, own_writes{0}, reserved{0};
  std::atomic<int> loaders_running{0};
  std::atomic<bool> start{false};
  std::vector<std::thread> threads;
  // The committers run kRounds, and on until a commit has reserved a key a loader linked (on a
  // busy machine the loaders may be scheduled late: the event is waited for, not a time).
  constexpr int kMaxRounds = 1000000;
  for (int c = 0; c < kCommitters; c++)
    threads.emplace_back([&] {
      Proto table(mem.get(), locks);
      while (!start.load() || loaders_running.load() < kLoaders) std::this_thread::yield();
      for (int round = 0; round < kMaxRounds && (round < kRounds || reserved.load() == 0);
           round++) {
        sc::RaiseCounterHold(*holds, kDb, 3);
        bool own[kKeys] = {};
        sc::Reservation reservations[kKeys];
        int nreserved = 0;
        for (int j = 0; j < kKeys; j++) {
          CounterKey k = KeyOf(j, 3);
          int64_t committed = 0;
          for (;;) {
            sc::Reserve r = sc::ReserveOrWriteOwn(table, *holds, k, sc::HashCounterKey(k), 1,
                                                  &reservations[nreserved], &committed,
                                                  sc::Bounds{}, sc::Write{});
            if (r == sc::Reserve::kLoading) {
              std::this_thread::yield();
              continue;
            }
            ASSERT_TRUE(r == sc::Reserve::kMissing || r == sc::Reserve::kReserved);
            own[j] = r == sc::Reserve::kMissing;
            if (r == sc::Reserve::kReserved) nreserved++;
            break;
          }
        }
        // The commit: its rows (own keys' values, the others' deltas) visible at once.
        for (int j = 0; j < kKeys; j++) {
          stored[j].fetch_add(1);
          expected[j].fetch_add(1);
        }
        for (int j = 0; j < kKeys; j++) {
          if (!own[j]) continue;
          int64_t value;
          CounterKey k = KeyOf(j, 3);
          if (table.ReadIfResident(k, sc::HashCounterKey(k), &value) != Probe::kMissing)
            linked_while_held++;
          own_writes++;
        }
        for (int r = 0; r < nreserved; r++) table.SettleReservation(reservations[r], true, 1);
        reserved += nreserved;
        sc::ReleaseCounterHold(*holds, kDb, 3);
        // Small commits of resident keys between: their settles leave entries a large commit
        // must reserve (commit_epoch set, not folded).
        for (int j = 0; j < kKeys; j++) {
          CounterKey k = KeyOf(j, 3);
          sc::Reservation r;
          int64_t committed = 0;
          if (table.ReserveIfResident(k, sc::HashCounterKey(k), 1, &r, &committed) !=
              sc::Reserve::kReserved)
            continue;
          stored[j].fetch_add(1);
          expected[j].fetch_add(1);
          table.SettleReservation(r, true, 1);
        }
        for (int y = 0; y < 50; y++) std::this_thread::yield();
      }
      committers_left--;
    });
  for (int l = 0; l < kLoaders; l++)
    threads.emplace_back([&, l] {
      Proto table(mem.get(), locks);
      std::mt19937 rng(uint32_t(l) + 23);
      while (!start.load()) std::this_thread::yield();
      loaders_running++;
      while (committers_left.load() > 0) {
        int j = int(rng() % kKeys);
        CounterKey k = KeyOf(j, 3);
        uint32_t hash = sc::HashCounterKey(k);
        int64_t value;
        // (Evicting clean, unpinned entries: a commit's settled value is in the table already.)
        if (table.ReadIfResident(k, hash, &value) == Probe::kMissing)
          LoadUnlessHeld(table, *holds, k, stored[j]);
        std::this_thread::yield();
      }
    });
  start.store(true);
  for (std::thread& th : threads) th.join();

  EXPECT_EQ(linked_while_held.load(), 0) << "a key was loaded while a commit wrote it itself";
  EXPECT_EQ(sc::CounterHoldOf(*holds, kDb, 3).load(), 0u) << "every hold was released";
  EXPECT_GT(own_writes.load(), 0);
  EXPECT_GT(reserved.load(), 0) << "no key was ever held by a commit: the loaders never ran";
  Proto table(mem.get(), locks);
  for (int j = 0; j < kKeys; j++) {
    EXPECT_EQ(stored[j].load(), expected[j].load()) << "key " << j;
    int64_t value;
    CounterKey k = KeyOf(j, 3);
    if (table.ReadIfResident(k, sc::HashCounterKey(k), &value) == Probe::kFound) {
      EXPECT_EQ(value, stored[j].load()) << "key " << j << ": a stale load";
    }
  }
  std::printf("own writes %d, reserved %d\n", own_writes.load(), reserved.load());
}

}  // namespace
