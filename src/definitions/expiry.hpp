// expiry.hpp: when a key of a counter with a retention expires, exact on read, as a Redis TTL.
//
// A key of an unbucketed counter with `retain` has expired once its last write (Entry::last_write,
// totals.updated_at) is at or before the cutoff: the start of the reading statement minus retain
// (on the UTC calendar, as the flusher's retention pass computes it). It then reads 0, and a write
// counts from 0, whether or not the flusher has deleted its row (retention.cpp). A buffered
// write's time is the clock when it adds, a transactional write's the clock at its commit.
// Bucketed counters expire by bucket (bucketed.hpp: RetainedRange): their keys never do.
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"

namespace sc {

// `at` minus `span` on the UTC calendar (as timestamp - interval computes it), for spans that
// CheckRetention admitted.
TimestampTz Minus(TimestampTz at, const Interval& span);

// The cutoff of def's keys, which expire, in the current statement (computed once per counter
// and statement).
int64 ExpiringCutoff(const CounterDef& def);

// The cutoff of def's keys in the current statement; kNeverExpires if they do not expire.
inline int64 KeyCutoff(const CounterDef& def) {
  return likely(!def.retains || def.bucketed) ? kNeverExpires : ExpiringCutoff(def);
}

// A write of def's keys now: its stamp (the clock for a counter whose keys expire, the
// statement's start otherwise, which costs no clock read) and the statement's cutoff.
inline Write WriteNow(const CounterDef& def) {
  if (likely(!def.retains || def.bucketed))
    return Write{GetCurrentStatementStartTimestamp(), kNeverExpires};
  return Write{GetCurrentTimestamp(), ExpiringCutoff(def)};
}

// A commit's write of def's keys at `now`: expiry is decided at the commit, against now.
Write CommitWrite(const CounterDef& def, TimestampTz now);

}  // namespace sc
