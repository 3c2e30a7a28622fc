// time_bucket.hpp: the time buckets of a bucketed counter, in UTC.
//
// Pure C++ (no PostgreSQL header), unit-tested in test/unit. Times are PostgreSQL timestamps:
// microseconds since 2000-01-01 00:00 UTC.
//
// A width is a whole number of one unit: calendar months (a year is 12 months), or a fixed
// length (days, hours, minutes, seconds: in UTC a day is always 24 hours). A width that mixes
// the two ('1 month 2 hours'), or days with a time of day ('1 day 2 hours'), is refused: its
// buckets would not line up with the calendar any user has in mind.
//
// Buckets are aligned to 2000-01-03 00:00 UTC, a Monday, for fixed lengths (so '1 day' starts at
// midnight, '1 week' on Mondays: the same as date_bin(width, at, '2000-01-03')), and to January
// 2000 for months (so '3 months' are calendar quarters and '1 year' calendar years).
#pragma once

#include <cstdint>

namespace sc {

struct BucketWidth {
  int32_t months;  // > 0 for a calendar width, else 0
  int64_t micros;  // > 0 for a fixed width, else 0
};

enum class WidthError { kNone, kNotPositive, kMixedUnits };

// The width of an interval's fields (as PostgreSQL's Interval: months, days, microseconds).
WidthError MakeBucketWidth(int32_t months, int32_t days, int64_t micros,
                           BucketWidth* out) noexcept;

// The start of the bucket that holds `at`; false if it lies outside [min, max] (the caller's
// range of valid timestamps).
bool BucketStart(const BucketWidth& width, int64_t at, int64_t min, int64_t max,
                 int64_t* start) noexcept;

}  // namespace sc
