// attach.cpp: attachments, lagged totals written into users' own tables: sc_attach and sc_detach.
// (Running them: attach_run.cpp; what a dropped table takes along: definitions/drop.cpp.)
//
// An attachment names a counter, a target table (by OID, so that it follows renames and a dump
// names it), its key and value columns (by name) and an interval. Only the counter's owner may
// attach or detach it, and only to a table it owns (it has the privileges of the table's owner):
// the runs write the table as its owner, whoever that is at the time, as VACUUM does, so the
// owner's code never runs with anyone else's rights, and only while that owner may read the
// counter. The row is written by the extension, not by the caller, who needs no
// grant on slotted_counter.attachments.
#include "functions/attach.hpp"

#include "definitions/arguments.hpp"
#include "definitions/catalog.hpp"
#include "definitions/counter_ref.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"
#include "shared/flusher_slots.hpp"

extern "C" {
#include "storage/lmgr.h"
#include "utils/syscache.h"

}

namespace sc {

namespace {

// An `every` longer than this is refused, so that last_attempt + every is always a timestamp.
constexpr int kMaxEveryYears = 100;

AttrNumber RequireColumn(Oid relid, const char* column, const char* what) {
  AttrNumber attnum = get_attnum(relid, column);
  if (attnum == InvalidAttrNumber)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                    errmsg("column \"%s\" of relation \"%s\" does not exist", column,
                           get_rel_name(relid)),
                    errdetail("It was given as the %s column.", what)));
  return attnum;
}

void RequireType(Oid relid, AttrNumber attnum, const char* column, bool allow_float) {
  Oid type = get_atttype(relid, attnum);
  bool ok = type == INT2OID || type == INT4OID || type == INT8OID || type == NUMERICOID ||
            (allow_float && type == FLOAT8OID);
  if (!ok)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("column \"%s\" of relation \"%s\" is of type %s", column,
                           get_rel_name(relid), format_type_be(type)),
                    allow_float
                        ? errhint("Use a column of an integer, numeric or double precision type.")
                        : errhint("Use a column of an integer or numeric type.")));
}

void RequireColumnPrivilege(Oid relid, AttrNumber attnum, AclMode mode, const char* column,
                            const char* action) {
  // Granted on the table or on the column.
  if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK &&
      pg_attribute_aclcheck(relid, attnum, GetUserId(), mode) != ACLCHECK_OK)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied to %s column \"%s\" of relation \"%s\"", action,
                           column, get_rel_name(relid)),
                    errdetail("Attaching needs the privileges the attachment uses: to read the key "
                              "column and to update the value column. Its runs write the table "
                              "as the table's owner.")));
}

// The target must be a table this database's attacher can write for good: not a view or a
// temporary table (another session's, for the attacher).
void CheckTarget(Oid relid) {
  // Locked, it cannot go away before this transaction ends (a dropped table takes its
  // attachments with it: DetachDroppedTargets).
  LockRelationOid(relid, AccessShareLock);
  if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                    errmsg("relation with OID %u does not exist", relid)));
  char relkind = get_rel_relkind(relid);
  if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("\"%s\" is not a table", get_rel_name(relid))));
  if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("cannot attach temporary table \"%s\"", get_rel_name(relid)),
                    errdetail("The attachment is written by a background worker, which cannot "
                              "see this session's temporary tables.")));
}

void CheckEvery(const Interval* every) {
  if (every->month < 0 || every->day < 0 || every->time < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("every must not be negative")));
  constexpr int64 kMaxDays = int64(kMaxEveryYears) * 366;
  if (every->month > kMaxEveryYears * MONTHS_PER_YEAR || every->day > kMaxDays ||
      every->time > kMaxDays * USECS_PER_DAY ||
      int64(every->month) * DAYS_PER_MONTH + every->day + every->time / USECS_PER_DAY > kMaxDays)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("every must not be longer than %d years", kMaxEveryYears)));
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum Attach(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter",      "target", "key_column",
                                      "value_column", "every",  nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_attach()");
  RequireArguments(fcinfo, names);
  CounterDef def = *CounterArgument(fcinfo, 0, kOwn);
  RefuseOtherKinds(def, "sc_attach()");
  Oid relid = PG_GETARG_OID(1);
  const char* key_column = NameStr(*PG_GETARG_NAME(2));
  const char* value_column = NameStr(*PG_GETARG_NAME(3));
  // The lagged values are written by key into key_column: a text counter's would be its ids.
  if (def.text_keys)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("counter \"%s\" is keyed by text and cannot be attached", def.name),
                    errhint("Join slotted_counter.lagged on its key_text column instead.")));
  // A bucketed key has no one lagged value to write: which bucket, and what after a drop?
  if (def.bucketed)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("counter \"%s\" is bucketed and cannot be attached", def.name),
                    errhint("Attach an unbucketed counter, or join slotted_counter.key_values, "
                            "which holds one row per key and bucket.")));
  CheckTarget(relid);
  if (!OwnsRelation(GetUserId(), relid))
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("must be owner of table %s", get_rel_name(relid)),
                    errdetail("An attachment writes its table as the table's owner, so only a "
                              "role with the owner's privileges may attach one.")));
  CheckEvery(PG_GETARG_INTERVAL_P(4));
  if (strcmp(key_column, value_column) == 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("key_column and value_column must be different columns"),
                    errdetail("Both are \"%s\": the run would overwrite the keys it looks up.",
                              key_column)));
  AttrNumber key_attnum = RequireColumn(relid, key_column, "key");
  AttrNumber value_attnum = RequireColumn(relid, value_column, "value");
  RequireType(relid, key_attnum, key_column, false);
  RequireType(relid, value_attnum, value_column, true);
  RequireColumnPrivilege(relid, key_attnum, ACL_SELECT, key_column, "read");
  RequireColumnPrivilege(relid, value_attnum, ACL_UPDATE, value_column, "update");
  EnsureFlusher();

  Oid types[5] = {INT4OID, REGCLASSOID, NAMEOID, NAMEOID, INTERVALOID};
  Datum args[5] = {Int32GetDatum(def.id), ObjectIdGetDatum(relid), PG_GETARG_DATUM(2),
                   PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
  // The counter's row is locked FOR KEY SHARE: a drop of the counter that has not committed yet
  // is waited for, and if it commits, nothing is attached to the counter it dropped.
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(
      "INSERT INTO slotted_counter.attachments "
      "(counter, target, key_column, value_column, every) "
      "SELECT id, $2, $3, $4, $5 FROM slotted_counter.counters "
      "WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE "
      "ON CONFLICT (counter, target) DO UPDATE SET key_column = excluded.key_column, "
      "value_column = excluded.value_column, every = excluded.every, "
      "last_run = NULL, last_attempt = NULL, failures = 0, last_error = NULL",
      5, types, args, nullptr, false, 0);
  if (rc != SPI_OK_INSERT) elog(ERROR, "writing slotted_counter.attachments failed: %d", rc);
  bool attached = SPI_processed == 1;
  FinishSpi(spi);
  if (!attached) ReportUnknownCounter(def.name);
  PG_RETURN_VOID();
}

Datum Detach(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "target", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_detach()");
  RequireArguments(fcinfo, names);
  CounterDef def = *CounterArgument(fcinfo, 0, kOwn);
  Oid relid = PG_GETARG_OID(1);
  Oid types[2] = {INT4OID, OIDOID};
  Datum args[2] = {Int32GetDatum(def.id), ObjectIdGetDatum(relid)};
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(
      "DELETE FROM slotted_counter.attachments WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND target::pg_catalog.oid OPERATOR(pg_catalog.=) $2",
      2, types, args, nullptr, false, 0);
  if (rc != SPI_OK_DELETE) elog(ERROR, "writing slotted_counter.attachments failed: %d", rc);
  bool deleted = SPI_processed > 0;
  FinishSpi(spi);
  if (!deleted) {
    const char* table = get_rel_name(relid);
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    table != nullptr
                        ? errmsg("counter \"%s\" is not attached to \"%s\"", def.name, table)
                        : errmsg("counter \"%s\" is not attached to relation %u", def.name,
                                 relid)));
  }
  PG_RETURN_VOID();
}

SC_ENTRY_POINT(sc_attach, Attach)
SC_ENTRY_POINT(sc_detach, Detach)
