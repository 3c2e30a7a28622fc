// The shared ids of text keys (src/core/shared_key_cache.hpp) under threads that share and find
// keys of overlapping sets at once: a key found has its own id, never another's (run under
// ThreadSanitizer too).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/shared_key_cache.hpp"
#include "test_support.hpp"

namespace {

using sc_test::StdLocks;

TEST(SharedKeyCacheThreads, AFoundKeyHasItsOwnId) {
  constexpr uint32_t kSets = 16;
  constexpr int kKeys = 400;  // three times the slots: sets keep forgetting
  std::vector<sc::SharedKeySlot> slots(kSets * sc::kKeySetWays);
  sc::SharedKeyCache<StdLocks> cache(slots.data(), kSets, StdLocks());
  std::atomic<int> wrong{0}, found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; round++)
        for (int k = t; k < kKeys; k += 2) {
          std::string text = "/p/" + std::to_string(k);
          uint64_t hash = uint64_t(k % 7) << 32 | uint64_t(k % 5);  // few hashes: many collide
          int64_t id = cache.Find(1, 1, hash, text.data(), uint32_t(text.size()), 1);
          if (id == 0)
            cache.Insert(1, 1, hash, text.data(), uint32_t(text.size()), 1, k + 1);
          else if (id != k + 1)
            wrong++;
          else
            found++;
        }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(found.load(), 0);
}

}  // namespace
