// spi.cpp: the extension's own SQL, as the bootstrap superuser (see spi.hpp).
#include "spi.hpp"

#include "core/counter_table.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace sc {

SpiSession ConnectSpi() {
  SpiSession session;
  GetUserIdAndSecContext(&session.user, &session.security_context);
  session.caller = CurrentMemoryContext;
  SPI_connect();
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
                         session.security_context | SECURITY_LOCAL_USERID_CHANGE);
  return session;
}

void FinishSpi(const SpiSession& session) {
  SPI_finish();
  Assert(CurrentMemoryContext == session.caller);
  SetUserIdAndSecContext(session.user, session.security_context);
}

SPIPlanPtr KeptPlan(SPIPlanPtr* plan, const char* sql, int nargs, const Oid* types,
                    PlanChoice choice) {
  if (*plan == nullptr) {
    int options = choice == PlanChoice::kCustom    ? CURSOR_OPT_CUSTOM_PLAN
                  : choice == PlanChoice::kGeneric ? CURSOR_OPT_GENERIC_PLAN
                                                   : 0;
    SPIPlanPtr prepared = SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types), options);
    if (prepared == nullptr)
      elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
    SPI_keepplan(prepared);
    *plan = prepared;
  }
  return *plan;
}

int PlannerSettingsOff(std::initializer_list<const char*> settings) {
  int nest_level = NewGUCNestLevel();
  for (const char* setting : settings)
    (void)set_config_option(setting, "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
  return nest_level;
}

void PlannerSettingsBack(int nest_level) { AtEOXact_GUC(true, nest_level); }

void AbortAndLog(MemoryContext context, const char* what, const char* detail) {
  MemoryContextSwitchTo(context);
  ErrorData* error = CopyErrorData();
  FlushErrorState();
  AbortCurrentTransaction();
  ereport(LOG, (errcode(error->sqlerrcode),
                errmsg("slotted_counter could not %s: %s", what, error->message),
                detail != nullptr ? errdetail("%s", detail) : 0));
  FreeErrorData(error);
}

SPIPlanPtr KeyArrayPlan(SPIPlanPtr* plan, const char* sql) {
  static const Oid types[5] = {INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID,
                               TIMESTAMPTZARRAYOID};
  return KeptPlan(plan, sql, 5, types, PlanChoice::kCustom);
}

namespace {

// n values as a one-dimensional array of `type`, a by-value type of T's size.
template <typename T, typename ToDatum>
Datum ByValueArray(const T* values, int n, Oid type, ToDatum to_datum) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "int4, int8 and timestamptz arrays");
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int i = 0; i < n; i++) datums[i] = to_datum(values[i]);
  return PointerGetDatum(construct_array(datums, n, type, sizeof(T), true,
                                         sizeof(T) == 8 ? TYPALIGN_DOUBLE : TYPALIGN_INT));
}

}  // namespace

Datum Int4Array(const int32* values, int n) {
  return ByValueArray(values, n, INT4OID, [](int32 v) { return Int32GetDatum(v); });
}

Datum Int8Array(const int64* values, int n) {
  return ByValueArray(values, n, INT8OID, [](int64 v) { return Int64GetDatum(v); });
}

Datum TimestampArray(const int64* values, int n) {
  return ByValueArray(values, n, TIMESTAMPTZOID, [](int64 v) { return TimestampTzGetDatum(v); });
}

void ExecuteKeyArrays(SPIPlanPtr plan, int expected_rc, int n, const int32* counters,
                      const int64* keys, const int64* buckets, const int64* values,
                      const int64* stamps) {
  Datum args[5] = {Int4Array(counters, n), Int8Array(keys, n), TimestampArray(buckets, n),
                   Int8Array(values, n),
                   stamps != nullptr ? TimestampArray(stamps, n) : (Datum)0};
  // No stamps: the statement does not read $5.
  int rc = SPI_execute_plan(plan, args, stamps != nullptr ? nullptr : "    n", false, 0);
  if (rc != expected_rc) elog(ERROR, "writing slotted_counter tables failed: %d", rc);
}

int ExecuteWithLatestSnapshot(const char* sql, int nargs, Oid* types, Datum* args) {
  SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
  if (plan == nullptr) elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  // Firing the AFTER triggers at its end: those of key_values keep slotted_counter.counter_totals.
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, false,
                                true, 0);
  SPI_freeplan(plan);
  return rc;
}

}  // namespace sc
