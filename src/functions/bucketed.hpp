// bucketed.hpp: counters with time buckets: which bucket an increment goes to, reads over a
// range of buckets, and dropping old buckets.
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"

namespace sc {

// The bucket of a bucketed counter that holds `at`; 22008 if `at` is infinite or its bucket
// would start outside the timestamp range.
int64 BucketOf(const CounterDef& def, TimestampTz at);

// The bucket of the current statement's start time (statement_timestamp()), for writes without
// a time; kNoBucket for an unbucketed counter.
inline int64 CurrentBucket(const CounterDef& def) {
  return def.bucketed ? BucketOf(def, GetCurrentStatementStartTimestamp()) : kNoBucket;
}

// A range of bucket starts [since, until); NULL arguments are open ends. 22023 if since > until.
struct BucketRange {
  TimestampTz since;
  TimestampTz until;
};
BucketRange RangeArguments(FunctionCallInfo fcinfo, int since_arg, int until_arg);
constexpr BucketRange kAllBuckets{DT_NOBEGIN, DT_NOEND};

// The sum over the keys (sorted, distinct) of their buckets in range, exact in real time (plus
// this transaction's own pending deltas, for a transactional counter). 22003 if it leaves bigint.
int64 RangeSum(const CounterDef& def, const int64* keys, int nkeys, BucketRange range);

// The non-zero buckets of one key in range, in order, in palloc'd arrays; returns how many.
int64 RangeSeries(const CounterDef& def, int64 key, BucketRange range, int64** buckets,
                  int64** values);

// The n keys with the largest sums over their buckets in range, largest first, ties by key, in
// palloc'd arrays; returns how many.
int RangeTop(const CounterDef& def, int n, BucketRange range, int64** keys, int64** values);

// The time before which the counter's values have expired at `now` (UTC calendar arithmetic,
// as the buckets'): a bucketed counter's buckets that start before it ended `retain` ago or
// more; an unbucketed counter's keys whose rows were last written before it were not written for
// `retain`. DT_NOBEGIN for a counter that keeps its values forever.
TimestampTz ExpiredBefore(const CounterDef& def, TimestampTz now);

// The range without the buckets that expired by the current statement's start: reads never
// include them, whether or not the flusher dropped them yet.
BucketRange RetainedRange(const CounterDef& def, BucketRange range);

// Deletes every bucket of the counter that starts before `before`, as part of the current
// transaction (its entries leave the buffer when the transaction commits); returns how many
// (key, bucket) values it dropped.
int64 DropBuckets(const CounterDef& def, TimestampTz before);

}  // namespace sc
