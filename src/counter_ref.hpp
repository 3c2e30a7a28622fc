// counter_ref.hpp: how a SQL function receives the counter it works on.
//
// Versions 0.1 to 0.3 of the SQL objects passed a counter as its integer id, bound when a
// statement was parsed; from 0.4 a counter is passed as its name and bound when the call runs
// (counter_type.cpp). One library serves both: every entry point that takes a counter has a
// symbol per ABI, `sc_incr` for the id (the symbol the old scripts name) and `sc_incr_by_name`
// for the name, made from one template. So a database not yet updated, and a statement planned
// before ALTER EXTENSION UPDATE and still running during it, keep working; the hot path pays
// nothing for the choice.
#pragma once

#include "catalog.hpp"

namespace sc {

enum class Abi { kId, kName };

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
template <Abi abi>
pg_attribute_always_inline const CounterDef* CounterArgument(FunctionCallInfo fcinfo, int n,
                                                             uint32 need) {
  if constexpr (abi == Abi::kId)
    return GetCounter(PG_GETARG_INT32(n), need);
  else
    return GetCounter(NameArgument(PG_GETARG_DATUM(n)), need);
}

// The counter named by argument n, or nullptr if there is none; `shown` receives the name for a
// message.
template <Abi abi>
inline const CounterDef* FindCounterArgument(FunctionCallInfo fcinfo, int n, const char** shown) {
  if constexpr (abi == Abi::kId) {
    *shown = psprintf("%d", PG_GETARG_INT32(n));
    return FindCounter(PG_GETARG_INT32(n));
  } else {
    const text* name = NameArgument(PG_GETARG_DATUM(n));
    *shown = NameForMessage(text_to_cstring(name));
    return FindCounter(VARDATA_ANY(name), int(VARSIZE_ANY_EXHDR(name)));
  }
}

// A counter as a result of the SQL type of the ABI.
template <Abi abi>
inline Datum CounterResult(int32 id, const char* name) {
  if constexpr (abi == Abi::kId)
    return Int32GetDatum(id);
  else
    return PointerGetDatum(cstring_to_text(name));
}

}  // namespace sc

// Defines the two symbols of a SQL function whose C++ implementation is the template `impl`.
#define SC_ENTRY_POINTS(symbol, impl)                                     \
  extern "C" {                                                            \
  PG_FUNCTION_INFO_V1(symbol);                                            \
  PG_FUNCTION_INFO_V1(symbol##_by_name);                                  \
  }                                                                       \
  Datum symbol(PG_FUNCTION_ARGS) { return impl<sc::Abi::kId>(fcinfo); } \
  Datum symbol##_by_name(PG_FUNCTION_ARGS) { return impl<sc::Abi::kName>(fcinfo); }
