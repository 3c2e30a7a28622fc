// gcra.hpp: the generic cell rate algorithm of a limiter (issue 48's sc_throttle), as pure steps.
//
// Pure C++ (no PostgreSQL header), shared by the buffer and the unit tests. A limiter key keeps one
// number, its theoretical arrival time (TAT, in microseconds on PostgreSQL's timestamp scale): the
// moment at which the key would be full again. A call of cost c at `now` is admitted when, after
// it, the TAT runs at most the tolerance ahead of now:
//
//   base    = max(TAT, now)              (a key full again counts from now)
//   new TAT = base + c × interval        (interval: the emission interval, per / rate)
//   allowed = new TAT − now ≤ tolerance  (tolerance: burst × interval)
//
// So a fresh key admits exactly `burst` units at once and then one unit per interval, smoothly; a
// refused call changes nothing. The interval is per / rate rounded up to a whole microsecond: a
// burst is exact, and the sustained rate is at most `rate` per `per` (less by under a microsecond
// per unit). The step is the function a compare-and-swap loop applies to the stored TAT, so that
// concurrent callers on one key admit exactly what a serial order would.
#pragma once

#include <cstdint>

#include "core/core_assert.hpp"

namespace sc {

// The longest tolerance a limit may have (1,000 years, as the longest retention): TATs stay within
// now + this, so every sum below stays far inside int64.
constexpr int64_t kGcraMaxTolerance = 1000LL * 366 * 24 * 3600 * 1000000;

struct GcraLimit {
  int64_t interval;   // microseconds per unit, at least 1
  int64_t burst;      // units a full key admits at once, at least 1
  int64_t tolerance;  // interval × burst: how far the TAT may run ahead of now
};

// The limit of `rate` units per `per_us` microseconds with a burst of `burst`, or false when one
// is not positive, a unit would take less than a microsecond, or the tolerance (the time a full
// burst takes to come back) is longer than kGcraMaxTolerance.
inline bool MakeGcraLimit(int64_t rate, int64_t per_us, int64_t burst, GcraLimit* out) noexcept {
  if (rate <= 0 || per_us <= 0 || burst <= 0 || per_us < rate) return false;
  int64_t interval = per_us / rate + (per_us % rate != 0 ? 1 : 0);
  int64_t tolerance;
  if (__builtin_mul_overflow(interval, burst, &tolerance) || tolerance > kGcraMaxTolerance)
    return false;
  *out = GcraLimit{interval, burst, tolerance};
  return true;
}

// The span of a limit's `per`, given as an interval's fields, in microseconds: false for one with
// months (not a fixed length) or past int64.
inline bool GcraPerMicros(int32_t months, int32_t days, int64_t time, int64_t* out) noexcept {
  int64_t day_micros;
  if (months != 0 || __builtin_mul_overflow(int64_t(days), int64_t(86400000000), &day_micros))
    return false;
  return !__builtin_add_overflow(day_micros, time, out);
}

// What a call learns. Durations in microseconds; kNever for a cost that can never fit (above the
// burst).
struct GcraAnswer {
  static constexpr int64_t kNever = -1;
  bool allowed;
  int64_t tat;          // the TAT to store: changed only when allowed with a cost above 0
  int64_t remaining;    // whole units that would still be admitted at once, after this call
  int64_t retry_after;  // 0 when allowed; else until this cost would fit (kNever: never)
  int64_t reset_after;  // until the key is full again, after this call
};

// One call of `cost` (0: a read, which takes nothing) on a key whose stored TAT is `tat` (0, or
// any moment at or before now, for a full key), at `now`.
inline GcraAnswer GcraStep(int64_t tat, int64_t now, int64_t cost,
                           const GcraLimit& limit) noexcept {
  SC_ASSERT(cost >= 0 && limit.interval >= 1 && limit.tolerance == limit.interval * limit.burst);
  int64_t base = tat > now ? tat : now;
  int64_t ahead = base - now;  // how far the stored TAT runs ahead: 0 for a full key
  // A clock stepped back can leave more than the tolerance ahead: nothing fits until it passes.
  int64_t free = ahead >= limit.tolerance ? 0 : limit.tolerance - ahead;
  if (cost > limit.burst)
    return GcraAnswer{false, tat, free / limit.interval, GcraAnswer::kNever, ahead};
  int64_t need = cost * limit.interval;  // at most the tolerance: fits
  if (need > free)  // it fits once now has moved until ahead + need is the tolerance
    return GcraAnswer{false, tat, free / limit.interval, ahead + need - limit.tolerance, ahead};
  if (cost == 0) return GcraAnswer{true, tat, free / limit.interval, 0, ahead};
  return GcraAnswer{true, base + need, (free - need) / limit.interval, 0, ahead + need};
}

// A transactional call that rolled back gives its cost back: the TAT it left, less what it took
// (never below `floor`, the moment before which the key counts as full: a give-back cannot make a
// key fuller than full).
inline int64_t GcraGiveBack(int64_t tat, int64_t cost, const GcraLimit& limit,
                            int64_t floor) noexcept {
  SC_ASSERT(cost >= 0);
  int64_t back, out;  // a transaction's costs of one key, given back at once, may pass the burst
  if (__builtin_mul_overflow(cost, limit.interval, &back) ||
      __builtin_sub_overflow(tat, back, &out))
    return floor;
  return out < floor ? floor : out;
}

}  // namespace sc
