// kinds.hpp: what a counter's keys hold, its kind (slotted_counter.counters.kind): a number
// ('count'), a rate limiter's state ('limiter': sc_throttle) or a sketch of distinct elements
// ('distinct': sc_add, sc_count); and the errors (42809) of a function called on the wrong kind.
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// 42809: the function of fcinfo, or `function` (NULL: none named), does not apply to def's kind.
[[noreturn]] void ReportKind(const CounterDef& def, FunctionCallInfo fcinfo);
[[noreturn]] void ReportKind(const CounterDef& def, const char* function);
// 42809: sc_throttle was called on a counter that is not a limiter.
[[noreturn]] void ReportNotLimiter(const CounterDef& def);
// 42809: a distinct counter's function was called on a counter that is not one.
[[noreturn]] void ReportNotDistinct(const CounterDef& def);

// Fails with 42809 unless def counts numbers: for the functions of counters that count.
inline void RefuseOtherKinds(const CounterDef& def, const char* function) {
  if (unlikely(def.limiter | def.distinct)) ReportKind(def, function);
}

}  // namespace sc
