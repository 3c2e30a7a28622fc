// limiters.cpp: a rate limiter's definition (limiters.hpp): the checks of sc_create's limit, and
// its tolerance as an interval.
#include "definitions/limiters.hpp"

namespace sc {

GcraLimit CheckedLimit(int64 rate, const Interval* per, const int64* burst) {
  int64 units = burst != nullptr ? *burst : rate;
  if (rate <= 0 || units <= 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("%s must be positive", rate <= 0 ? "rate" : "burst"),
                    errdetail("A limiter admits burst units at once, then rate units in each per.")));
  int64 micros;
  if (!GcraPerMicros(per->month, per->day, per->time, &micros))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("per must be a fixed length of time"),
                    errdetail("A month has no fixed length."),
                    errhint("Use days, hours, minutes or seconds, for example '30 days'.")));
  if (micros <= 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("per must be positive")));
  if (micros < rate)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("rate is above one unit per microsecond"),
                    errdetail("A limiter spaces its units by whole microseconds.")));
  GcraLimit limit;
  if (!MakeGcraLimit(rate, micros, units, &limit))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("burst takes more than 1000 years to come back"),
                    errdetail("burst × per / rate is at most 1000 years.")));
  return limit;
}

Interval ToleranceInterval(const GcraLimit& limit) {
  Interval out;
  out.month = 0;
  out.day = int32(limit.tolerance / USECS_PER_DAY);
  out.time = limit.tolerance % USECS_PER_DAY;
  return out;
}

}  // namespace sc
