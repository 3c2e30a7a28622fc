// expiry.hpp: when a key of a counter with a retention expires, exact on read, as a Redis TTL.
//
// A key of an unbucketed counter with `retain` has expired once its last write (Entry::last_write,
// key_values.updated_at) is at or before the cutoff: the start of the reading statement minus
// retain (on the UTC calendar, as the flusher's retention pass computes it). It then reads 0, and a
// write counts from 0, whether or not the flusher has deleted its row (retention.cpp). A buffered
// write's time is the clock when it adds, a transactional write's the clock at its commit.
// Bucketed counters expire by bucket (bucketed.hpp: RetainedRange): their keys never do.
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"

namespace sc {

// `at` minus `span` on the UTC calendar (as timestamp - interval computes it), for spans that
// CheckRetention admitted.
TimestampTz Minus(TimestampTz at, const Interval& span);

// Whether def's keys expire (an unbucketed counter with a retention).
inline bool KeysExpire(const CounterDef& def) { return def.retains && !def.bucketed; }

// The cutoff of def's keys, which expire, in the current statement (computed once per counter
// and statement).
int64 ExpiringCutoff(const CounterDef& def);

// The cutoff of def's keys in the current statement; kNeverExpires if they do not expire.
inline int64 KeyCutoff(const CounterDef& def) {
  return likely(!KeysExpire(def)) ? kNeverExpires : ExpiringCutoff(def);
}

// A write of def's keys now: its stamp and the statement's cutoff. Only the writes of a counter
// whose keys expire carry their time (the clock): those of the others cost nothing for it, and
// their rows' written_at is the time of the flush that stored them (never before the write). A
// counter given a retention later has its values in the buffer stamped at that commit (buffer.hpp:
// StampCounter): no key it had expires sooner than `retain` after its last write.
inline Write WriteNow(const CounterDef& def) {
  if (likely(!KeysExpire(def))) return Write{};
  return Write{GetCurrentTimestamp(), ExpiringCutoff(def)};
}

// A commit's write of def's keys at `now`: expiry is decided at the commit, against now. (Its
// rows are stamped now whatever the counter: deltas.written_at.)
Write CommitWrite(const CounterDef& def, TimestampTz now);

}  // namespace sc
