// sums.cpp: slotted_counter.counter_totals, the sum of each (counter, bucket) of
// slotted_counter.key_values (sums.hpp); and the triggers that keep the filter of stored keys
// (those on key_values are the sums' own).
//
// The triggers on key_values (the install script): whatever writes it (a flush, a fold, a
// write-through, the retention pass, sc_drop_buckets, sc_drop, a restore's COPY, a superuser's
// hand) leaves every sum equal to its rows, committed or rolled back with them, and a crash cannot
// part them. A row inserted or updated is summed by a row trigger into this backend's changes, and
// the statement's trigger adds them at its end; rows deleted, from the statement's transition
// table. No trigger on INSERT or UPDATE has a transition table: while one has, every such
// statement collects its rows into a tuplestore, fired or not (PostgreSQL reads the flags of the
// trigger descriptor), which was a quarter of a flush (docs/performance.md, "Flush"). A hot writer
// that keeps the sums itself (KeepingSums) queues no row event at all: the row triggers' WHEN
// asks slotted_counter.writer_keeps_sums().
#include <algorithm>

#include "pg.hpp"

extern "C" {
#include "commands/event_trigger.h"
}
#include "commands/trigger.h"

#include "definitions/catalog.hpp"
#include "definitions/counter_ref.hpp"
#include "definitions/sums.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"

namespace sc {

namespace {

// The change of each (counter, bucket), from `rows` (SQL yielding counter, bucket and v, a
// numeric), summed and added in (counter, bucket) order. A change of 0 leaves the row as it is.
#define SC_ADD_TO_SUMS(rows)                                                                      \
  "INSERT INTO slotted_counter.counter_totals AS s (counter, bucket, value) "                     \
  "SELECT counter, bucket, pg_catalog.sum(v) FROM (" rows ") c GROUP BY counter, bucket "         \
  "HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 ORDER BY counter, bucket "                  \
  "ON CONFLICT ON CONSTRAINT counter_totals_pkey DO UPDATE "                                      \
  "SET value = s.value OPERATOR(pg_catalog.+) excluded.value"

const char* const kDeletedSql = SC_ADD_TO_SUMS(
    "SELECT counter, bucket, OPERATOR(pg_catalog.-) value::pg_catalog.numeric AS v FROM old_rows");
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

// fcinfo's trigger data; 39P01 if slotted_counter.<name>() was called other than as a trigger.
TriggerData* TriggerCall(FunctionCallInfo fcinfo, const char* name) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("slotted_counter.%s() is called only as a trigger", name)));
  return reinterpret_cast<TriggerData*>(fcinfo->context);
}

// slotted_counter.key_values_changed(): the statement triggers on key_values' DELETE (its
// transition table) and TRUNCATE, and on an UPDATE of a key column (the filter's alone).
Datum TotalsChanged(PG_FUNCTION_ARGS) {
  TriggerData* trigger = TriggerCall(fcinfo, "key_values_changed");
  TriggerEvent event = trigger->tg_event;
  Assert(TRIGGER_FIRED_FOR_STATEMENT(event) && TRIGGER_FIRED_AFTER(event));
  Assert(!TRIGGER_FIRED_BY_INSERT(event));
  KeepStoredKeys(trigger);
  if (TRIGGER_FIRED_BY_UPDATE(event)) return PointerGetDatum(nullptr);
  SpiSession spi = ConnectSpi();
  if (SPI_register_trigger_data(trigger) != SPI_OK_TD_REGISTER)
    elog(ERROR, "registering the transition tables of slotted_counter.key_values failed");
  int rc = ExecuteLatest(TRIGGER_FIRED_BY_DELETE(event) ? kDeletedSql : kTruncatedSql);
  if (rc != SPI_OK_INSERT && rc != SPI_OK_DELETE)
    elog(ERROR, "keeping slotted_counter.counter_totals failed: %d", rc);
  if (TRIGGER_FIRED_BY_DELETE(event)) {
    rc = ExecuteLatest(kZeroSql);
    if (rc != SPI_OK_DELETE) elog(ERROR, "deleting the sums of 0 failed: %d", rc);
  }
  FinishSpi(spi);
  return PointerGetDatum(nullptr);
}

// The changes the row triggers collected for the statements of this backend not yet ended, in
// TopTransactionContext; gone with an abort (ForgetRowSums).
SumChange* row_changes = nullptr;
int64 row_count = 0;
int64 row_room = 0;

// The nest level of the open KeepingSums, or 0.
int keeping_level = 0;

void CollectChange(int32 counter, int64 bucket, int64 change) {
  if (row_count > 0) {
    SumChange& last = row_changes[row_count - 1];
    int64 added;
    if (last.counter == counter && last.bucket == bucket &&
        !__builtin_add_overflow(last.change, change, &added)) {
      last.change = added;
      return;
    }
  }
  if (row_count == row_room) {
    row_room = row_room == 0 ? 64 : row_room * 2;
    size_t bytes = sizeof(SumChange) * size_t(row_room);
    row_changes = static_cast<SumChange*>(
        row_changes == nullptr ? MemoryContextAllocHuge(TopTransactionContext, bytes)
                               : repalloc_huge(row_changes, bytes));
  }
  row_changes[row_count++] = SumChange{counter, bucket, change};
}

// A row's counter, bucket and value, as key_values' columns of those names hold them.
void CollectRow(Relation rel, TupleTableSlot* row, bool added) {
  TupleDesc desc = RelationGetDescr(rel);
  static const char* const kNames[3] = {"counter", "bucket", "value"};
  Datum values[3];
  for (int c = 0; c < 3; c++) {
    int attnum = SPI_fnumber(desc, kNames[c]);
    bool isnull;
    if (attnum <= 0) elog(ERROR, "slotted_counter.key_values has no column \"%s\"", kNames[c]);
    values[c] = slot_getattr(row, attnum, &isnull);
    if (isnull) return;  // the table's NOT NULLs make it unreachable
  }
  int64 value = DatumGetInt64(values[2]);
  // The negation of INT64_MIN, 2^63, is no bigint: it goes as INT64_MAX and 1.
  if (!added && value == PG_INT64_MIN) {
    CollectChange(DatumGetInt32(values[0]), DatumGetTimestampTz(values[1]), PG_INT64_MAX);
    value = 1;
  } else if (!added) {
    value = -value;
  }
  CollectChange(DatumGetInt32(values[0]), DatumGetTimestampTz(values[1]), value);
}

// slotted_counter.key_values_rows_changed(): for each row of an INSERT or UPDATE of key_values
// (no hot writer keeping the sums itself), its change, and an inserted row's key to the filter
// of stored keys; after each such statement, the changes collected to the sums.
Datum RowsChanged(PG_FUNCTION_ARGS) {
  TriggerData* trigger = TriggerCall(fcinfo, "key_values_rows_changed");
  TriggerEvent event = trigger->tg_event;
  Assert(TRIGGER_FIRED_AFTER(event));
  Assert(TRIGGER_FIRED_BY_INSERT(event) || TRIGGER_FIRED_BY_UPDATE(event));
  if (TRIGGER_FIRED_FOR_ROW(event)) {
    if (TRIGGER_FIRED_BY_INSERT(event)) {
      CollectRow(trigger->tg_relation, trigger->tg_trigslot, true);
      AddStoredRow(trigger->tg_relation, trigger->tg_trigslot);
    } else {
      CollectRow(trigger->tg_relation, trigger->tg_trigslot, false);
      CollectRow(trigger->tg_relation, trigger->tg_newslot, true);
    }
    return PointerGetDatum(nullptr);
  }
  if (row_count == 0) return PointerGetDatum(nullptr);
  // Taken first: an error in the statement below aborts them with it.
  SumChange* changes = row_changes;
  int64 n = row_count;
  row_changes = nullptr, row_count = 0, row_room = 0;
  SpiSession spi = ConnectSpi();
  AddToSums(changes, n);
  FinishSpi(spi);
  pfree(changes);
  return PointerGetDatum(nullptr);
}

// slotted_counter.writer_keeps_sums(): the WHEN of the row triggers on key_values.
Datum WriterKeepsSums(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(keeping_level > 0); }

SPIPlanPtr plan_sums = nullptr;

// slotted_counter.stored_keys_changed(): the statement triggers on slotted_counter.requests and
// slotted_counter.keys, which keep the filter of stored keys only.
Datum StoredKeysChanged(PG_FUNCTION_ARGS) {
  KeepStoredKeys(TriggerCall(fcinfo, "stored_keys_changed"));
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

void AddToSums(SumChange* changes, int64 n) {
  std::sort(changes, changes + n, [](const SumChange& a, const SumChange& b) {
    return a.counter != b.counter ? a.counter < b.counter : a.bucket < b.bucket;
  });
  int64 groups = 0;
  for (int64 i = 0; i < n; i++) {
    SumChange& last = changes[groups > 0 ? groups - 1 : 0];
    int64 added;
    if (groups > 0 && last.counter == changes[i].counter && last.bucket == changes[i].bucket &&
        !__builtin_add_overflow(last.change, changes[i].change, &added))
      last.change = added;
    else
      changes[groups++] = changes[i];
  }
  if (groups == 0) return;
  auto* counters = static_cast<int32*>(palloc(sizeof(int32) * groups));
  auto* buckets = static_cast<int64*>(palloc(sizeof(int64) * groups));
  auto* amounts = static_cast<int64*>(palloc(sizeof(int64) * groups));
  for (int64 g = 0; g < groups; g++)
    counters[g] = changes[g].counter, buckets[g] = changes[g].bucket,
    amounts[g] = changes[g].change;
  static const Oid types[3] = {INT4ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID};
  SPIPlanPtr plan = KeptPlan(
      &plan_sums,
      SC_ADD_TO_SUMS(
          "SELECT u.counter, u.bucket, u.change::pg_catalog.numeric AS v FROM ROWS FROM ("
          "pg_catalog.unnest($1::pg_catalog.int4[]), "
          "pg_catalog.unnest($2::pg_catalog.timestamptz[]), "
          "pg_catalog.unnest($3::pg_catalog.int8[])) AS u(counter, bucket, change)"),
      3, types);
  Datum args[3] = {Int4Array(counters, int(groups)), TimestampArray(buckets, int(groups)),
                   Int8Array(amounts, int(groups))};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, false,
                                false, 0);
  if (rc != SPI_OK_INSERT) elog(ERROR, "keeping slotted_counter.counter_totals failed: %d", rc);
  pfree(counters), pfree(buckets), pfree(amounts);
}

KeepingSums::KeepingSums() : level_(GetCurrentTransactionNestLevel()) {
  Assert(keeping_level == 0 && level_ > 0);
  keeping_level = level_;
}

KeepingSums::~KeepingSums() {
  Assert(keeping_level == 0 || keeping_level == level_);
  keeping_level = 0;
}

void ForgetRowSums(int level) {
  if (keeping_level >= level) keeping_level = 0;
  // Memory of TopTransactionContext: freed with it at the top, here at a subtransaction's abort.
  if (row_changes != nullptr && level > 1) pfree(row_changes);
  row_changes = nullptr, row_count = 0, row_room = 0;
}

}  // namespace sc

SC_ENTRY_POINT(sc_key_values_changed, sc::TotalsChanged)
SC_ENTRY_POINT(sc_key_values_rows_changed, sc::RowsChanged)
SC_ENTRY_POINT(sc_writer_keeps_sums, sc::WriterKeepsSums)
SC_ENTRY_POINT(sc_forget_stored_keys, sc::ForgetStoredKeysCall)
SC_ENTRY_POINT(sc_stored_keys_changed, sc::StoredKeysChanged)
SC_ENTRY_POINT(sc_tables_altered, sc::TablesAltered)
