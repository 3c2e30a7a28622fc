// counter_ref.hpp: how a SQL function receives the counter it works on: by name, bound when the
// call runs (counter_type.cpp), so that views, functions and prepared statements that name a
// counter outlive a drop and re-create.
#pragma once

#include "definitions/catalog.hpp"
#include "definitions/kinds.hpp"

namespace sc {

// A text (or slotted_counter) argument with a header the macros of varatt can read: a name is
// never toasted, but a value read from a wide row could be compressed in place.
inline const text* NameArgument(Datum datum) {
  auto* value = reinterpret_cast<struct varlena*>(DatumGetPointer(datum));
  if (unlikely(VARATT_IS_EXTERNAL(value) || VARATT_IS_COMPRESSED(value)))
    value = pg_detoast_datum_packed(value);
  return reinterpret_cast<const text*>(value);
}

// The counter named by argument n, which the current role may use as `need` says (42704 if there
// is none, 42501 if it may not).
pg_attribute_always_inline const CounterDef* CounterArgument(FunctionCallInfo fcinfo, int n,
                                                             uint32 need) {
  return GetCounter(NameArgument(PG_GETARG_DATUM(n)), need);
}

// The mark a text form puts in fcinfo->context when it calls the implementation of a bigint form
// with the key's id (text_key_functions.cpp): only such a call may use a counter keyed by text.
extern Node text_key_call;

// 42804: the bigint form of a function was called on a counter keyed by text.
void ReportKeyedByText(const CounterDef& def);

// The counter of a function that takes a key (or returns keys), named by argument n, as
// CounterArgument; one keyed by text only through a text form; one that counts numbers only
// (42809 for a rate limiter or a distinct counter).
pg_attribute_always_inline const CounterDef* KeyedCounterArgument(FunctionCallInfo fcinfo, int n,
                                                                  uint32 need) {
  const CounterDef* def = CounterArgument(fcinfo, n, need);
  if (unlikely(def->text_keys | def->limiter | def->distinct)) {
    if (def->limiter | def->distinct) ReportKind(*def, fcinfo);
    if (fcinfo->context != &text_key_call) ReportKeyedByText(*def);
  }
  return def;
}

// The rate limiter of sc_throttle, named by argument n, which the current role may write; one
// keyed by text only through the text form.
inline const CounterDef* LimiterArgument(FunctionCallInfo fcinfo, int n) {
  const CounterDef* def = CounterArgument(fcinfo, n, kUpdate);
  if (!def->limiter) ReportNotLimiter(*def);
  if (def->text_keys && fcinfo->context != &text_key_call) ReportKeyedByText(*def);
  return def;
}

// The distinct counter of sc_add (need kUpdate) or of a read (kSelect), named by argument n; one
// keyed by text only through the text forms.
inline const CounterDef* DistinctArgument(FunctionCallInfo fcinfo, int n, uint32 need) {
  const CounterDef* def = CounterArgument(fcinfo, n, need);
  if (!def->distinct) ReportNotDistinct(*def);
  if (def->text_keys && fcinfo->context != &text_key_call) ReportKeyedByText(*def);
  return def;
}

// The counter named by argument n, or nullptr if there is none; `shown` receives the name for a
// message.
inline const CounterDef* FindCounterArgument(FunctionCallInfo fcinfo, int n, const char** shown) {
  const text* name = NameArgument(PG_GETARG_DATUM(n));
  *shown = NameForMessage(text_to_cstring(name));
  return FindCounter(VARDATA_ANY(name), int(VARSIZE_ANY_EXHDR(name)));
}

// A counter as a result of the SQL type: its name.
inline Datum CounterResult(const char* name) { return PointerGetDatum(cstring_to_text(name)); }

}  // namespace sc

// Defines the SQL-callable symbol of a SQL function whose C++ implementation is `impl`.
#define SC_ENTRY_POINT(symbol, impl) \
  extern "C" {                       \
  PG_FUNCTION_INFO_V1(symbol);       \
  }                                  \
  Datum symbol(PG_FUNCTION_ARGS) { return impl(fcinfo); }
