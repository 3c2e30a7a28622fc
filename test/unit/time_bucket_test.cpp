// Unit tests of the bucket arithmetic (src/core/time_bucket.*), against libc's calendar (gmtime_r).
#include "core/time_bucket.hpp"

#include <gtest/gtest.h>

#include <ctime>
#include <random>

namespace sc {
namespace {

constexpr int64_t kSecond = 1000000;
constexpr int64_t kHour = 3600 * kSecond;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kUnixTo2000 = INT64_C(946684800);  // seconds from 1970-01-01 to 2000-01-01
// PostgreSQL's valid timestamp range: 4714-11-24 BC to 294277-01-01.
constexpr int64_t kMin = INT64_C(-211813488000000000);
constexpr int64_t kMax = INT64_C(9223371331200000000) - 1;

// A PostgreSQL timestamp from a UTC calendar time.
int64_t At(int year, int month, int day, int hour = 0, int minute = 0, int second = 0) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return (int64_t(timegm(&tm)) - kUnixTo2000) * kSecond;
}

std::tm Calendar(int64_t at) {
  time_t t = time_t(at / kSecond + kUnixTo2000 - (at % kSecond < 0 ? 1 : 0));
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}

BucketWidth Width(int32_t months, int32_t days, int64_t micros) {
  BucketWidth w{};
  EXPECT_EQ(MakeBucketWidth(months, days, micros, &w), WidthError::kNone);
  return w;
}

int64_t Start(const BucketWidth& w, int64_t at) {
  int64_t start = 0;
  EXPECT_TRUE(BucketStart(w, at, kMin, kMax, &start));
  return start;
}

TEST(TimeBucket, WidthsOfOneUnit) {
  BucketWidth w{};
  EXPECT_EQ(MakeBucketWidth(1, 0, 0, &w), WidthError::kNone);
  EXPECT_EQ(w.months, 1);
  EXPECT_EQ(MakeBucketWidth(0, 7, 0, &w), WidthError::kNone);
  EXPECT_EQ(w.micros, 7 * kDay);
  EXPECT_EQ(MakeBucketWidth(0, 0, 90 * 60 * kSecond, &w), WidthError::kNone);
  EXPECT_EQ(w.micros, 90 * 60 * kSecond);
}

TEST(TimeBucket, RefusesMixedAndNonPositiveWidths) {
  BucketWidth w{};
  EXPECT_EQ(MakeBucketWidth(1, 0, 2 * kHour, &w), WidthError::kMixedUnits);
  EXPECT_EQ(MakeBucketWidth(1, 1, 0, &w), WidthError::kMixedUnits);
  EXPECT_EQ(MakeBucketWidth(0, 1, 2 * kHour, &w), WidthError::kMixedUnits);
  EXPECT_EQ(MakeBucketWidth(0, 0, 0, &w), WidthError::kNotPositive);
  EXPECT_EQ(MakeBucketWidth(0, 0, -kHour, &w), WidthError::kNotPositive);
  EXPECT_EQ(MakeBucketWidth(-1, 0, 0, &w), WidthError::kNotPositive);
  EXPECT_EQ(MakeBucketWidth(0, -1, 0, &w), WidthError::kNotPositive);
  // A negative part is not positive, even beside a positive one.
  EXPECT_EQ(MakeBucketWidth(1, 0, -kHour, &w), WidthError::kNotPositive);
}

TEST(TimeBucket, FixedWidths) {
  BucketWidth hour = Width(0, 0, kHour);
  EXPECT_EQ(Start(hour, At(2026, 11, 21, 10, 30, 5)), At(2026, 11, 21, 10));
  EXPECT_EQ(Start(hour, At(2026, 11, 21, 10)), At(2026, 11, 21, 10));
  EXPECT_EQ(Start(hour, At(2026, 11, 21, 10) - 1), At(2026, 11, 21, 9));
  // Before 2000, division rounds down, not toward zero.
  EXPECT_EQ(Start(hour, At(1999, 12, 31, 23, 59, 59)), At(1999, 12, 31, 23));
  EXPECT_EQ(Start(Width(0, 1, 0), At(1969, 7, 20, 20, 17)), At(1969, 7, 20));
  // Weeks start on Mondays: 2026-11-21 is a Saturday, 2026-11-16 a Monday.
  EXPECT_EQ(Start(Width(0, 7, 0), At(2026, 11, 21, 12)), At(2026, 11, 16));
  EXPECT_EQ(Start(Width(0, 7, 0), At(2026, 11, 16)), At(2026, 11, 16));
  EXPECT_EQ(Start(Width(0, 0, 15 * 60 * kSecond), At(2026, 1, 1, 0, 44, 59)),
            At(2026, 1, 1, 0, 30));
}

TEST(TimeBucket, CalendarWidths) {
  BucketWidth month = Width(1, 0, 0);
  EXPECT_EQ(Start(month, At(2024, 2, 29, 23, 59, 59)), At(2024, 2, 1));
  EXPECT_EQ(Start(month, At(2024, 3, 1)), At(2024, 3, 1));
  EXPECT_EQ(Start(month, At(2024, 3, 1) - 1), At(2024, 2, 1));
  EXPECT_EQ(Start(month, At(1999, 12, 31, 12)), At(1999, 12, 1));
  EXPECT_EQ(Start(month, At(1900, 3, 1) - 1), At(1900, 2, 1));
  EXPECT_EQ(Start(Width(3, 0, 0), At(2026, 11, 21)), At(2026, 10, 1));  // quarters
  EXPECT_EQ(Start(Width(3, 0, 0), At(1999, 2, 1)), At(1999, 1, 1));
  EXPECT_EQ(Start(Width(12, 0, 0), At(2026, 11, 21)), At(2026, 1, 1));  // years
  EXPECT_EQ(Start(Width(12, 0, 0), At(1970, 1, 1) - 1), At(1969, 1, 1));
  EXPECT_EQ(Start(Width(24, 0, 0), At(2027, 6, 1)), At(2026, 1, 1));
}

// Every bucket holds its time, starts on the unit's boundary, and the next one starts after it.
TEST(TimeBucket, AgreesWithLibcCalendar) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> times(At(1901, 1, 1), At(2099, 12, 31));
  const int32_t month_widths[] = {1, 2, 3, 6, 12, 18};
  const int64_t fixed_widths[] = {kSecond, 60 * kSecond, kHour, 6 * kHour, kDay, 7 * kDay};
  for (int i = 0; i < 100000; i++) {
    int64_t at = times(rng);
    for (int32_t m : month_widths) {
      int64_t start = Start(Width(m, 0, 0), at);
      std::tm s = Calendar(start), a = Calendar(at);
      ASSERT_EQ(s.tm_mday, 1);
      ASSERT_EQ(s.tm_hour + s.tm_min + s.tm_sec, 0);
      int64_t index = int64_t(s.tm_year - 100) * 12 + s.tm_mon;
      ASSERT_EQ(((index % m) + m) % m, 0) << "width " << m << " months";
      int64_t at_index = int64_t(a.tm_year - 100) * 12 + a.tm_mon;
      ASSERT_LE(index, at_index);
      ASSERT_GT(index + m, at_index);
    }
    for (int64_t w : fixed_widths) {
      int64_t start = Start(Width(0, 0, w), at);
      ASSERT_LE(start, at);
      ASSERT_GT(start + w, at);
      ASSERT_EQ((((start - 2 * kDay) % w) + w) % w, 0);
    }
  }
}

TEST(TimeBucket, RefusesStartsOutOfRange) {
  int64_t start;
  // The first bucket of a wide width begins before the first valid timestamp.
  EXPECT_FALSE(BucketStart(Width(12000, 0, 0), kMin, kMin, kMax, &start));
  EXPECT_FALSE(BucketStart(Width(0, 0, INT64_MAX), kMin, kMin, kMax, &start));
  EXPECT_TRUE(BucketStart(Width(1, 0, 0), kMax, kMin, kMax, &start));
  EXPECT_LE(start, kMax);
  EXPECT_TRUE(BucketStart(Width(0, 0, kHour), kMax, kMin, kMax, &start));
  EXPECT_TRUE(BucketStart(Width(0, 0, kSecond), kMin, kMin, kMax, &start));
  EXPECT_EQ(start, kMin);
}

}  // namespace
}  // namespace sc
