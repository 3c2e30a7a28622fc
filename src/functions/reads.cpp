// reads.cpp: the SQL functions that read values: sc_sum (and _keys, _range), sc_series, sc_top,
// sc_rank, sc_keys_above, sc_total, sc_total_series.
//
// Each reads and checks its arguments, then calls the buffer, the catalog or the flusher (the
// entry points and what they share: functions.cpp). No C++ object with a destructor lives in these
// frames, so an ereport from anywhere below is safe.

#include <algorithm>

#include "definitions/arguments.hpp"
#include "functions/totals.hpp"
#include "buffer/buffer.hpp"
#include "core/checked_math.hpp"
#include "definitions/counter_ref.hpp"
#include "functions/functions.hpp"
#include "functions/rank.hpp"
#include "buffer/rank_indexes.hpp"
#include "definitions/expiry.hpp"
#include "transactions/transactional.hpp"

namespace sc {

namespace {

// Sorts keys and removes duplicates: a group is a set, a key listed twice counts once, as in
// key = ANY (keys). Returns the new count.
int DistinctKeys(int64* keys, int n) {
  std::sort(keys, keys + n);
  return int(std::unique(keys, keys + n) - keys);
}

void ReportSumOutOfRange(const CounterDef& def, int n) {
  ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                  errmsg("sum of counter \"%s\" over %d keys out of range", def.name, n)));
}

// The value of one key: over all its buckets, for a bucketed counter.
int64 SumOfKey(const CounterDef& def, int64 key) {
  if (def.bucketed) return RangeSum(def, &key, 1, kAllBuckets);
  if (def.durability == Durability::kBuffered) return BufferRead(def, key, kNoBucket, false);
  // The committed value plus this transaction's own pending delta, which other commits since
  // the increment may have pushed out of range.
  int64 value = BufferRead(def, key, kNoBucket, !RecoveryInProgress());
  if (!CheckedAdd(value, TransactionalPending(def.id, key, kNoBucket), &value))
    ReportValueOutOfRange(def.name,
                          psprintf("Key %lld with this transaction's own increments leaves the "
                                   "bigint range; its COMMIT would fail.",
                                   (long long)key));
  return value;
}

// Ranks a before b: the larger value first, ties by the smaller key.
inline bool Ranks(const KeyValue& a, const KeyValue& b) {
  return a.value > b.value || (a.value == b.value && a.key < b.key);
}

// Moves the best min(n, count) items to the front, best first; returns how many. A heap of the
// n best so far (its top the worst of them): O(count log n), answering a cancel as it goes.
// (The standard algorithms return before each interrupt check: no error jumps over them.)
int64 SelectTop(KeyValue* items, int64 count, int64 n) {
  int64 keep = Min(n, count);
  if (keep <= 0) return 0;
  std::make_heap(items, items + keep, Ranks);
  for (int64 i = keep; i < count; i++) {
    if ((i & 4095) == 0) CHECK_FOR_INTERRUPTS();
    if (Ranks(items[i], items[0])) {
      std::pop_heap(items, items + keep, Ranks);
      items[keep - 1] = items[i];
      std::push_heap(items, items + keep, Ranks);
    }
  }
  for (int64 end = keep; end > 1; end--) {
    if ((end & 4095) == 0) CHECK_FOR_INTERRUPTS();
    std::pop_heap(items, items + end, Ranks);
  }
  return keep;
}

void EmitRows(FunctionCallInfo fcinfo, const KeyValue* rows, int64 n) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  for (int64 i = 0; i < n; i++) {
    Datum row[2] = {Int64GetDatum(rows[i].key), Int64GetDatum(rows[i].value)};
    bool nulls[2] = {false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
  }
}

int KeyOrder(const void* a, const void* b) {
  int64 x = static_cast<const KeyValue*>(a)->key, y = static_cast<const KeyValue*>(b)->key;
  return x < y ? -1 : x > y;
}

// The value of one key now: over its buckets in range, for a bucketed counter.
int64 ValueInRange(const CounterDef& def, int64 key, BucketRange range) {
  return def.bucketed ? RangeSum(def, &key, 1, range) : SumOfKey(def, key);
}

// Returns the (bucket, value) rows of a set-returning function.
void EmitBuckets(FunctionCallInfo fcinfo, const int64* buckets, const int64* values, int64 n) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  for (int64 i = 0; i < n; i++) {
    Datum row[2] = {TimestampTzGetDatum(buckets[i]), Int64GetDatum(values[i])};
    bool nulls[2] = {false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
  }
}

// How many keys of def other than `key` held a value larger than `value` as of the last flush.
// An unbucketed counter whose keys do not expire has its index (buffer/rank_indexes.hpp),
// O(log keys), once its flusher built it; the tables answer meanwhile, and on a standby.
int64 KeysAbove(const CounterDef& def, int64 key, int64 value, BucketRange range) {
  int64 above;
  if (!def.bucketed && !KeysExpire(def) && !RecoveryInProgress() &&
      RankFromIndex(def, key, value, &above))
    return above;
  return StoredKeysAbove(def, key, value, range);
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum Top(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "n", nullptr};
  RequireShared();
  RequireArguments(fcinfo, names);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  // bigint, as every other number of the API (a driver's natural type for it): no leaderboard
  // holds more rows than an int, so a larger n asks for all of them.
  int64 asked = PG_GETARG_INT64(1);
  if (asked < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("n must not be negative")));
  int32 n = static_cast<int32>(Min(asked, int64{PG_INT32_MAX}));
  BucketRange range = RangeOf(fcinfo, def, 2, 3);
  InitMaterializedSRF(fcinfo, 0);
  if (def.bucketed) {
    // Ranked and limited by the query.
    int64 *keys, *values;
    int count = RangeTop(def, n, range, &keys, &values);
    auto* rows = static_cast<KeyValue*>(palloc(sizeof(KeyValue) * (count + 1)));
    for (int i = 0; i < count; i++) rows[i] = KeyValue{keys[i], values[i]};
    EmitRows(fcinfo, rows, count);
    return (Datum)0;
  }
  // This transaction's own increments can lift a key into the top n or drop one out of it:
  // take n more candidates than there are such keys, add the own deltas, choose again.
  int64 *pending_keys, *pending_buckets, *pending_deltas;
  int npending = def.durability == Durability::kTransactional
                     ? TransactionalPendingOf(def.id, &pending_keys, &pending_buckets,
                                              &pending_deltas)
                     : 0;
  KeyValue* candidates;
  int64 count = BufferTopCandidates(def, int64(n) + npending, npending, &candidates);
  if (npending > 0) {
    // Candidates are distinct keys: find each pending key by binary search.
    qsort(candidates, count, sizeof(KeyValue), KeyOrder);
    int64 sorted = count;
    for (int p = 0; p < npending; p++) {
      KeyValue probe{pending_keys[p], 0};
      auto* found = static_cast<KeyValue*>(
          bsearch(&probe, candidates, sorted, sizeof(KeyValue), KeyOrder));
      if (found == nullptr) {
        found = &candidates[count++];
        *found = KeyValue{pending_keys[p], BufferRead(def, pending_keys[p], kNoBucket, false)};
      }
      if (!CheckedAdd(found->value, pending_deltas[p], &found->value))
        ReportValueOutOfRange(def.name, nullptr);
    }
    // A key this transaction brought to 0 is not ranked.
    int64 kept = 0;
    for (int64 i = 0; i < count; i++)
      if (candidates[i].value != 0) candidates[kept++] = candidates[i];
    count = kept;
  }
  EmitRows(fcinfo, candidates, SelectTop(candidates, count, n));
  return (Datum)0;
}

Datum SumKeys(PG_FUNCTION_ARGS) {
  RequireShared();
  RequireArguments(fcinfo, kKeysArguments);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  int n;
  int64* keys = BigintElements(fcinfo, 1, "keys", &n);
  n = DistinctKeys(keys, n);
  if (def.bucketed) PG_RETURN_INT64(RangeSum(def, keys, n, kAllBuckets));
  auto* values = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  BufferReadMany(def, keys, n, values);
  int64 sum = 0;
  for (int i = 0; i < n; i++) {
    int64 pending = def.durability == Durability::kTransactional
                        ? TransactionalPending(def.id, keys[i], kNoBucket)
                        : 0;
    if (!CheckedAdd(sum, values[i], &sum) || !CheckedAdd(sum, pending, &sum))
      ReportSumOutOfRange(def, n);
  }
  PG_RETURN_INT64(sum);
}

Datum Sum(PG_FUNCTION_ARGS) {
  RequireShared();
  if (unlikely(PG_ARGISNULL(0) || PG_ARGISNULL(1))) RequireArguments(fcinfo, kKeyArguments);
  const CounterDef* def = KeyedCounterArgument(fcinfo, 0, kSelect);
  if (def->durability == Durability::kBuffered && !def->bucketed)
    PG_RETURN_INT64(BufferRead(*def, PG_GETARG_INT64(1), kNoBucket, false));
  CounterDef copy = *def;
  PG_RETURN_INT64(SumOfKey(copy, PG_GETARG_INT64(1)));
}

Datum SumRange(PG_FUNCTION_ARGS) {
  RequireShared();
  RequireArguments(fcinfo, kKeyArguments);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  BucketRange range = RangeOf(fcinfo, def, 2, 3);
  PG_RETURN_INT64(ValueInRange(def, PG_GETARG_INT64(1), range));
}

Datum Series(PG_FUNCTION_ARGS) {
  RequireShared();
  RequireArguments(fcinfo, kKeyArguments);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  if (!def.bucketed) ReportNoBuckets(def, "A series");
  BucketRange range = RangeArguments(fcinfo, 2, 3);
  InitMaterializedSRF(fcinfo, 0);
  int64 *buckets, *values;
  int64 n = RangeSeries(def, PG_GETARG_INT64(1), range, &buckets, &values);
  EmitBuckets(fcinfo, buckets, values, n);
  return (Datum)0;
}

// 1 + the number of keys with a larger value: the key's own value in real time (this transaction's
// increments included), the others' as of the last flush (rank.hpp).
Datum Rank(PG_FUNCTION_ARGS) {
  RequireShared();
  RequireArguments(fcinfo, kKeyArguments);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  int64 key = PG_GETARG_INT64(1);
  BucketRange range = RangeOf(fcinfo, def, 2, 3);
  PG_RETURN_INT64(KeysAbove(def, key, ValueInRange(def, key, range), range) + 1);
}

// sc_rank's count for a value known elsewhere: the router's sc_rank adds up each node's count of
// keys above the value its key has on its home node.
Datum KeysAboveValue(PG_FUNCTION_ARGS) {
  RequireShared();
  RequireArguments(fcinfo, kValueArguments);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kSelect);
  BucketRange range = RangeOf(fcinfo, def, 3, 4);
  PG_RETURN_INT64(KeysAbove(def, PG_GETARG_INT64(1), PG_GETARG_INT64(2), range));
}

// The sum over every key, exact in real time (with this transaction's own increments).
Datum Total(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", nullptr};
  RequireShared();
  RequireArguments(fcinfo, names);
  CounterDef def = *CounterArgument(fcinfo, 0, kSelect);
  RefuseOtherKinds(def, "sc_total()");
  BucketRange range = RangeOf(fcinfo, def, 1, 2);
  if (TotalFromSums(def)) PG_RETURN_INT64(SumsTotal(def, range));
  int128 total = BufferTotal(def);
  if (def.durability == Durability::kTransactional) {
    int64 *keys, *buckets, *deltas;
    int n = TransactionalPendingOf(def.id, &keys, &buckets, &deltas);
    for (int i = 0; i < n; i++) total += deltas[i];
  }
  // Only the total must be a bigint, not every partial sum on the way.
  if (total < PG_INT64_MIN || total > PG_INT64_MAX)
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("total of counter \"%s\" out of range", def.name)));
  PG_RETURN_INT64(int64(total));
}

// The sum over every key of each bucket in range, oldest first.
Datum TotalSeries(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", nullptr};
  RequireShared();
  RequireArguments(fcinfo, names);
  CounterDef def = *CounterArgument(fcinfo, 0, kSelect);
  RefuseOtherKinds(def, "sc_total_series()");
  if (!def.bucketed) ReportNoBuckets(def, "A series");
  BucketRange range = RangeArguments(fcinfo, 1, 2);
  InitMaterializedSRF(fcinfo, 0);
  int64 *buckets, *values;
  int64 n = SumsTotalSeries(def, range, &buckets, &values);
  EmitBuckets(fcinfo, buckets, values, n);
  return (Datum)0;
}
