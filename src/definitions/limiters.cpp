// limiters.cpp: a rate limiter's definition (limiters.hpp): its limit from the catalog's row, the
// checks of sc_create, and the errors of a function called on the wrong kind of counter.
#include "definitions/limiters.hpp"

extern "C" {
#include "utils/lsyscache.h"
}

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

void ReportLimiter(const CounterDef& def, const char* function) {
  ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                  errmsg("counter \"%s\" is a rate limiter", def.name),
                  function != nullptr
                      ? errdetail("%s does not apply to a rate limiter.", function)
                      : 0,
                  errhint("Call sc_throttle() on it.")));
  pg_unreachable();
}

void ReportLimiter(const CounterDef& def, FunctionCallInfo fcinfo) {
  char* name = nullptr;
  if (fcinfo->flinfo != nullptr && OidIsValid(fcinfo->flinfo->fn_oid))
    name = get_func_name(fcinfo->flinfo->fn_oid);
  ReportLimiter(def, name != nullptr ? psprintf("%s()", name) : nullptr);
}

void ReportNotLimiter(const CounterDef& def) {
  ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                  errmsg("counter \"%s\" is not a rate limiter", def.name),
                  errhint("A rate limiter is a counter created with a rate: sc_create(name, "
                          "durability, rate => ..., per => ..., burst => ...).")));
  pg_unreachable();
}

}  // namespace sc
