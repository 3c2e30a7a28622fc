// writes.cpp: the SQL functions that write values: sc_incr (and sc_incr_at, _bounded, _once,
// _batch), sc_set, and sc_rollup, which has them flushed now.
//
// Each reads and checks its arguments, then calls the buffer, the catalog or the flusher (the
// entry points and what they share: functions.cpp). No C++ object with a destructor lives in these
// frames, so an ereport from anywhere below is safe.

#include "definitions/arguments.hpp"
#include "buffer/buffer.hpp"
#include "definitions/counter_ref.hpp"
#include "functions/functions.hpp"
#include "functions/once.hpp"
#include "functions/retention.hpp"
#include "transactions/transactional.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/late_cancel.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_rollup);
}

namespace sc {

namespace {

// The counter a write may change: it exists, the current role may write it, and this server can.
// `function` names the call in errors ("sc_set()").
CounterDef WritableCounter(FunctionCallInfo fcinfo, const char* function) {
  RequireShared();
  PreventCommandDuringRecovery(function);
  CounterDef def = *KeyedCounterArgument(fcinfo, 0, kUpdate);
  if (def.durability == Durability::kTransactional) PreventCommandIfReadOnly(function);
  return def;
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

Datum sc_rollup(PG_FUNCTION_ARGS) {
  RequireShared();
  PreventCommandDuringRecovery("sc_rollup()");
  PG_RETURN_INT64(RequestFlush(EnsureFlusher()));
}
