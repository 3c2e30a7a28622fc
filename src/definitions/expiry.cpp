// expiry.cpp: the cutoffs of keys that expire (expiry.hpp).
#include "definitions/expiry.hpp"

namespace sc {

TimestampTz Minus(TimestampTz at, const Interval& span) {
  Interval negated{-span.time, -span.day, -span.month};
  return DatumGetTimestamp(DirectFunctionCall2(timestamp_pl_interval, TimestampGetDatum(at),
                                               IntervalPGetDatum(&negated)));
}

namespace {

// The last cutoff computed: of which counter (with which retention), in which statement.
struct CachedCutoff {
  int32 counter = 0;
  TimestampTz statement = 0;
  Interval retain{};
  int64 cutoff = kNeverExpires;
};
CachedCutoff cached;

bool SameInterval(const Interval& a, const Interval& b) {
  return a.time == b.time && a.day == b.day && a.month == b.month;
}

}  // namespace

int64 ExpiringCutoff(const CounterDef& def) {
  Assert(def.retains && !def.bucketed);
  TimestampTz statement = GetCurrentStatementStartTimestamp();
  if (cached.counter != def.id || cached.statement != statement ||
      !SameInterval(cached.retain, def.retain)) {
    int64 cutoff = Minus(statement, def.retain);
    cached = CachedCutoff{def.id, statement, def.retain, cutoff};
  }
  return cached.cutoff;
}

Write CommitWrite(const CounterDef& def, TimestampTz now) {
  if (!KeysExpire(def)) return Write{};
  return Write{now, Minus(now, def.retain)};
}

}  // namespace sc
