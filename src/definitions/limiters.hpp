// limiters.hpp: what makes a counter a rate limiter (sc_create's rate, per and burst; sc_throttle),
// and the errors of a call that takes a counter of the wrong kind.
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// sc_create's check of a limit (22023, saying what is wrong); a NULL burst is the rate.
GcraLimit CheckedLimit(int64 rate, const Interval* per, const int64* burst);

// A limiter's retention: its tolerance, as an interval (days and time).
Interval ToleranceInterval(const GcraLimit& limit);

// 42809: the function of fcinfo, which is not sc_throttle, was called on a limiter.
[[noreturn]] void ReportLimiter(const CounterDef& def, FunctionCallInfo fcinfo);
// 42809: `function` (NULL: the function of fcinfo) was called on a limiter.
[[noreturn]] void ReportLimiter(const CounterDef& def, const char* function);
// 42809: sc_throttle was called on a counter that is not a limiter.
[[noreturn]] void ReportNotLimiter(const CounterDef& def);

// Fails with 42809 when def is a limiter: for the functions of counters that count.
inline void RefuseLimiter(const CounterDef& def, const char* function) {
  if (unlikely(def.limiter)) ReportLimiter(def, function);
}

}  // namespace sc
