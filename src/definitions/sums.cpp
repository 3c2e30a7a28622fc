// sums.cpp: slotted_counter.counter_totals, the sum of each (counter, bucket) of
// slotted_counter.key_values; and the triggers that keep the filter of stored keys (those on
// key_values are the sums' own).
//
// One trigger function behind the statement triggers on key_values (the install script): each
// statement's rows, as its transition tables give them, are summed per (counter, bucket), and the
// sums move by that much in the same transaction. So whatever writes key_values (a flush, a fold, a
// write-through, the retention pass, sc_drop_buckets, sc_drop, a restore's COPY) leaves every sum
// equal to its rows, committed or rolled back with them, and a crash cannot part them. The rows
// move in (counter, bucket) order: two transactions lock the sums they share in the same order.
#include "pg.hpp"

extern "C" {
#include "commands/event_trigger.h"
}
#include "commands/trigger.h"

#include "definitions/catalog.hpp"
#include "definitions/counter_ref.hpp"
#include "definitions/sums_sql.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"

namespace sc {

namespace {

#define SC_NEW_ROWS "SELECT counter, bucket, value::pg_catalog.numeric AS v FROM new_rows"
#define SC_OLD_ROWS \
  "SELECT counter, bucket, OPERATOR(pg_catalog.-) value::pg_catalog.numeric AS v FROM old_rows"

const char* const kInsertedSql = SC_ADD_TO_SUMS(SC_NEW_ROWS);
const char* const kUpdatedSql = SC_ADD_TO_SUMS(SC_NEW_ROWS " UNION ALL " SC_OLD_ROWS);
const char* const kDeletedSql = SC_ADD_TO_SUMS(SC_OLD_ROWS);
// After a delete, the sums of its counters that came to 0 go: a dropped bucket leaves no row.
const char* const kZeroSql =
    "DELETE FROM slotted_counter.counter_totals s WHERE s.counter OPERATOR(pg_catalog.=) ANY "
    "(SELECT DISTINCT counter FROM old_rows) AND s.value OPERATOR(pg_catalog.=) 0";
const char* const kTruncatedSql = "DELETE FROM slotted_counter.counter_totals";

// Runs sql with the latest snapshot, as the statements that write key_values in a user's
// transaction do (sc_drop_buckets, sc_drop: spi.hpp, ExecuteWithLatestSnapshot): under REPEATABLE
// READ, a sum a flush changed after the transaction's snapshot is the one to change, not a
// serialization failure. (They lock the counter first: no flush writes its sums meanwhile.) Planned
// at each call: the transition tables are this call's.
int ExecuteLatest(const char* sql) {
  SPIPlanPtr plan = SPI_prepare(sql, 0, nullptr);
  if (plan == nullptr) elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  int rc = SPI_execute_snapshot(plan, nullptr, nullptr, GetLatestSnapshot(), InvalidSnapshot,
                                false, false, 0);
  SPI_freeplan(plan);
  return rc;
}

Datum TotalsChanged(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("slotted_counter.key_values_changed() is called only as a trigger")));
  auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
  TriggerEvent event = trigger->tg_event;
  Assert(TRIGGER_FIRED_FOR_STATEMENT(event) && TRIGGER_FIRED_AFTER(event));
  // The filter of stored keys (shared/stored_keys.hpp); an UPDATE of a key column fires the
  // trigger without transition tables, which is the filter's alone.
  KeepStoredKeys(trigger);
  if (TRIGGER_FIRED_BY_UPDATE(event) && trigger->tg_newtable == nullptr)
    return PointerGetDatum(nullptr);
  SpiSession spi = ConnectSpi();
  if (SPI_register_trigger_data(trigger) != SPI_OK_TD_REGISTER)
    elog(ERROR, "registering the transition tables of slotted_counter.key_values failed");
  const char* sql = TRIGGER_FIRED_BY_INSERT(event)   ? kInsertedSql
                    : TRIGGER_FIRED_BY_UPDATE(event) ? kUpdatedSql
                    : TRIGGER_FIRED_BY_DELETE(event) ? kDeletedSql
                                                     : kTruncatedSql;
  int rc = ExecuteLatest(sql);
  if (rc != SPI_OK_INSERT && rc != SPI_OK_DELETE)
    elog(ERROR, "keeping slotted_counter.counter_totals failed: %d", rc);
  if (TRIGGER_FIRED_BY_DELETE(event)) {
    rc = ExecuteLatest(kZeroSql);
    if (rc != SPI_OK_DELETE) elog(ERROR, "deleting the sums of 0 failed: %d", rc);
  }
  FinishSpi(spi);
  return PointerGetDatum(nullptr);
}

// slotted_counter.stored_keys_changed(): the statement triggers on slotted_counter.requests and
// slotted_counter.keys, which keep the filter of stored keys only.
Datum StoredKeysChanged(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("slotted_counter.stored_keys_changed() is called only as a trigger")));
  KeepStoredKeys(reinterpret_cast<TriggerData*>(fcinfo->context));
  return PointerGetDatum(nullptr);
}

// slotted_counter.tables_altered(): the event trigger after each ALTER TABLE. One of the filter's
// tables altered (pg_restore --disable-triggers disables and enables their triggers around its
// COPY, a superuser may by hand) makes the filter answer nothing until it is rebuilt: rows written
// while the triggers were off have no bits.
Datum TablesAltered(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("slotted_counter.tables_altered() is called only as an event "
                           "trigger")));
  auto* data = reinterpret_cast<EventTriggerData*>(fcinfo->context);
  if (data->parsetree != nullptr && IsA(data->parsetree, AlterTableStmt)) {
    auto* stmt = reinterpret_cast<AlterTableStmt*>(data->parsetree);
    Oid relid = RangeVarGetRelid(stmt->relation, NoLock, true);
    for (int t = 0; OidIsValid(relid) && t < kStoredTables; t++)
      if (relid == ExtensionRelation(kStoredTableNames[t])) ForgetStoredKeys(MyDatabaseId);
  }
  PG_RETURN_VOID();
}

// slotted_counter.forget_stored_keys(): this database's filter of stored keys answers nothing
// until its flusher rebuilt it (sc_rebuild_counter_totals, after writes no trigger saw).
Datum ForgetStoredKeysCall(PG_FUNCTION_ARGS) {
  ForgetStoredKeys(MyDatabaseId);
  PG_RETURN_VOID();
}

}  // namespace

}  // namespace sc

SC_ENTRY_POINT(sc_key_values_changed, sc::TotalsChanged)
SC_ENTRY_POINT(sc_forget_stored_keys, sc::ForgetStoredKeysCall)
SC_ENTRY_POINT(sc_stored_keys_changed, sc::StoredKeysChanged)
SC_ENTRY_POINT(sc_tables_altered, sc::TablesAltered)
