// functions.cpp: the SQL functions of counters and their values: sc_create, sc_drop, sc_incr (and
// sc_incr_at, _batch, _bounded, _once), sc_set, sc_sum (and _keys, _range), sc_series, sc_top,
// sc_drop_buckets, sc_rollup. The others live with their feature: privileges.cpp (sc_grant, ...),
// attach.cpp, retention.cpp, stats.cpp, counter_type.cpp (the type's I/O).
//
// Each reads and checks its arguments, then calls the buffer, the catalog or the flusher. No C++
// object with a destructor lives in these frames, so an ereport from anywhere below is safe.
#include <algorithm>

#include "functions/arguments.hpp"
#include "functions/bucketed.hpp"
#include "functions/totals.hpp"
#include "buffer/buffer.hpp"
#include "definitions/catalog.hpp"
#include "definitions/drop.hpp"
#include "definitions/guards.hpp"
#include "transactions/changes.hpp"
#include "core/checked_math.hpp"
#include "functions/counter_ref.hpp"
#include "functions/functions.hpp"
#include "functions/key_arrays.hpp"
#include "functions/once.hpp"
#include "functions/rank.hpp"
#include "shared/rank_indexes.hpp"
#include "definitions/expiry.hpp"
#include "functions/retention.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"
#include "transactions/transactional.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/late_cancel.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_rollup);
}

namespace sc {

namespace {

void CheckCounterName(const char* name) {
  size_t len = strlen(name);
  CheckNameSyntax(name, int(len));
  if (strspn(name, "0123456789") == len)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid counter name \"%s\"", name),
                    errdetail("A name of digits only could be taken for a counter id.")));
}

void CheckDurability(const char* text) {
  if (strcmp(text, "buffered") != 0 && strcmp(text, "transactional") != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid durability \"%s\"", NameForMessage(text)),
                    errhint("Use 'transactional' or 'buffered'.")));
}

void CheckKeyType(const char* text) {
  if (strcmp(text, "bigint") != 0 && strcmp(text, "text") != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid key type \"%s\"", NameForMessage(text)),
                    errhint("Use 'bigint' or 'text'.")));
}

void CheckBucketWidth(const Interval* width) {
  BucketWidth checked;
  switch (MakeBucketWidth(width->month, width->day, width->time, &checked)) {
    case WidthError::kNone:
      return;
    case WidthError::kNotPositive:
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("bucket width must be positive")));
      break;
    case WidthError::kMixedUnits:
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("bucket width must be in one unit"),
                      errdetail("A width is a number of months (or years), of days, or of "
                                "hours, minutes and seconds, not a mix of them."),
                      errhint("Use for example '1 hour', '1 day', '7 days', '1 month' or "
                              "'1 year'.")));
      break;
  }
}

// 22023 for a time given to a counter without buckets.
void ReportNoBuckets(const CounterDef& def, const char* what) {
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                  errmsg("counter \"%s\" has no buckets", def.name),
                  errdetail("%s may be given only for a counter created with a bucket width.",
                            what)));
}

// The bucket a write goes to: the one holding argument `at_arg` if given, else the current one.
int64 WriteBucket(FunctionCallInfo fcinfo, const CounterDef& def, int at_arg) {
  if (PG_ARGISNULL(at_arg)) return CurrentBucket(def);
  if (!def.bucketed) ReportNoBuckets(def, "A time");
  return BucketOf(def, PG_GETARG_TIMESTAMPTZ(at_arg));
}

// The counter a write may change: it exists, the current role may write it, and this server can.
// `function` names the call in errors ("sc_set()").
CounterDef WritableCounter(FunctionCallInfo fcinfo, const char* function) {
  RequireShared();
  PreventCommandDuringRecovery(function);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kUpdate);
  if (def.durability == Durability::kTransactional) PreventCommandIfReadOnly(function);
  return def;
}

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

// The elements of a one-dimensional bigint[] argument; fails with 22004 on a NULL element.
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

// Adds delta to (key, bucket) and returns the new value. def may be the cached definition
// itself: the buffered path copies it before anything that could look it up again (and free
// it), and the transactional path, which loads, works on a copy from the start.
inline int64 Increment(const CounterDef& def, int64 key, int64 bucket, int64 delta) {
  if (def.durability == Durability::kBuffered) {
    EnsureFlusherFast();
    int64 value = BufferIncrement(def, key, bucket, delta);
    EnsureFlusherFast(true);
    return value;
  }
  CounterDef copy = def;
  EnsureFlusherFast();
  return TransactionalIncrement(copy, key, bucket, delta);
}

// Adds delta to (key, bucket) if the new value stays within bounds: true and *value the new
// value, or false (nothing counted). As Increment.
bool IncrementWithin(const CounterDef& def, int64 key, int64 bucket, int64 delta, Bounds bounds,
                     int64* value) {
  if (def.durability == Durability::kBuffered) {
    EnsureFlusherFast();
    bool admitted = BufferIncrementWithin(def, key, bucket, delta, bounds, value);
    EnsureFlusherFast(true);
    return admitted;
  }
  CounterDef copy = def;
  EnsureFlusherFast();
  return TransactionalIncrementWithin(copy, key, bucket, delta, bounds, value);
}

}  // namespace

}  // namespace sc

using namespace sc;

const char* const kIncrArguments[] = {"counter", "key", "delta", nullptr};
const char* const kOnceArguments[] = {"counter", "key", "delta", "request_id", nullptr};
const char* const kBatchArguments[] = {"counter", "keys", "deltas", nullptr};
const char* const kValueArguments[] = {"counter", "key", "value", nullptr};
const char* const kKeyArguments[] = {"counter", "key", nullptr};
const char* const kKeysArguments[] = {"counter", "keys", nullptr};

Datum Create(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"name", "durability", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_create()");
  PreventCommandIfReadOnly("sc_create()");
  RequireArguments(fcinfo, names);
  bool if_not_exists = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
  bool retains = !PG_ARGISNULL(3);
  char* name = text_to_cstring(PG_GETARG_TEXT_PP(0));
  char* durability_text = text_to_cstring(PG_GETARG_TEXT_PP(1));
  CheckCounterName(name);
  CheckDurability(durability_text);
  bool bucketed = !PG_ARGISNULL(2);
  if (bucketed) CheckBucketWidth(PG_GETARG_INTERVAL_P(2));
  if (retains) CheckRetention(PG_GETARG_INTERVAL_P(3));
  if (PG_ARGISNULL(5))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key_type must not be null")));
  const char* key_type = text_to_cstring(PG_GETARG_TEXT_PP(5));
  CheckKeyType(key_type);
  // As CREATE SCHEMA: the database's CREATE privilege. The creator owns the counter.
  if (DatabaseAclCheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied to create counter \"%s\"", name),
                    errdetail("Creating a counter needs the CREATE privilege on database "
                              "\"%s\".", get_database_name(MyDatabaseId))));
  EnsureFlusher();

  Oid types[5] = {TEXTOID, TEXTOID, INTERVALOID, INTERVALOID, TEXTOID};
  Datum args[5] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                   retains ? PG_GETARG_DATUM(3) : (Datum)0, CStringGetTextDatum(key_type)};
  char nulls[5] = {' ', ' ', bucketed ? ' ' : 'n', retains ? ' ' : 'n', ' '};
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(
      "INSERT INTO slotted_counter.counters (id, name, durability, bucket, retain, key_type) "
      "VALUES (pg_catalog.nextval('slotted_counter.counters_id_seq'), $1, $2, $3, $4, $5) "
      "ON CONFLICT (name) DO NOTHING RETURNING id",
      5, types, args, nulls, false, 1);
  if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "inserting the counter failed: %d", rc);
  bool created = SPI_processed == 1;
  int32 id = 0;
  if (created) {
    bool isnull;
    id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  }
  FinishSpi(spi);
  if (!created) {
    // As CREATE TABLE IF NOT EXISTS: the existing counter stays as it is, whatever its definition.
    if (if_not_exists) {
      ereport(NOTICE, (errcode(ERRCODE_DUPLICATE_OBJECT),
                       errmsg("counter \"%s\" already exists, skipping", name)));
      PG_RETURN_DATUM(CounterResult(name));
    }
    ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                    errmsg("counter \"%s\" already exists", name)));
  }
  // The creator owns it: the guard holds its owner and privileges (guards.cpp).
  CreateGuard(name, id, GetUserId());
  NoteCounterCreated(id);
  PG_RETURN_DATUM(CounterResult(name));
}

Datum Drop(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_drop()");
  PreventCommandIfReadOnly("sc_drop()");
  RequireArguments(fcinfo, names);
  // As DROP ... IF EXISTS, a missing counter is a notice.
  bool if_exists = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
  if (if_exists) {
    const char* shown;
    if (FindCounterArgument(fcinfo, 0, &shown) == nullptr) {
      ereport(NOTICE, (errcode(ERRCODE_UNDEFINED_OBJECT),
                       errmsg("counter \"%s\" does not exist, skipping", shown)));
      PG_RETURN_VOID();
    }
  }
  CounterDef def = *CounterArgument(fcinfo, 0, kOwn);
  // CASCADE: any role may make an object of its own depend on a guard (a column's DEFAULT
  // nextval() of it, a view of it), which would otherwise keep the owner from dropping the
  // counter. Those go with it, each with core's NOTICE, as DROP SEQUENCE ... CASCADE drops them.
  if (!DropCounter(def, true, DROP_CASCADE)) {  // dropped by a transaction that committed meanwhile
    if (!if_exists) ReportUnknownCounter(def.name);
    ereport(NOTICE, (errcode(ERRCODE_UNDEFINED_OBJECT),
                     errmsg("counter \"%s\" does not exist, skipping", def.name)));
  }
  PG_RETURN_VOID();
}

// The hot path: no copy of the definition, no lookup but the one-entry cache's, no call that
// is not needed for a buffered counter's resident key.
Datum Incr(PG_FUNCTION_ARGS) {
  if (unlikely(PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2)))
    RequireArguments(fcinfo, kIncrArguments);
  RequireShared();
  if (unlikely(RecoveryInProgress())) PreventCommandDuringRecovery("sc_incr()");
  const CounterDef* def = KeyedCounterArgument(fcinfo, 0, kUpdate);
  if (def->durability == Durability::kTransactional) PreventCommandIfReadOnly("sc_incr()");
  PG_RETURN_INT64(Increment(*def, PG_GETARG_INT64(1), CurrentBucket(*def), PG_GETARG_INT64(2)));
}

Datum IncrAt(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kIncrArguments);
  CounterDef def = WritableCounter(fcinfo, "sc_incr()");
  int64 bucket = WriteBucket(fcinfo, def, 3);
  PG_RETURN_INT64(Increment(def, PG_GETARG_INT64(1), bucket, PG_GETARG_INT64(2)));
}

// A NULL bound is no bound; NULL is returned when the increment was refused (nothing counted).
Datum IncrBounded(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kIncrArguments);
  CounterDef def = WritableCounter(fcinfo, "sc_incr_bounded()");
  Bounds bounds;
  if (!PG_ARGISNULL(3)) bounds.lower = PG_GETARG_INT64(3);
  if (!PG_ARGISNULL(4)) bounds.upper = PG_GETARG_INT64(4);
  if (bounds.lower > bounds.upper)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("lower bound %lld is above upper bound %lld",
                           (long long)bounds.lower, (long long)bounds.upper)));
  int64 bucket = WriteBucket(fcinfo, def, 5);
  int64 value;
  if (!IncrementWithin(def, PG_GETARG_INT64(1), bucket, PG_GETARG_INT64(2), bounds, &value))
    PG_RETURN_NULL();
  PG_RETURN_INT64(value);
}

// Applies once per request id within slotted_counter.dedupe_window (once.hpp).
Datum IncrOnce(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kOnceArguments);
  CounterDef def = WritableCounter(fcinfo, "sc_incr_once()");
  int64 bucket = WriteBucket(fcinfo, def, 4);
  PG_RETURN_INT64(IncrementOnce(def, PG_GETARG_INT64(1), bucket, PG_GETARG_INT64(2),
                                PG_GETARG_TEXT_PP(3)));
}

Datum IncrBatch(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kBatchArguments);
  CounterDef def = WritableCounter(fcinfo, "sc_incr_batch()");
  int nkeys, ndeltas;
  int64* keys = BigintElements(fcinfo, 1, "keys", &nkeys);
  int64* deltas = BigintElements(fcinfo, 2, "deltas", &ndeltas);
  if (nkeys != ndeltas)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("keys and deltas must have the same length"),
                    errdetail("There are %d keys and %d deltas.", nkeys, ndeltas)));
  // One bucket for the whole batch: the one of the statement's start.
  int64 bucket = CurrentBucket(def);
  EnsureFlusher();
  auto* values = static_cast<Datum*>(palloc(sizeof(Datum) * (nkeys + 1)));
  if (def.durability == Durability::kTransactional) {
    // On an error the transaction (or subtransaction) ends, and its pending deltas with it.
    for (int i = 0; i < nkeys; i++)
      values[i] = Int64GetDatum(TransactionalIncrement(def, keys[i], bucket, deltas[i]));
    PG_RETURN_ARRAYTYPE_P(construct_array(values, nkeys, INT8OID, 8, true, TYPALIGN_DOUBLE));
  }
  // All or nothing (buffer.hpp); counted, it returns with interrupts held, until this returns.
  auto* results = static_cast<int64*>(palloc(sizeof(int64) * (nkeys + 1)));
  BufferIncrementBatch(def, keys, deltas, nkeys, bucket, results);
  EnsureFlusher(true);
  for (int i = 0; i < nkeys; i++) values[i] = Int64GetDatum(results[i]);
  ArrayType* array = construct_array(values, nkeys, INT8OID, 8, true, TYPALIGN_DOUBLE);
  ResumeInterruptsCounted();
  PG_RETURN_ARRAYTYPE_P(array);
}

Datum Set(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kValueArguments);
  CounterDef def = WritableCounter(fcinfo, "sc_set()");
  int64 bucket = WriteBucket(fcinfo, def, 3);
  int64 key = PG_GETARG_INT64(1);
  int64 value = PG_GETARG_INT64(2);
  EnsureFlusher();
  if (def.durability == Durability::kTransactional)
    PG_RETURN_INT64(TransactionalSet(def, key, bucket, value));
  int64 old = BufferSet(def, key, bucket, value);
  EnsureFlusher(true);
  PG_RETURN_INT64(old);
}

namespace sc {

namespace {

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

// The range of buckets given by arguments since_arg and until_arg; 22023 if either is given for
// a counter without buckets.
BucketRange RangeOf(FunctionCallInfo fcinfo, const CounterDef& def, int since_arg, int until_arg) {
  if (!def.bucketed && (!PG_ARGISNULL(since_arg) || !PG_ARGISNULL(until_arg)))
    ReportNoBuckets(def, "since and until");
  return RangeArguments(fcinfo, since_arg, until_arg);
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

}  // namespace

}  // namespace sc

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

namespace sc {
namespace {

// How many keys of def other than `key` held a value larger than `value` as of the last flush.
// An unbucketed counter whose keys do not expire has its index (shared/rank_indexes.hpp),
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
  if (!def.bucketed) ReportNoBuckets(def, "A series");
  BucketRange range = RangeArguments(fcinfo, 1, 2);
  InitMaterializedSRF(fcinfo, 0);
  int64 *buckets, *values;
  int64 n = SumsTotalSeries(def, range, &buckets, &values);
  EmitBuckets(fcinfo, buckets, values, n);
  return (Datum)0;
}

Datum DropBuckets(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "before", nullptr};
  RequireShared();
  RequireArguments(fcinfo, names);
  PreventCommandDuringRecovery("sc_drop_buckets()");
  PreventCommandIfReadOnly("sc_drop_buckets()");
  CounterDef def = *CounterArgument(fcinfo, 0, kUpdate);
  if (!def.bucketed) ReportNoBuckets(def, "Buckets to drop");
  PG_RETURN_INT64(DropBuckets(def, PG_GETARG_TIMESTAMPTZ(1)));
}

Datum sc_rollup(PG_FUNCTION_ARGS) {
  RequireShared();
  PreventCommandDuringRecovery("sc_rollup()");
  PG_RETURN_INT64(RequestFlush(EnsureFlusher()));
}

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
