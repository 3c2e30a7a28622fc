// limiters.hpp: what makes a counter a rate limiter (sc_create's rate, per and burst; sc_throttle).
// The errors of a call on a counter of the wrong kind are in kinds.hpp.
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// sc_create's check of a limit (22023, saying what is wrong); a NULL burst is the rate.
GcraLimit CheckedLimit(int64 rate, const Interval* per, const int64* burst);

// A limiter's retention: its tolerance, as an interval (days and time).
Interval ToleranceInterval(const GcraLimit& limit);

}  // namespace sc
