// totals.hpp: what sc_total and sc_total_series read, a counter's sum over every key, from
// slotted_counter.counter_totals (totals.cpp); the SQL functions call these.
#pragma once

#include "definitions/catalog.hpp"
#include "functions/bucketed.hpp"
#include "pg.hpp"

namespace sc {

// Whether the counter's total is read from its sums (SumsTotal): every counter but an unbucketed
// one with a retention, whose keys leave its total one by one as they expire, with no event that
// a sum could follow (those are summed over their keys: BufferTotal).
inline bool TotalFromSums(const CounterDef& def) { return def.bucketed || !def.retains; }

// The sum over every key of the buckets in range (an unbucketed counter: its one value per key),
// exact in real time, with this transaction's own pending deltas. Reads a row of
// slotted_counter.counter_totals per bucket, the deltas not yet folded (a transactional counter)
// and the buffer's entries that differ from their rows. 22003 if it leaves bigint.
int64 SumsTotal(const CounterDef& def, BucketRange range);

// The same per bucket of a bucketed counter: the non-zero ones, in order, in palloc'd arrays;
// returns how many.
int64 SumsTotalSeries(const CounterDef& def, BucketRange range, int64** buckets,
                      int64** values);

}  // namespace sc
