// Concurrent adds to one resident sketch (src/core/sketch_block.hpp): 8 threads add elements
// that overlap, through the explicit form and its promotion, and the block ends with exactly the
// registers one thread adding them all would leave, and `changes` at least the number of adds
// that changed the set (none lost).
#include "core/sketch_block.hpp"
#include "core/murmur3.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace {

TEST(SketchBlockThreads, ConcurrentAddsLoseNoRegister) {
  const sc::HllShape shape{14, 5, -1, true};
  for (int round = 0; round < 4; round++) {
    auto b = std::make_unique<sc::SketchBlock>();
    ASSERT_TRUE(sc::InitSketchBlock(*b, shape));
    std::mutex mutex;
    std::atomic<uint64_t> changed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++)
      threads.emplace_back([&, t] {
        // Thread t adds 20,000 elements, half of them also another thread's.
        for (int64_t v = t * 10000; v < t * 10000 + 20000; v++)
          if (sc::SketchAdd(*b, mutex, sc::HllHashBigint(v))) changed.fetch_add(1);
      });
    for (std::thread& t : threads) t.join();
    std::vector<uint8_t> want(sc::HllRegisterCount(shape), 0);
    for (int64_t v = 0; v < 90000; v++)
      (void)sc::HllDenseAdd(want.data(), shape, sc::HllHashBigint(v));
    std::vector<uint8_t> got(want.size());
    std::vector<int64_t> hashes(sc::HllExplicitLimit(shape));
    bool dense = false;
    uint64_t count = 0;
    uint64_t changes = sc::SketchCopy(*b, mutex, &dense, hashes.data(), &count, got.data());
    ASSERT_TRUE(dense);
    EXPECT_EQ(got, want) << "round " << round;
    EXPECT_EQ(changes, changed.load()) << "every change counted once";
  }
}

}  // namespace
