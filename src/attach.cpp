// attach.cpp: lagged totals written into users' own tables (sc_attach, sc_detach, and the run).
//
// An attachment names a counter, a target table, its key and value columns, an interval and the
// role that attached. After each committed flush the flusher runs every attachment that is due,
// each in a transaction of its own and as that role: it sets value_column of the rows whose
// key_column equals a key of the counter changed since the attachment's last run (by
// totals.updated_at; the flusher is the only writer of totals, so no write slips between two
// runs), and counts the changed keys that have no row. A failing target is logged and counted,
// and changes nothing else. Every identifier is quoted.
#include "attach.hpp"

#include "catalog.hpp"
#include "shmem.hpp"
#include "worker.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_attach);
PG_FUNCTION_INFO_V1(sc_detach);
}

namespace sc {

namespace {

struct Attachment {
  int32 counter;
  Oid target;
  NameData key_column;
  NameData value_column;
  Oid role;
  bool has_last_run;
  TimestampTz last_run;
};

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
                    errhint("Use a column of an integer or numeric type.")));
}

void RequireColumnPrivilege(Oid relid, AttrNumber attnum, AclMode mode, const char* column,
                            const char* action) {
  // Granted on the table or on the column.
  if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK &&
      pg_attribute_aclcheck(relid, attnum, GetUserId(), mode) != ACLCHECK_OK)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied to %s column \"%s\" of relation \"%s\"", action,
                           column, get_rel_name(relid)),
                    errdetail("The flusher writes an attached table with the privileges of the "
                              "role that attached it.")));
}

// Runs an SPI statement on the catalog as the extension's owner (callers may not write it).
int ExecuteAsOwner(const char* sql, int nargs, Oid* types, Datum* args) {
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, saved_context | SECURITY_LOCAL_USERID_CHANGE);
  SPI_connect();
  int rc = SPI_execute_with_args(sql, nargs, types, args, nullptr, false, 0);
  uint64 processed = SPI_processed;
  SPI_finish();
  SetUserIdAndSecContext(saved_user, saved_context);
  if (rc < 0) elog(ERROR, "writing slotted_counter.attachments failed: %d", rc);
  return int(processed);
}

// The due attachments of this database, read in their own transaction.
Attachment* DueAttachments(int* count) {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  SPI_connect();
  PushActiveSnapshot(GetTransactionSnapshot());
  int rc = SPI_execute(
      "SELECT counter, target::pg_catalog.oid, key_column, value_column, role, last_run "
      "FROM slotted_counter.attachments a WHERE EXISTS (SELECT FROM pg_catalog.pg_class c "
      "WHERE c.oid OPERATOR(pg_catalog.=) a.target) AND (last_run IS NULL OR "
      "last_run OPERATOR(pg_catalog.+) every OPERATOR(pg_catalog.<=) pg_catalog.now())",
      true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.attachments failed: %d", rc);
  *count = int(SPI_processed);
  auto* due = static_cast<Attachment*>(
      MemoryContextAlloc(TopMemoryContext, sizeof(Attachment) * (*count + 1)));
  for (int i = 0; i < *count; i++) {
    HeapTuple tup = SPI_tuptable->vals[i];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    Attachment& a = due[i];
    a.counter = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
    a.target = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
    namestrcpy(&a.key_column, SPI_getvalue(tup, desc, 3));
    namestrcpy(&a.value_column, SPI_getvalue(tup, desc, 4));
    a.role = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &isnull));
    Datum last = SPI_getbinval(tup, desc, 6, &isnull);
    a.has_last_run = !isnull;
    a.last_run = isnull ? 0 : DatumGetTimestampTz(last);
  }
  PopActiveSnapshot();
  SPI_finish();
  CommitTransactionCommand();
  return due;
}

// One attachment's run, in the current transaction; returns the changed keys with no row.
int64 RunOne(const Attachment& a) {
  char* table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(a.target)),
                                           get_rel_name(a.target));
  const char* key = quote_identifier(NameStr(a.key_column));
  const char* value = quote_identifier(NameStr(a.value_column));
  char* sql = psprintf(
      "WITH changed AS (SELECT key, value FROM slotted_counter.totals "
      "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket IS NULL "
      "AND ($2::pg_catalog.timestamptz IS NULL OR updated_at OPERATOR(pg_catalog.>=) $2)), "
      "written AS (UPDATE %s AS t SET %s = c.value FROM changed c "
      "WHERE t.%s OPERATOR(pg_catalog.=) c.key RETURNING 1) "
      "SELECT (SELECT pg_catalog.count(*) FROM changed c WHERE NOT EXISTS "
      "(SELECT FROM %s AS t WHERE t.%s OPERATOR(pg_catalog.=) c.key)), "
      "(SELECT pg_catalog.count(*) FROM written)",
      table, value, key, table, key);
  Oid types[2] = {INT4OID, TIMESTAMPTZOID};
  Datum args[2] = {Int32GetDatum(a.counter), TimestampTzGetDatum(a.last_run)};
  char nulls[2] = {' ', a.has_last_run ? ' ' : 'n'};
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(a.role, saved_context | SECURITY_LOCAL_USERID_CHANGE);
  int rc = SPI_execute_with_args(sql, 2, types, args, nulls, false, 0);
  SetUserIdAndSecContext(saved_user, saved_context);
  if (rc != SPI_OK_SELECT) elog(ERROR, "writing the attached table failed: %d", rc);
  bool isnull;
  int64 skipped = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                              &isnull));
  // The next run starts from this run's start: the flusher writes totals only between runs.
  Oid run_types[2] = {INT4OID, REGCLASSOID};
  Datum run_args[2] = {Int32GetDatum(a.counter), ObjectIdGetDatum(a.target)};
  rc = SPI_execute_with_args(
      "UPDATE slotted_counter.attachments SET last_run = pg_catalog.now() "
      "WHERE counter OPERATOR(pg_catalog.=) $1 AND target OPERATOR(pg_catalog.=) $2",
      2, run_types, run_args, nullptr, false, 0);
  if (rc != SPI_OK_UPDATE) elog(ERROR, "updating slotted_counter.attachments failed: %d", rc);
  return skipped;
}

}  // namespace

void RunAttachments(Oid db, int64* skipped, int64* errors) {
  (void)db;
  *skipped = *errors = 0;
  int count = 0;
  Attachment* volatile due = nullptr;
  MemoryContext caller = CurrentMemoryContext;
  PG_TRY();
  {
    due = DueAttachments(&count);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller);
    EmitErrorReport();
    FlushErrorState();
    AbortCurrentTransaction();
    (*errors)++;
  }
  PG_END_TRY();
  MemoryContextSwitchTo(caller);
  if (due == nullptr) return;
  for (int i = 0; i < count; i++) {
    MemoryContext context = CurrentMemoryContext;
    PG_TRY();
    {
      SetCurrentStatementStartTimestamp();
      StartTransactionCommand();
      SPI_connect();
      PushActiveSnapshot(GetTransactionSnapshot());
      *skipped += RunOne(due[i]);
      PopActiveSnapshot();
      SPI_finish();
      CommitTransactionCommand();
    }
    PG_CATCH();
    {
      MemoryContextSwitchTo(context);
      EmitErrorReport();
      FlushErrorState();
      AbortCurrentTransaction();
      (*errors)++;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(context);
  }
  pfree(due);
}

}  // namespace sc

using namespace sc;

Datum sc_attach(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "target", "key_column", "value_column", "every"};
  RequireShared();
  PreventCommandDuringRecovery("sc_attach()");
  for (int n = 0; n < 5; n++)
    if (PG_ARGISNULL(n))
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("%s must not be null", names[n])));
  CounterDef def = *GetCounter(PG_GETARG_INT32(0));
  Oid relid = PG_GETARG_OID(1);
  const char* key_column = NameStr(*PG_GETARG_NAME(2));
  const char* value_column = NameStr(*PG_GETARG_NAME(3));
  Interval* every = PG_GETARG_INTERVAL_P(4);
  // A bucketed key has no one lagged value to write: which bucket, and what after a drop?
  if (def.bucketed)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("counter \"%s\" is bucketed and cannot be attached", def.name),
                    errhint("Attach an unbucketed counter, or join slotted_counter.totals, "
                            "which holds one row per key and bucket.")));
  char relkind = get_rel_relkind(relid);
  if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("\"%s\" is not a table", get_rel_name(relid))));
  if (every->month < 0 || every->day < 0 || every->time < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("every must not be negative")));
  AttrNumber key_attnum = RequireColumn(relid, key_column, "key");
  AttrNumber value_attnum = RequireColumn(relid, value_column, "value");
  RequireType(relid, key_attnum, key_column, false);
  RequireType(relid, value_attnum, value_column, true);
  RequireColumnPrivilege(relid, key_attnum, ACL_SELECT, key_column, "read");
  RequireColumnPrivilege(relid, value_attnum, ACL_UPDATE, value_column, "update");
  EnsureFlusher();

  Oid types[6] = {INT4OID, REGCLASSOID, NAMEOID, NAMEOID, INTERVALOID, OIDOID};
  Datum args[6] = {Int32GetDatum(def.id), ObjectIdGetDatum(relid), PG_GETARG_DATUM(2),
                   PG_GETARG_DATUM(3), PG_GETARG_DATUM(4), ObjectIdGetDatum(GetUserId())};
  ExecuteAsOwner(
      "INSERT INTO slotted_counter.attachments "
      "(counter, target, key_column, value_column, every, role) VALUES ($1, $2, $3, $4, $5, $6) "
      "ON CONFLICT (counter, target) DO UPDATE SET key_column = excluded.key_column, "
      "value_column = excluded.value_column, every = excluded.every, role = excluded.role, "
      "last_run = NULL",
      6, types, args);
  PG_RETURN_VOID();
}

Datum sc_detach(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "target"};
  RequireShared();
  PreventCommandDuringRecovery("sc_detach()");
  for (int n = 0; n < 2; n++)
    if (PG_ARGISNULL(n))
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("%s must not be null", names[n])));
  CounterDef def = *GetCounter(PG_GETARG_INT32(0));
  Oid relid = PG_GETARG_OID(1);
  Oid types[2] = {INT4OID, REGCLASSOID};
  Datum args[2] = {Int32GetDatum(def.id), ObjectIdGetDatum(relid)};
  int deleted = ExecuteAsOwner(
      "DELETE FROM slotted_counter.attachments WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND target OPERATOR(pg_catalog.=) $2",
      2, types, args);
  if (deleted == 0)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter \"%s\" is not attached to \"%s\"", def.name,
                           get_rel_name(relid))));
  PG_RETURN_VOID();
}
