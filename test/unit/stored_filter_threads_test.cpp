// The filter of stored keys (src/core/stored_filter.hpp) under threads: readers look up keys that
// every rebuild's scan holds while a rebuilder clears and rebuilds the filter again and again, and
// an inserter adds keys as the insert trigger does: no reader is ever told "never stored" of a
// key the table holds (run under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/stored_filter.hpp"

namespace {

TEST(StoredFilterThreads, NoStoredKeyIsEverNeverStored) {
  constexpr uint64_t kWords = 64;  // small: every rebuild clears words the readers read
  constexpr int kKeys = 512;
  constexpr uint32_t kTable = 16384;
  std::vector<std::atomic<uint64_t>> words(kWords);
  sc::StoredFilter f;
  sc::InitStoredFilter(f, words.data(), kWords);
  auto hash = [](int64_t key) { return sc::StoredKeyHash(1, key, sc::kNoBucket); };
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, rebuilds{0};
  std::atomic<uint64_t> answered{0};  // passes over the keys that began while it was valid
  std::atomic<int> readers_ready{0};
  std::vector<std::thread> threads;
  // The rebuilder: every key is in the table (the scan adds them all).
  threads.emplace_back([&] {
    while (readers_ready.load() < 2) std::this_thread::yield();
    for (int round = 0; round < 100000; round++) {
      uint64_t token;
      if (!sc::BeginRebuild(f, 7, &token)) continue;
      for (int64_t k = 0; k < kKeys; k++) sc::AddStored(f, hash(k));
      if (!sc::FinishRebuild(f, 7, token, 1, kTable)) continue;
      // The first time, valid until a reader answered while it was (so the readers did).
      if (rebuilds++ == 0)
        while (answered.load() == 0) std::this_thread::yield();
    }
    stop = true;
  });
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&, t] {
      readers_ready++;
      while (!stop.load()) {
        bool valid = sc::StoredFilterValid(f);
        for (int64_t k = t; k < kKeys; k += 2)
          if (!sc::MayBeStored(f, hash(k), 1, kTable)) wrong++;
        if (valid) answered++;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(rebuilds.load(), 0) << "the filter was valid at times";
  EXPECT_GT(answered.load(), 0u) << "the readers ran while it was";
}

}  // namespace
