// functions.hpp: the implementations of the SQL functions of counters and their values
// (create_drop.cpp, writes.cpp, reads.cpp), for the entry points (functions.cpp) and for the forms
// that take a key as text (text_key_functions.cpp), which call them with the key's id; and what
// the implementations share (functions.cpp).
#pragma once

#include "definitions/catalog.hpp"
#include "functions/bucketed.hpp"

// The arguments each of them requires (not NULL), as RequireArguments reads them: the text forms
// check them too, before a key is given an id.
extern const char* const kIncrArguments[];      // counter, key, delta (sc_incr, _bounded)
extern const char* const kOnceArguments[];      // counter, key, delta, request_id
extern const char* const kBatchArguments[];     // counter, keys, deltas
extern const char* const kValueArguments[];     // counter, key, value (sc_set, keys_above)
extern const char* const kKeyArguments[];       // counter, key (the reads)
extern const char* const kKeysArguments[];      // counter, keys
extern const char* const kThrottleArguments[];  // counter, key, cost
extern const char* const kAddArguments[];       // counter, key, element (sc_add)

Datum Incr(PG_FUNCTION_ARGS);
Datum IncrAt(PG_FUNCTION_ARGS);
Datum IncrBatch(PG_FUNCTION_ARGS);
Datum IncrBounded(PG_FUNCTION_ARGS);
Datum IncrOnce(PG_FUNCTION_ARGS);
Datum Set(PG_FUNCTION_ARGS);
Datum Sum(PG_FUNCTION_ARGS);
Datum SumRange(PG_FUNCTION_ARGS);
Datum SumKeys(PG_FUNCTION_ARGS);
Datum Series(PG_FUNCTION_ARGS);
Datum Top(PG_FUNCTION_ARGS);
Datum Rank(PG_FUNCTION_ARGS);
Datum KeysAboveValue(PG_FUNCTION_ARGS);
Datum Create(PG_FUNCTION_ARGS);
Datum Drop(PG_FUNCTION_ARGS);
Datum DropBuckets(PG_FUNCTION_ARGS);
Datum Total(PG_FUNCTION_ARGS);
Datum TotalSeries(PG_FUNCTION_ARGS);
Datum Throttle(PG_FUNCTION_ARGS);
Datum Add(PG_FUNCTION_ARGS);
Datum AddInt(PG_FUNCTION_ARGS);
Datum Count(PG_FUNCTION_ARGS);
Datum CountRange(PG_FUNCTION_ARGS);
Datum CountKeys(PG_FUNCTION_ARGS);
Datum SketchOf(PG_FUNCTION_ARGS);
Datum SketchRange(PG_FUNCTION_ARGS);
Datum SketchKeys(PG_FUNCTION_ARGS);
Datum CountTotal(PG_FUNCTION_ARGS);
Datum SketchTotal(PG_FUNCTION_ARGS);
Datum SketchUnion(PG_FUNCTION_ARGS);
Datum SketchCount(PG_FUNCTION_ARGS);

namespace sc {

// 22023 for a time given to a counter without buckets.
[[noreturn]] void ReportNoBuckets(const CounterDef& def, const char* what);

// The bucket a write goes to: the one holding argument `at_arg` if given, else the current one
// (22023 for a time given to a counter without buckets).
int64 WriteBucket(FunctionCallInfo fcinfo, const CounterDef& def, int at_arg);
// The range of buckets given by arguments since_arg and until_arg; 22023 if either is given for
// a counter without buckets.
BucketRange RangeOf(FunctionCallInfo fcinfo, const CounterDef& def, int since_arg, int until_arg);

// The elements of a one-dimensional bigint[] argument; fails with 22004 on a NULL element.
int64* BigintElements(FunctionCallInfo fcinfo, int n, const char* name, int* count);

}  // namespace sc
