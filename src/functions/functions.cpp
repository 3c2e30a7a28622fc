// functions.cpp: the SQL entry points of counters and their values, and what their implementations
// share: the names of the arguments each requires, the checks of a bucket and of an array of
// keys. The implementations live by job: create_drop.cpp (sc_create, sc_drop, sc_drop_buckets),
// writes.cpp (sc_incr and its forms, sc_set, sc_rollup), reads.cpp (sc_sum and its forms,
// sc_series, sc_top, sc_rank, sc_keys_above, sc_total, sc_total_series); the others live with
// their feature: privileges.cpp (sc_grant, ...), attach.cpp, retention.cpp, stats.cpp,
// counter_type.cpp (the type's I/O), text_key_functions.cpp (the forms that take keys as text).
#include "definitions/counter_ref.hpp"
#include "functions/functions.hpp"

namespace sc {

void ReportNoBuckets(const CounterDef& def, const char* what) {
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                  errmsg("counter \"%s\" has no buckets", def.name),
                  errdetail("%s may be given only for a counter created with a bucket width.",
                            what)));
}

int64* BigintElements(FunctionCallInfo fcinfo, int n, const char* name, int* count) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(n);
  if (ARR_NDIM(array) > 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("%s must be a one-dimensional array", name)));
  Datum* datums;
  bool* nulls;
  deconstruct_array(array, INT8OID, 8, true, TYPALIGN_DOUBLE, &datums, &nulls, count);
  auto* values = static_cast<int64*>(palloc(sizeof(int64) * (*count + 1)));
  for (int i = 0; i < *count; i++) {
    if (nulls[i])
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("%s must not contain nulls", name),
                      errdetail("Element %d is null.", i + 1)));
    values[i] = DatumGetInt64(datums[i]);
  }
  return values;
}

// The bucket a write goes to: the one holding argument `at_arg` if given, else the current one.
int64 WriteBucket(FunctionCallInfo fcinfo, const CounterDef& def, int at_arg) {
  if (PG_ARGISNULL(at_arg)) return CurrentBucket(def);
  if (!def.bucketed) ReportNoBuckets(def, "A time");
  return BucketOf(def, PG_GETARG_TIMESTAMPTZ(at_arg));
}

// The range of buckets given by arguments since_arg and until_arg; 22023 if either is given for
// a counter without buckets.
BucketRange RangeOf(FunctionCallInfo fcinfo, const CounterDef& def, int since_arg, int until_arg) {
  if (!def.bucketed && (!PG_ARGISNULL(since_arg) || !PG_ARGISNULL(until_arg)))
    ReportNoBuckets(def, "since and until");
  return RangeArguments(fcinfo, since_arg, until_arg);
}

}  // namespace sc

using namespace sc;

const char* const kIncrArguments[] = {"counter", "key", "delta", nullptr};
const char* const kOnceArguments[] = {"counter", "key", "delta", "request_id", nullptr};
const char* const kBatchArguments[] = {"counter", "keys", "deltas", nullptr};
const char* const kValueArguments[] = {"counter", "key", "value", nullptr};
const char* const kThrottleArguments[] = {"counter", "key", "cost", nullptr};
const char* const kAddArguments[] = {"counter", "key", "element", nullptr};
const char* const kKeyArguments[] = {"counter", "key", nullptr};
const char* const kKeysArguments[] = {"counter", "keys", nullptr};


SC_ENTRY_POINT(sc_create, Create)
SC_ENTRY_POINT(sc_drop, Drop)
SC_ENTRY_POINT(sc_incr, Incr)
SC_ENTRY_POINT(sc_incr_at, IncrAt)
SC_ENTRY_POINT(sc_incr_batch, IncrBatch)
SC_ENTRY_POINT(sc_incr_bounded, IncrBounded)
SC_ENTRY_POINT(sc_incr_once, IncrOnce)
SC_ENTRY_POINT(sc_set, Set)
SC_ENTRY_POINT(sc_top, Top)
SC_ENTRY_POINT(sc_sum, Sum)
SC_ENTRY_POINT(sc_sum_keys, SumKeys)
SC_ENTRY_POINT(sc_sum_range, SumRange)
SC_ENTRY_POINT(sc_series, Series)
SC_ENTRY_POINT(sc_drop_buckets, DropBuckets)
SC_ENTRY_POINT(sc_rank, Rank)
SC_ENTRY_POINT(sc_keys_above, KeysAboveValue)
SC_ENTRY_POINT(sc_total, Total)
SC_ENTRY_POINT(sc_total_series, TotalSeries)
SC_ENTRY_POINT(sc_throttle, Throttle)
