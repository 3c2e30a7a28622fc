// throttle.cpp: sc_throttle, a rate limiter's call (GCRA: core/gcra.hpp): takes `cost` units of a
// key if they fit, else nothing, and answers (allowed, remaining, retry_after, reset_after).
//
// The step is the buffer's compare-and-swap on the key's arrival time (BufferThrottle), at the
// server's clock, not the transaction's start: a long transaction does not freeze its own window.
// A transactional limiter's call also belongs to its transaction (transactions/throttles.hpp).
// No C++ object with a destructor lives in these frames, so an ereport from below is safe.
#include "buffer/buffer.hpp"
#include "definitions/arguments.hpp"
#include "definitions/counter_ref.hpp"
#include "functions/functions.hpp"
#include "shared/flusher_slots.hpp"
#include "transactions/throttles.hpp"

extern "C" {
#include "funcapi.h"
}

namespace sc {

namespace {

// The result's row type, sc_throttle_result (the type cache's: no catalog read after the
// first), kept for the call site (its flinfo).
TupleDesc ResultDesc(FunctionCallInfo fcinfo) {
  if (fcinfo->flinfo->fn_extra != nullptr) return static_cast<TupleDesc>(fcinfo->flinfo->fn_extra);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "sc_throttle() must return a row");
  MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
  desc = BlessTupleDesc(CreateTupleDescCopy(desc));
  MemoryContextSwitchTo(old);
  fcinfo->flinfo->fn_extra = desc;
  return desc;
}

Datum Duration(int64 micros) {
  auto* interval = static_cast<Interval*>(palloc(sizeof(Interval)));
  interval->month = 0;
  interval->day = 0;
  interval->time = micros;
  return IntervalPGetDatum(interval);
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum Throttle(PG_FUNCTION_ARGS) {
  RequireArguments(fcinfo, kThrottleArguments);
  RequireShared();
  if (unlikely(RecoveryInProgress())) PreventCommandDuringRecovery("sc_throttle()");
  const CounterDef* def = LimiterArgument(fcinfo, 0);
  int64 key = PG_GETARG_INT64(1);
  int64 cost = PG_GETARG_INT64(2);
  if (cost < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("cost must not be negative"),
                    errhint("A cost of 0 reads the key's state without taking anything.")));
  bool transactional = def->durability == Durability::kTransactional && cost > 0;
  if (transactional) {
    PreventCommandIfReadOnly("sc_throttle()");
    ReserveThrottled();  // before the call takes anything: keeping it then cannot fail
  }
  TupleDesc desc = ResultDesc(fcinfo);
  EnsureFlusherFast();
  // What the transaction keeps, read before BufferThrottle, which works on its own copy of the
  // definition and may look it up again (and free the cached one).
  int32 counter = def->id;
  GcraLimit limit = def->limit;
  GcraAnswer answer = BufferThrottle(*def, key, cost);
  if (transactional && answer.allowed) NoteThrottled(counter, limit, key, cost);
  EnsureFlusherFast(true);
  Datum values[4] = {BoolGetDatum(answer.allowed), Int64GetDatum(answer.remaining),
                     answer.retry_after == GcraAnswer::kNever ? (Datum)0
                                                              : Duration(answer.retry_after),
                     Duration(answer.reset_after)};
  bool nulls[4] = {false, false, answer.retry_after == GcraAnswer::kNever, false};
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
