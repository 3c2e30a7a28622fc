// rank.hpp: a key's rank among the keys of its counter (sc_rank), seed 001's "my team's ranking":
// the key's own value in real time, the others' as of the last flush.
#pragma once

#include "definitions/catalog.hpp"
#include "functions/bucketed.hpp"
#include "pg.hpp"

namespace sc {

// How many keys of the counter other than `key` held, as of the last flush
// (slotted_counter.key_values in the latest snapshot), a value larger than `value` and other than
// 0: over their buckets in range for a bucketed counter, leaving out the expired ones. One pass
// over the counter's stored rows: O(keys).
int64 StoredKeysAbove(const CounterDef& def, int64 key, int64 value, BucketRange range);

}  // namespace sc
