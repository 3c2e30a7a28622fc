// Unit tests for sc::CheckedAdd (src/core/checked_math.hpp).
#include "core/checked_math.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using sc::CheckedAdd;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kSentinel = 0x5A5A5A5A5A5A5A5ALL;

// Expects a + b == want, computed without overflow.
void ExpectSum(int64_t a, int64_t b, int64_t want) {
  int64_t out = kSentinel;
  EXPECT_TRUE(CheckedAdd(a, b, &out)) << a << " + " << b;
  EXPECT_EQ(out, want) << a << " + " << b;
}

// Expects a + b to be refused, leaving the output untouched.
void ExpectOverflow(int64_t a, int64_t b) {
  int64_t out = kSentinel;
  EXPECT_FALSE(CheckedAdd(a, b, &out)) << a << " + " << b;
  EXPECT_EQ(out, kSentinel) << "*out written on overflow of " << a << " + " << b;
}

TEST(CheckedAdd, Normal) {
  ExpectSum(0, 0, 0);
  ExpectSum(1, 2, 3);
  ExpectSum(40, 2, 42);
  ExpectSum(1'000'000'000'000LL, 234, 1'000'000'000'234LL);
  ExpectSum(kMax - 1, 1, kMax);  // exactly reaches the maximum
  ExpectSum(kMax, 0, kMax);
}

TEST(CheckedAdd, Negatives) {
  ExpectSum(-1, -2, -3);
  ExpectSum(5, -7, -2);
  ExpectSum(-5, 7, 2);
  ExpectSum(kMin + 1, -1, kMin);  // exactly reaches the minimum
  ExpectSum(kMin, 0, kMin);
  ExpectSum(kMax, kMin, -1);  // opposite signs never overflow
  ExpectSum(kMin, kMax, -1);
  ExpectSum(kMin, 1, kMin + 1);
}

TEST(CheckedAdd, MaxPlusOneOverflows) {
  ExpectOverflow(kMax, 1);
  ExpectOverflow(1, kMax);
  ExpectOverflow(kMax, kMax);
  ExpectOverflow(kMax / 2 + 1, kMax / 2 + 1);
}

TEST(CheckedAdd, MinMinusOneOverflows) {
  ExpectOverflow(kMin, -1);
  ExpectOverflow(-1, kMin);
  ExpectOverflow(kMin, kMin);
  ExpectOverflow(kMin / 2 - 1, kMin / 2);
}

TEST(CheckedAdd, OutputUntouchedOnOverflowEvenWhenAliased) {
  // Add's CAS loop passes its own accumulator; a refused add must not clobber it.
  int64_t v = kMax;
  EXPECT_FALSE(CheckedAdd(v, 1, &v));
  EXPECT_EQ(v, kMax);
  v = kMin;
  EXPECT_FALSE(CheckedAdd(v, -1, &v));
  EXPECT_EQ(v, kMin);
  v = 10;
  EXPECT_TRUE(CheckedAdd(v, -11, &v));
  EXPECT_EQ(v, -1);
}

}  // namespace
