// text_key_functions.cpp: the forms of the SQL functions that take keys as text (sc_incr(counter,
// key text, ...), sc_incr_batch_text, sc_sum_keys_text, ... and slotted_counter.top_ids for
// sc_top_text). Each finds the id of its key (definitions/text_keys.hpp) on a counter keyed by
// text, or reads the text as a bigint on one keyed by bigint, and calls the bigint form's
// implementation with it, marked as such a call (counter_ref.hpp: text_key_call).
//
// No C++ object with a destructor lives in these frames: an ereport from below is safe.
#include "definitions/text_keys.hpp"
#include "definitions/arguments.hpp"
#include "definitions/counter_ref.hpp"
#include "functions/functions.hpp"
#include "shared/shmem.hpp"

namespace sc {

namespace {

// The most arguments a function with a key takes (sc_incr_bounded's six).
constexpr int kMaxArgs = 6;

// kThrottle: a write of a rate limiter (sc_throttle), the only use a limiter has; kAdd and
// kCount: a distinct counter's write (sc_add) and read (sc_count, sc_sketch).
enum class KeyUse { kRead, kWrite, kThrottle, kAdd, kCount };

// Whether a use writes: a new key is given an id only then.
inline bool Writes(KeyUse use) { return use != KeyUse::kRead && use != KeyUse::kCount; }

// The counter of a call: the checks its implementation makes first, made before a key is given an
// id, so that a role that may not write the counter (or a standby, or a read-only transaction)
// never adds a key to it. The definition is the cached one: copy it before anything that could
// look up another.
const CounterDef* CheckedCounter(FunctionCallInfo fcinfo, KeyUse use, const char* function) {
  RequireShared();
  const CounterDef* def;
  if (use == KeyUse::kRead || use == KeyUse::kCount) {
    def = CounterArgument(fcinfo, 0, kSelect);
    if (use == KeyUse::kCount && !def->distinct) ReportNotDistinct(*def);
    if (use == KeyUse::kRead) RefuseOtherKinds(*def, function);
    return def;
  }
  if (unlikely(RecoveryInProgress())) PreventCommandDuringRecovery(function);
  def = CounterArgument(fcinfo, 0, kUpdate);
  if (use == KeyUse::kThrottle && !def->limiter) ReportNotLimiter(*def);
  if (use == KeyUse::kAdd && !def->distinct) ReportNotDistinct(*def);
  if (use == KeyUse::kWrite) RefuseOtherKinds(*def, function);
  if (def->durability == Durability::kTransactional) PreventCommandIfReadOnly(function);
  return def;
}

// The bytes of a text key, at most kMaxTextKey of them (22001).
int KeyLength(const CounterDef& def, const text* key) {
  int len = int(VARSIZE_ANY_EXHDR(key));
  if (len > kMaxTextKey)
    ereport(ERROR, (errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
                    errmsg("key of counter \"%s\" is too long", def.name),
                    errdetail("A key is at most %d bytes; this one has %d.", kMaxTextKey, len)));
  return len;
}

// The key as a bigint, for a counter keyed by bigint: as '42'::bigint reads it (22P02, 22003).
// A key that fits is read from a copy on the stack (an untyped placeholder's usual path).
int64 BigintKey(const text* key) {
  char digits[32];
  int len = int(VARSIZE_ANY_EXHDR(key));
  if (len >= int(sizeof(digits)))
    return DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(text_to_cstring(key))));
  memcpy(digits, VARDATA_ANY(key), len);
  digits[len] = '\0';
  return pg_strtoint64(digits);
}

// Calls impl with fcinfo's arguments, argument 1 replaced by `key`, marked as a text form's call.
// A copy of fcinfo: the caller's arguments stay as the executor gave them.
Datum CallWithKey(FunctionCallInfo fcinfo, PGFunction impl, Datum key) {
  Assert(fcinfo->nargs <= kMaxArgs);
  LOCAL_FCINFO(inner, kMaxArgs);
  memcpy(inner, fcinfo, SizeForFunctionCallInfo(fcinfo->nargs));
  if (fcinfo->nargs > 1) inner->args[1].value = key;
  inner->context = &text_key_call;
  Datum result = impl(inner);
  fcinfo->isnull = inner->isnull;
  return result;
}

// Whether one of the arguments the implementation requires (functions.hpp) is NULL: it then says
// which (22004), before any key is given an id.
bool MissingArgument(FunctionCallInfo fcinfo, const char* const* required) {
  for (int i = 0; required[i] != nullptr && i < fcinfo->nargs; i++)
    if (PG_ARGISNULL(i)) return true;
  return false;
}

// A function of one key as text, argument 1, which requires the arguments `required`.
Datum WithTextKey(FunctionCallInfo fcinfo, PGFunction impl, const char* const* required, KeyUse use,
                  const char* function) {
  if (MissingArgument(fcinfo, required)) return impl(fcinfo);
  const CounterDef* cached = CheckedCounter(fcinfo, use, function);
  const text* key = PG_GETARG_TEXT_PP(1);
  if (!cached->text_keys) return CallWithKey(fcinfo, impl, Int64GetDatum(BigintKey(key)));
  CounterDef def = *cached;
  int64 id = TextKeyId(def, VARDATA_ANY(key), KeyLength(def, key), Writes(use));
  return CallWithKey(fcinfo, impl, Int64GetDatum(id));
}

// A function of an array of keys as text, argument 1: called with the array of their ids.
Datum WithTextKeys(FunctionCallInfo fcinfo, PGFunction impl, const char* const* required, KeyUse use,
                   const char* function) {
  if (MissingArgument(fcinfo, required)) return impl(fcinfo);
  CounterDef def = *CheckedCounter(fcinfo, use, function);
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(1);
  if (ARR_NDIM(array) > 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("keys must be a one-dimensional array")));
  Datum* elements;
  bool* nulls;
  int n;
  deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &n);
  auto* keys = static_cast<const char**>(palloc(sizeof(char*) * (n + 1)));
  auto* lens = static_cast<int*>(palloc(sizeof(int) * (n + 1)));
  auto* ids = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  auto* values = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  for (int i = 0; i < n; i++) {
    if (nulls[i])
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("keys must not contain nulls"),
                      errdetail("Element %d is null.", i + 1)));
    const text* key = DatumGetTextPP(elements[i]);
    if (def.text_keys) {
      keys[i] = VARDATA_ANY(key);
      lens[i] = KeyLength(def, key);
    } else {
      values[i] = BigintKey(key);
    }
  }
  if (def.text_keys) TextKeyIds(def, keys, lens, n, Writes(use), values);
  for (int i = 0; i < n; i++) ids[i] = Int64GetDatum(values[i]);
  ArrayType* id_array = construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE);
  return CallWithKey(fcinfo, impl, PointerGetDatum(id_array));
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum IncrText(PG_FUNCTION_ARGS) { return WithTextKey(fcinfo, Incr, kIncrArguments, KeyUse::kWrite, "sc_incr()"); }
Datum IncrAtText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, IncrAt, kIncrArguments, KeyUse::kWrite, "sc_incr()");
}
Datum IncrBoundedText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, IncrBounded, kIncrArguments, KeyUse::kWrite, "sc_incr_bounded()");
}
Datum IncrOnceText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, IncrOnce, kOnceArguments, KeyUse::kWrite, "sc_incr_once()");
}
Datum SetText(PG_FUNCTION_ARGS) { return WithTextKey(fcinfo, Set, kValueArguments, KeyUse::kWrite, "sc_set()"); }
Datum IncrBatchText(PG_FUNCTION_ARGS) {
  return WithTextKeys(fcinfo, IncrBatch, kBatchArguments, KeyUse::kWrite, "sc_incr_batch_text()");
}
Datum SumText(PG_FUNCTION_ARGS) { return WithTextKey(fcinfo, Sum, kKeyArguments, KeyUse::kRead, "sc_sum()"); }
Datum SumRangeText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, SumRange, kKeyArguments, KeyUse::kRead, "sc_sum()");
}
Datum SumKeysText(PG_FUNCTION_ARGS) {
  return WithTextKeys(fcinfo, SumKeys, kKeysArguments, KeyUse::kRead, "sc_sum_keys_text()");
}
Datum SeriesText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, Series, kKeyArguments, KeyUse::kRead, "sc_series()");
}
Datum RankText(PG_FUNCTION_ARGS) { return WithTextKey(fcinfo, Rank, kKeyArguments, KeyUse::kRead, "sc_rank()"); }
Datum KeysAboveText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, KeysAboveValue, kValueArguments, KeyUse::kRead, "keys_above()");
}
Datum ThrottleText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, Throttle, kThrottleArguments, KeyUse::kThrottle, "sc_throttle()");
}
Datum AddText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, Add, kAddArguments, KeyUse::kAdd, "sc_add()");
}
Datum AddIntText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, AddInt, kAddArguments, KeyUse::kAdd, "sc_add()");
}
Datum CountText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, Count, kKeyArguments, KeyUse::kCount, "sc_count()");
}
Datum CountRangeText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, CountRange, kKeyArguments, KeyUse::kCount, "sc_count()");
}
Datum CountKeysText(PG_FUNCTION_ARGS) {
  return WithTextKeys(fcinfo, CountKeys, kKeysArguments, KeyUse::kCount, "sc_count_keys_text()");
}
Datum SketchKeysText(PG_FUNCTION_ARGS) {
  return WithTextKeys(fcinfo, SketchKeys, kKeysArguments, KeyUse::kCount, "sketch_keys_text()");
}
Datum SketchText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, SketchOf, kKeyArguments, KeyUse::kCount, "sc_sketch()");
}
Datum SketchRangeText(PG_FUNCTION_ARGS) {
  return WithTextKey(fcinfo, SketchRange, kKeyArguments, KeyUse::kCount, "sc_sketch()");
}
// sc_top of a counter of either kind, its keys as ids (sc_top_text gives them their texts).
Datum TopIds(PG_FUNCTION_ARGS) {
  if (!PG_ARGISNULL(0)) RefuseOtherKinds(*CounterArgument(fcinfo, 0, kSelect), "sc_top_text()");
  return CallWithKey(fcinfo, Top, PG_GETARG_DATUM(1));
}
// The text of key `key` (an id of top_ids) of a counter of either kind, for sc_top_text: a text's
// is read with the latest snapshot (StoredText), so that every key top_ids read in the buffer,
// whose text was committed before its first value, has it, whenever the query's snapshot was taken.
Datum KeyText(PG_FUNCTION_ARGS) {
  RequireShared();
  const CounterDef* def = CounterArgument(fcinfo, 0, kSelect);
  int64 key = PG_GETARG_INT64(1);
  if (!def->text_keys) {
    char digits[MAXINT8LEN + 1];
    pg_lltoa(key, digits);
    PG_RETURN_TEXT_P(cstring_to_text(digits));
  }
  text* stored = StoredText(def->id, key);
  if (stored == nullptr) PG_RETURN_NULL();
  PG_RETURN_TEXT_P(stored);
}

SC_ENTRY_POINT(sc_incr_text, IncrText)
SC_ENTRY_POINT(sc_incr_at_text, IncrAtText)
SC_ENTRY_POINT(sc_incr_bounded_text, IncrBoundedText)
SC_ENTRY_POINT(sc_incr_once_text, IncrOnceText)
SC_ENTRY_POINT(sc_set_text, SetText)
SC_ENTRY_POINT(sc_incr_batch_text, IncrBatchText)
SC_ENTRY_POINT(sc_sum_text, SumText)
SC_ENTRY_POINT(sc_sum_range_text, SumRangeText)
SC_ENTRY_POINT(sc_sum_keys_text, SumKeysText)
SC_ENTRY_POINT(sc_series_text, SeriesText)
SC_ENTRY_POINT(sc_rank_text, RankText)
SC_ENTRY_POINT(sc_throttle_text, ThrottleText)
SC_ENTRY_POINT(sc_add_text, AddText)
SC_ENTRY_POINT(sc_add_int_text, AddIntText)
SC_ENTRY_POINT(sc_count_text, CountText)
SC_ENTRY_POINT(sc_count_range_text, CountRangeText)
SC_ENTRY_POINT(sc_count_keys_text, CountKeysText)
SC_ENTRY_POINT(sc_sketch_text, SketchText)
SC_ENTRY_POINT(sc_sketch_keys_text, SketchKeysText)
SC_ENTRY_POINT(sc_sketch_range_text, SketchRangeText)
SC_ENTRY_POINT(sc_keys_above_text, KeysAboveText)
SC_ENTRY_POINT(sc_top_ids, TopIds)
SC_ENTRY_POINT(sc_key_text, KeyText)
