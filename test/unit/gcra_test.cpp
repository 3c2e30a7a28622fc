// Unit tests for the limiter's steps (src/core/gcra.hpp): the scenarios of issue 48's tests, run
// on the pure step with a clock the test moves, and the step applied by concurrent callers.
#include "core/gcra.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using sc::GcraAnswer;
using sc::GcraGiveBack;
using sc::GcraLimit;
using sc::GcraStep;
using sc::MakeGcraLimit;

constexpr int64_t kSecond = 1000000;
constexpr int64_t kHour = 3600 * kSecond;
constexpr int64_t kNow = 850000000 * kSecond;  // a moment of 2026 on PostgreSQL's scale

GcraLimit Limit(int64_t rate, int64_t per, int64_t burst) {
  GcraLimit limit{};
  EXPECT_TRUE(MakeGcraLimit(rate, per, burst, &limit)) << rate << " per " << per;
  return limit;
}

// Calls of `cost` at `now` until one is refused; returns how many were admitted, *tat updated.
int Admitted(int64_t* tat, int64_t now, int64_t cost, const GcraLimit& limit, int most = 1000000) {
  int n = 0;
  while (n < most) {
    GcraAnswer a = GcraStep(*tat, now, cost, limit);
    if (!a.allowed) break;
    *tat = a.tat;
    n++;
  }
  return n;
}

TEST(Gcra, MakeLimit) {
  GcraLimit limit{};
  ASSERT_TRUE(MakeGcraLimit(1, kHour, 5, &limit));
  EXPECT_EQ(limit.interval, kHour);
  EXPECT_EQ(limit.tolerance, 5 * kHour);
  ASSERT_TRUE(MakeGcraLimit(7, kSecond, 7, &limit));
  EXPECT_EQ(limit.interval, 142858);  // rounded up: never faster than 7 per second
  EXPECT_FALSE(MakeGcraLimit(0, kSecond, 1, &limit));
  EXPECT_FALSE(MakeGcraLimit(1, 0, 1, &limit));
  EXPECT_FALSE(MakeGcraLimit(1, kSecond, 0, &limit));
  EXPECT_FALSE(MakeGcraLimit(-1, kSecond, 1, &limit));
  EXPECT_FALSE(MakeGcraLimit(2000000, kSecond, 1, &limit));  // a unit under a microsecond
  EXPECT_FALSE(MakeGcraLimit(1, kHour * 24 * 366 * 1001, 1, &limit));  // beyond 1,000 years
  EXPECT_FALSE(MakeGcraLimit(1, INT64_MAX, 2, &limit));                // the product overflows
}

// Burst 5, one per hour: five at once, the sixth waits an hour, and says so.
TEST(Gcra, BurstThenRate) {
  GcraLimit limit = Limit(1, kHour, 5);
  int64_t tat = 0;
  EXPECT_EQ(Admitted(&tat, kNow, 1, limit), 5);
  EXPECT_EQ(tat, kNow + 5 * kHour);
  GcraAnswer sixth = GcraStep(tat, kNow, 1, limit);
  EXPECT_FALSE(sixth.allowed);
  EXPECT_EQ(sixth.tat, tat);
  EXPECT_EQ(sixth.remaining, 0);
  EXPECT_EQ(sixth.retry_after, kHour);
  EXPECT_EQ(sixth.reset_after, 5 * kHour);
  // A minute later it waits 59 minutes; an hour later one more fits, and no second one.
  EXPECT_EQ(GcraStep(tat, kNow + 60 * kSecond, 1, limit).retry_after, kHour - 60 * kSecond);
  EXPECT_EQ(Admitted(&tat, kNow + kHour, 1, limit), 1);
  // Five hours after that the key is full again: five more at once.
  EXPECT_EQ(Admitted(&tat, kNow + 7 * kHour, 1, limit), 5);
}

// 10 per second, burst 10: ten at once, then five more half a second later.
TEST(Gcra, SmoothRefill) {
  GcraLimit limit = Limit(10, kSecond, 10);
  int64_t tat = 0;
  EXPECT_EQ(Admitted(&tat, kNow, 1, limit), 10);
  EXPECT_EQ(Admitted(&tat, kNow + kSecond / 2, 1, limit), 5);
  EXPECT_EQ(Admitted(&tat, kNow + kSecond / 2, 1, limit), 0);
}

// A cost larger than what is left is refused whole and takes nothing; a cost above the burst
// never fits; a cost of 0 reads.
TEST(Gcra, CostsAndReads) {
  GcraLimit limit = Limit(1, kSecond, 10);
  int64_t tat = 0;
  GcraAnswer a = GcraStep(tat, kNow, 7, limit);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 3);
  EXPECT_EQ(a.reset_after, 7 * kSecond);
  tat = a.tat;
  GcraAnswer refused = GcraStep(tat, kNow, 4, limit);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.tat, tat);
  EXPECT_EQ(refused.remaining, 3);
  EXPECT_EQ(refused.retry_after, kSecond);
  GcraAnswer never = GcraStep(tat, kNow, 11, limit);
  EXPECT_FALSE(never.allowed);
  EXPECT_EQ(never.retry_after, GcraAnswer::kNever);
  EXPECT_EQ(never.tat, tat);
  GcraAnswer read = GcraStep(tat, kNow, 0, limit);
  EXPECT_TRUE(read.allowed);
  EXPECT_EQ(read.tat, tat);
  EXPECT_EQ(read.remaining, 3);
  EXPECT_EQ(read.reset_after, 7 * kSecond);
  // A fresh key reads full.
  GcraAnswer fresh = GcraStep(0, kNow, 0, limit);
  EXPECT_EQ(fresh.remaining, 10);
  EXPECT_EQ(fresh.reset_after, 0);
  EXPECT_EQ(fresh.tat, 0);
}

// A clock stepped back leaves the TAT beyond the tolerance: nothing fits until it passes, and the
// answers stay sane.
TEST(Gcra, ClockBack) {
  GcraLimit limit = Limit(1, kSecond, 2);
  int64_t tat = 0;
  EXPECT_EQ(Admitted(&tat, kNow, 1, limit), 2);
  GcraAnswer a = GcraStep(tat, kNow - 10 * kSecond, 1, limit);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.remaining, 0);
  EXPECT_EQ(a.retry_after, 11 * kSecond);
  EXPECT_EQ(a.reset_after, 12 * kSecond);
}

// A rolled-back cost comes back, but never makes a key fuller than full.
TEST(Gcra, GiveBack) {
  GcraLimit limit = Limit(1, kSecond, 5);
  int64_t tat = 0;
  EXPECT_EQ(Admitted(&tat, kNow, 1, limit), 5);
  tat = GcraGiveBack(tat, 2, limit, kNow);
  EXPECT_EQ(Admitted(&tat, kNow, 1, limit), 2);
  EXPECT_EQ(GcraGiveBack(kNow + kSecond, 3, limit, kNow), kNow);
}

// Concurrent callers applying the step by compare-and-swap on one TAT admit exactly the burst.
TEST(Gcra, ConcurrentCallersAdmitExactlyTheBurst) {
  GcraLimit limit = Limit(1, kHour, 1000);
  std::atomic<int64_t> tat{0};
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; i++) {
        int64_t old = tat.load();
        GcraAnswer a;
        do {
          a = GcraStep(old, kNow, 1, limit);
          if (!a.allowed) break;
        } while (!tat.compare_exchange_weak(old, a.tat));
        if (a.allowed) admitted++;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 1000);
  EXPECT_EQ(tat.load(), kNow + 1000 * kHour);
}

// per as an interval's fields: days are 24 hours; months have no fixed length.
TEST(Gcra, PerIsAFixedLength) {
  int64_t micros = 0;
  ASSERT_TRUE(sc::GcraPerMicros(0, 2, 3600000000, &micros));
  EXPECT_EQ(micros, 2 * 86400000000 + 3600000000);
  EXPECT_FALSE(sc::GcraPerMicros(1, 0, 0, &micros)) << "a month";
  EXPECT_FALSE(sc::GcraPerMicros(0, 2147483647, INT64_MAX, &micros)) << "past int64";
  ASSERT_TRUE(sc::GcraPerMicros(0, 0, -5, &micros));
  EXPECT_EQ(micros, -5) << "a negative one is read, and MakeGcraLimit refuses it";
  GcraLimit limit;
  EXPECT_FALSE(MakeGcraLimit(1, micros, 1, &limit));
}

}  // namespace
