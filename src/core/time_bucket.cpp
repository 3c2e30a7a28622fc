// time_bucket.cpp: bucket arithmetic (see time_bucket.hpp).
#include "core/time_bucket.hpp"

#include "core/cpp_only_file.hpp"

namespace sc {

namespace {

constexpr int64_t kMicrosPerDay = INT64_C(86400000000);
// 2000-01-03 00:00 UTC, a Monday, in PostgreSQL's microseconds.
constexpr int64_t kFixedOrigin = 2 * kMicrosPerDay;
// Days from 1970-01-01 to 2000-01-01.
constexpr int64_t kDaysTo2000 = 10957;

// Floor division for a positive divisor.
template <typename T>
T FloorDiv(T a, T b) noexcept {
  T q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Howard Hinnant's civil calendar algorithms (proleptic Gregorian, days since 1970-01-01).
void CivilFromDays(int64_t z, int64_t* year, int64_t* month) noexcept {
  z += 719468;
  const int64_t era = FloorDiv<int64_t>(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *month = mp < 10 ? mp + 3 : mp - 9;
  *year = yoe + era * 400 + (*month <= 2 ? 1 : 0);
}

int64_t DaysFromCivil(int64_t year, int64_t month) noexcept {  // the first of the month
  year -= month <= 2 ? 1 : 0;
  const int64_t era = FloorDiv<int64_t>(year, 400);
  const int64_t yoe = year - era * 400;
  const int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

WidthError MakeBucketWidth(int32_t months, int32_t days, int64_t micros,
                           BucketWidth* out) noexcept {
  if (months < 0 || days < 0 || micros < 0 || (months == 0 && days == 0 && micros == 0))
    return WidthError::kNotPositive;
  if ((months > 0 && (days > 0 || micros > 0)) || (days > 0 && micros > 0))
    return WidthError::kMixedUnits;
  if (months > 0) {
    *out = BucketWidth{months, 0};
    return WidthError::kNone;
  }
  __int128 total = __int128(days) * kMicrosPerDay + micros;
  if (total > INT64_MAX) return WidthError::kNotPositive;  // cannot happen for an Interval
  *out = BucketWidth{0, int64_t(total)};
  return WidthError::kNone;
}

bool BucketStart(const BucketWidth& width, int64_t at, int64_t min, int64_t max,
                 int64_t* start) noexcept {
  __int128 result;
  if (width.months > 0) {
    int64_t year, month;
    CivilFromDays(FloorDiv<int64_t>(at, kMicrosPerDay) + kDaysTo2000, &year, &month);
    int64_t index = (year - 2000) * 12 + (month - 1);  // months since January 2000
    int64_t first = FloorDiv<int64_t>(index, width.months) * width.months;
    int64_t days = DaysFromCivil(2000 + FloorDiv<int64_t>(first, 12),
                                 first - FloorDiv<int64_t>(first, 12) * 12 + 1);
    result = __int128(days - kDaysTo2000) * kMicrosPerDay;
  } else {
    __int128 offset = __int128(at) - kFixedOrigin;
    __int128 w = width.micros;
    __int128 q = offset / w;
    if (offset % w != 0 && offset < 0) q -= 1;
    result = kFixedOrigin + q * w;
  }
  if (result < min || result > max) return false;
  *start = int64_t(result);
  return true;
}

}  // namespace sc
