// attach_run.cpp: the attacher, a short-lived background worker per database that runs the
// attachments that are due and exits.
//
// The flusher starts it after a committed flush when an attachment is due (worker.cpp), and
// never waits for it: code on the user's table (triggers, index expressions, policies) cannot
// delay or block a flush, and the attacher obeys pg_terminate_backend and shutdown at once.
//
// Each attachment runs in a transaction of its own. As the extension (the bootstrap superuser,
// who may read every counter) it reads the keys of the counter changed since the last successful
// run; then it updates the target the way PostgreSQL runs a table owner's code in maintenance
// commands (VACUUM, REFRESH MATERIALIZED VIEW): as the table's owner, whose code it is (so a
// trigger never runs with the rights of whoever attached, a superuser say), under
// SECURITY_RESTRICTED_OPERATION, so no deferred trigger, WITH HOLD cursor, SET ROLE or temporary
// table can carry that code past its run or into the superuser's part, with search_path
// "pg_catalog, pg_temp" (as PostgreSQL 17 and later run maintenance commands, on every version:
// the owner's code names what it uses, and a role that may create objects in another schema cannot
// put its own function in that code's way), and in a GUC nest level that is rolled back, so
// settings its code changes end with it. Only a role with the owner's privileges may attach, and
// each run checks that the table's owner, whoever it is now (a restore with --no-owner, REASSIGN
// OWNED, ALTER TABLE ... OWNER TO), may read the counter: the values go where that owner's code
// runs. A time limit (slotted_counter.attach_timeout) cancels the run; code that swallows the
// cancel is ended with the process a second later, and the next attacher records that run as
// failed.
//
// One process runs the due attachments of one table owner and hands the rest over to a new
// attacher: what an owner's code leaves in its session (session advisory locks, the random seed)
// ends with the process instead of reaching another owner's code. Owners take turns, one run
// each: the owner whose attachments ran least recently goes first, and a process hands over after
// each run as long as another owner has one due, so one owner's slow attachments delay another's
// by one run (at most slotted_counter.attach_timeout), however many they are. A run whose
// attachment row is locked (its sc_attach, sc_detach or sc_drop has not committed), or whose table
// another transaction holds in a mode that excludes an UPDATE (a DROP TABLE, an ALTER TABLE, a
// LOCK TABLE), is skipped and stays due: the attacher never waits for a user's transaction.
//
// Which keys changed: the flusher stamps every key_values row it writes with its transaction's
// start (updated_at), and a run records as its watermark the time from which on rows its snapshot
// could not see may be stamped (shmem.hpp: the key_values writers). The next run reads the keys
// stamped at or after it, so a flush that commits during a run is written by the next one.
//
// A failed run (its table, column or role gone, a lost privilege, its time limit, an error in a
// trigger) changes nothing, is logged (a WARNING when an attachment starts failing) and counted
// in slotted_counter.stats, is shown in slotted_counter.attachments (failures, last_error), and
// is tried again after its interval (`every`), like any run, and after three failures in a row
// no sooner than a minute later, doubled with each failure up to an hour (SC_ATTACHMENT_DUE_AT).
#include "functions/attach.hpp"

#include "definitions/catalog.hpp"
#include "workers/databases.hpp"
#include "definitions/privileges.hpp"
#include "settings.hpp"
#include "shared/flusher_slots.hpp"
#include "spi.hpp"
#include "workers/session.hpp"

extern "C" {
#include "catalog/pg_class.h"
#include "storage/lmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
}

namespace sc {

namespace {

// How long code that ignores the cancel of its time limit gets before its process ends.
constexpr int kKillGraceMs = 1000;

struct DueAttachment {
  int32 counter;
  Oid target;
  Oid owner;  // the target's owner when the round began; InvalidOid if it is gone
  NameData key_column;
  NameData value_column;
  bool has_last_run;
  TimestampTz last_run;
  TransactionId row_xmin;  // the version of its row that the round read
};

DatabaseSlot* my_slot = nullptr;
TimeoutId cancel_timeout;
TimeoutId kill_timeout;
volatile sig_atomic_t time_limit_reached = false;
volatile sig_atomic_t time_limit_ignored = false;

void OnTimeLimit() {
  time_limit_reached = true;
  QueryCancelPending = true;
  InterruptPending = true;
  SetLatch(MyLatch);
}

void OnTimeLimitIgnored() {
  time_limit_ignored = true;
  ProcDiePending = true;
  InterruptPending = true;
  SetLatch(MyLatch);
}

void StartTimeLimit() {
  time_limit_reached = false;
  if (settings.attach_timeout <= 0) return;
  EnableTimeoutParams limits[2];
  memset(limits, 0, sizeof(limits));
  limits[0].id = cancel_timeout;
  limits[0].type = TMPARAM_AFTER;
  limits[0].delay_ms = settings.attach_timeout;
  limits[1].id = kill_timeout;
  limits[1].type = TMPARAM_AFTER;
  limits[1].delay_ms = settings.attach_timeout + kKillGraceMs;
  enable_timeouts(limits, 2);
}

void StopTimeLimit() {
  DisableTimeoutParams limits[2] = {{cancel_timeout, false}, {kill_timeout, false}};
  disable_timeouts(limits, 2);
  // A cancel that fired as the run ended belongs to the run, not to what follows it.
  if (time_limit_reached) QueryCancelPending = false;
}

// Becomes the attacher of db's slot; false if the slot is gone or another attacher runs.
bool ClaimAttacherRole(Oid db) {
  DatabaseSlot* slot = FindSlot(db);
  if (slot == nullptr) return false;
  // attacher_pid changes under the slots lock too (shmem.hpp): whoever signals it holds that.
  auto lock = SlotsLock();
  lock.lock();
  SpinLockAcquire(&slot->mutex);
  bool claimed = slot->claim.db.load(std::memory_order_relaxed) == db && slot->attacher_pid == 0;
  if (claimed) {
    slot->attacher_pid = MyProcPid;
    slot->attacher_requested = 0;
  }
  SpinLockRelease(&slot->mutex);
  lock.unlock();
  if (claimed) my_slot = slot;
  return claimed;
}

// As the process exits, however: a run still open was cut short.
void LeaveSlot(int, Datum) {
  auto lock = SlotsLock();
  lock.lock();
  SpinLockAcquire(&my_slot->mutex);
  if (my_slot->attacher_pid == MyProcPid) {
    my_slot->attacher_pid = 0;
    if (my_slot->run_open) {
      my_slot->run_open = false;
      my_slot->run_cut = true;
      my_slot->run_timed_out = time_limit_ignored;
    }
  }
  SpinLockRelease(&my_slot->mutex);
  lock.unlock();
}

void MarkRun(const DueAttachment* a) {
  SpinLockAcquire(&my_slot->mutex);
  my_slot->run_open = a != nullptr;
  if (a != nullptr) {
    my_slot->run_counter = a->counter;
    my_slot->run_target = a->target;
  }
  SpinLockRelease(&my_slot->mutex);
}

void CountRun(int64 skipped, bool failed) {
  SpinLockAcquire(&my_slot->mutex);
  if (my_slot->claim.db.load(std::memory_order_relaxed) == MyDatabaseId) {
    my_slot->attach_skipped += uint64(skipped);
    if (failed) my_slot->attach_errors++;
  }
  SpinLockRelease(&my_slot->mutex);
}

// The extension's tables a run reads, in the order DROP EXTENSION locks them (the order the
// script created them), before anything else: attachments before counters was a deadlock with a
// DROP EXTENSION that held counters and waited for attachments.
void LockInDropOrder() {
  static const char* const kTables[] = {"counters", "key_values", "attachments"};
  for (const char* table : kTables) {
    Oid relid = ExtensionRelation(table);
    if (OidIsValid(relid)) LockRelationOid(relid, AccessShareLock);
  }
}

void Begin() {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  SPI_connect();
  PushActiveSnapshot(GetTransactionSnapshot());
  LockInDropOrder();
}

void End() {
  PopActiveSnapshot();
  SPI_finish();
  CommitTransactionCommand();
}

// The attachments of this database due at `round`, in their own transaction, in
// TopMemoryContext: by owner, the owner whose attachments ran least recently first (the turns of
// owners); within an owner's, those that did not fail last time first, then the longest waiting,
// so that an attachment whose runs fail or end with their process (every round, perhaps) delays
// none of its owner's others.
DueAttachment* ReadDue(TimestampTz round, int* count) {
  Begin();
  // Attachments of counters that no longer exist (an sc_attach that raced an sc_drop in an older
  // version) are nobody's to detach: they go.
  int rc = SPI_execute(
      "DELETE FROM slotted_counter.attachments a WHERE NOT EXISTS (SELECT FROM "
      "slotted_counter.counters c WHERE c.id OPERATOR(pg_catalog.=) a.counter)",
      false, 0);
  if (rc != SPI_OK_DELETE) elog(ERROR, "deleting orphan attachments failed: %d", rc);
  Oid type = TIMESTAMPTZOID;
  Datum arg = TimestampTzGetDatum(round);
  rc = SPI_execute_with_args(
      "SELECT * FROM (SELECT a.counter, a.target::pg_catalog.oid, a.key_column, a.value_column, "
      "a.last_run, c.relowner, a.every, a.last_attempt, a.failures, "
      "pg_catalog.max(a.last_attempt) OVER (PARTITION BY c.relowner) AS turn, "
      SC_ATTACHMENT_DUE_AT " AS due_at, a.xmin AS row_xmin "
      "FROM slotted_counter.attachments a "
      "LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.target) d "
      "WHERE d.due_at OPERATOR(pg_catalog.<=) $1 "
      "ORDER BY d.turn NULLS FIRST, d.relowner, d.failures OPERATOR(pg_catalog.>) 0, "
      "d.last_attempt NULLS FIRST, d.counter, d.target",
      1, &type, &arg, nullptr, true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.attachments failed: %d", rc);
  *count = int(SPI_processed);
  auto* due = static_cast<DueAttachment*>(
      MemoryContextAllocZero(TopMemoryContext, sizeof(DueAttachment) * (*count + 1)));
  for (int i = 0; i < *count; i++) {
    HeapTuple tup = SPI_tuptable->vals[i];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    DueAttachment& a = due[i];
    a.counter = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
    a.target = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
    namestrcpy(&a.key_column, SPI_getvalue(tup, desc, 3));
    namestrcpy(&a.value_column, SPI_getvalue(tup, desc, 4));
    Datum last = SPI_getbinval(tup, desc, 5, &isnull);
    a.has_last_run = !isnull;
    a.last_run = isnull ? 0 : DatumGetTimestampTz(last);
    Datum owner = SPI_getbinval(tup, desc, 6, &isnull);
    a.owner = isnull ? InvalidOid : DatumGetObjectId(owner);
    a.row_xmin = DatumGetTransactionId(SPI_getbinval(tup, desc, 12, &isnull));
  }
  End();
  return due;
}

// Reads the changed keys of the attachment's counter as of this transaction's snapshot: two
// int8[] (keys, values) in args; returns how many.
int ChangedValues(const DueAttachment& a, Datum* args) {
  Oid types[2] = {INT4OID, TIMESTAMPTZOID};
  Datum params[2] = {Int32GetDatum(a.counter), TimestampTzGetDatum(a.last_run)};
  char nulls[2] = {' ', a.has_last_run ? ' ' : 'n'};
  int rc = SPI_execute_with_args(
      "SELECT key, value FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " AND ($2::pg_catalog.timestamptz IS NULL "
      "OR updated_at OPERATOR(pg_catalog.>=) $2)",
      2, types, params, nulls, true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  int n = int(SPI_processed);
  auto* keys = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  auto* values = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int i = 0; i < n; i++) {
    bool isnull;
    keys[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
    values[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
  }
  args[0] = PointerGetDatum(construct_array(keys, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
  args[1] = PointerGetDatum(construct_array(values, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
  return n;
}

// Writes the changed values into the target as its owner, where nothing the owner's code does can
// outlast the statement or act as anyone else; returns the changed keys that have no row there.
int64 WriteAsOwner(const DueAttachment& a, Oid owner, const char* table, Datum* args) {
  const char* key = quote_identifier(NameStr(a.key_column));
  const char* value = quote_identifier(NameStr(a.value_column));
  char* sql = psprintf(
      "WITH changed AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), "
      "pg_catalog.unnest($2::pg_catalog.int8[])) AS c(key, value)), "
      "written AS (UPDATE %s AS t SET %s = c.value FROM changed c "
      "WHERE t.%s OPERATOR(pg_catalog.=) c.key RETURNING 1) "
      "SELECT (SELECT pg_catalog.count(*) FROM changed c WHERE NOT EXISTS "
      "(SELECT FROM %s AS t WHERE t.%s OPERATOR(pg_catalog.=) c.key)), "
      "(SELECT pg_catalog.count(*) FROM written)",
      table, value, key, table, key);
  Oid types[2] = {INT8ARRAYOID, INT8ARRAYOID};
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE |
                                    SECURITY_RESTRICTED_OPERATION);
  int nest_level = NewGUCNestLevel();
  RestrictSearchPathToCatalog();
  int rc = SPI_execute_with_args(sql, 2, types, args, nullptr, false, 0);
  AtEOXact_GUC(false, nest_level);
  SetUserIdAndSecContext(saved_user, saved_context);
  if (rc != SPI_OK_SELECT) elog(ERROR, "writing the attached table failed: %d", rc);
  bool isnull;
  return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

// kLocked: a user's transaction holds the attachment's row or its table, or changed the row since
// the round read it (an sc_attach that attached it again: its new columns, interval and reset
// watermark are the next round's to read, not this run's to overwrite), so it stays due for a
// later round; kOtherOwner: its table has another owner now, so it is handed over with the others.
enum class Outcome { kRan, kLocked, kOtherOwner };

// One attachment's run, in the current transaction, as `owner` (this process's table owner);
// changes nothing unless kRan, when *skipped is the changed keys with no row.
Outcome RunOne(const DueAttachment& a, Oid owner, TimestampTz watermark, int64* skipped) {
  Oid types[3] = {INT4OID, OIDOID, TIMESTAMPTZOID};
  Datum params[3] = {Int32GetDatum(a.counter), ObjectIdGetDatum(a.target),
                     TimestampTzGetDatum(watermark)};
  Oid row_types[3] = {INT4OID, OIDOID, XIDOID};
  Datum row_params[3] = {Int32GetDatum(a.counter), ObjectIdGetDatum(a.target),
                         TransactionIdGetDatum(a.row_xmin)};
  int rc = SPI_execute_with_args(
      "SELECT FROM slotted_counter.attachments WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND target::pg_catalog.oid OPERATOR(pg_catalog.=) $2 "
      "AND xmin OPERATOR(pg_catalog.=) $3 FOR UPDATE SKIP LOCKED",
      3, row_types, row_params, nullptr, false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "locking the attachment failed: %d", rc);
  if (SPI_processed == 0) return Outcome::kLocked;

  const CounterDef* found = FindCounter(a.counter);
  if (found == nullptr)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter %d does not exist", a.counter)));
  CounterDef def = *found;  // the cache's entry may go with the look-ups below
  // Nor for the table: a transaction that holds it in a conflicting mode may wait for the row
  // this run holds (a DROP TABLE deletes it: a deadlock). The time limit covers the rest.
  if (!ConditionalLockRelationOid(a.target, RowExclusiveLock)) return Outcome::kLocked;
  StartTimeLimit();
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(a.target));
  if (!HeapTupleIsValid(tuple))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                    errmsg("relation with OID %u does not exist", a.target)));
  auto* rel = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple));
  Oid table_owner = rel->relowner;
  char relkind = rel->relkind;
  ReleaseSysCache(tuple);
  if (table_owner != owner) {
    StopTimeLimit();
    return Outcome::kOtherOwner;
  }
  char* table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(a.target)),
                                           get_rel_name(a.target));
  if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("\"%s\" is not a table", table)));
  if ((PrivilegesOf(def, owner) & kSelect) == 0)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("role \"%s\", the owner of table %s, may not read counter \"%s\"",
                           GetUserNameFromId(owner, false), table, def.name),
                    errdetail("An attachment runs as its table's owner, who must hold SELECT on "
                              "the counter."),
                    errhint("The counter's owner can grant it with sc_grant().")));
  Datum args[2];
  *skipped = 0;
  if (ChangedValues(a, args) > 0) *skipped = WriteAsOwner(a, owner, table, args);
  StopTimeLimit();

  rc = SPI_execute_with_args(
      "UPDATE slotted_counter.attachments SET last_run = $3, last_attempt = pg_catalog.now(), "
      "failures = 0, last_error = NULL WHERE counter OPERATOR(pg_catalog.=) $1 "
      "AND target::pg_catalog.oid OPERATOR(pg_catalog.=) $2",
      3, types, params, nullptr, false, 0);
  if (rc != SPI_OK_UPDATE) elog(ERROR, "updating slotted_counter.attachments failed: %d", rc);
  return Outcome::kRan;
}

// Records a failed run in its row (in a transaction of its own) and in the log: a WARNING when
// the attachment starts failing, then LOG at each further failure (one per `every`). The row's
// last_attempt is when the run began (`began`), as a successful run's is: a waiter that counts
// on a run later than its own moment (attachments.md, "Waiting for attachments") must not take
// for one a run that began earlier and failed on what it saw then.
void RecordFailure(int32 counter, Oid target, const char* message, TimestampTz began) {
  // Set inside PG_TRY and read after it: volatile, so that an error does not leave them stale.
  const char* volatile table = nullptr;
  const char* volatile name = nullptr;
  volatile int failures = 1;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    Begin();
    // Copied at once into a context that outlives an abort of this transaction.
    char* relname = get_rel_name(target);
    table = relname != nullptr ? MemoryContextStrdup(TopMemoryContext, relname) : nullptr;
    const CounterDef* def = FindCounter(counter);
    name = def != nullptr ? MemoryContextStrdup(TopMemoryContext, def->name) : nullptr;
    Oid types[4] = {INT4OID, OIDOID, TEXTOID, TIMESTAMPTZOID};
    Datum params[4] = {Int32GetDatum(counter), ObjectIdGetDatum(target),
                       CStringGetTextDatum(message), TimestampTzGetDatum(began)};
    // A row a user's transaction holds is left as it is (the failure is still logged).
    int rc = SPI_execute_with_args(
        "WITH mine AS (SELECT ctid FROM slotted_counter.attachments "
        "WHERE counter OPERATOR(pg_catalog.=) $1 "
        "AND target::pg_catalog.oid OPERATOR(pg_catalog.=) $2 FOR UPDATE SKIP LOCKED) "
        "UPDATE slotted_counter.attachments a SET last_attempt = $4, "
        "failures = a.failures OPERATOR(pg_catalog.+) 1, last_error = $3 FROM mine "
        "WHERE a.ctid OPERATOR(pg_catalog.=) mine.ctid RETURNING a.failures",
        4, types, params, nullptr, false, 0);
    if (rc != SPI_OK_UPDATE_RETURNING)
      elog(ERROR, "updating slotted_counter.attachments failed: %d", rc);
    if (SPI_processed == 1) {
      bool isnull;
      failures = DatumGetInt32(
          SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    }
    End();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    EmitErrorReport();
    FlushErrorState();
    AbortCurrentTransaction();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  ereport(failures <= 1 ? WARNING : LOG,
          (errmsg("attachment of counter \"%s\" to %s failed: %s",
                  name != nullptr ? name : psprintf("%d", counter),
                  table != nullptr ? quote_identifier(table) : "a dropped table", message),
           errdetail("It is tried again after its interval (after three failures in a row, no "
                     "sooner than a minute later, doubling up to an hour); "
                     "slotted_counter.attachments shows its failures.")));
  CountRun(0, true);
}

// Runs one attachment as `owner`: kRan also when the run failed (and was recorded).
Outcome Run(const DueAttachment& a, Oid owner) {
  // Read before this run's snapshot: see the top of the file.
  TimestampTz watermark = TotalsWatermark(my_slot);
  MarkRun(&a);
  MemoryContext context = CurrentMemoryContext;
  char message[512];
  volatile bool failed = false;
  volatile Outcome outcome = Outcome::kRan;
  int64 skipped = 0;
  // Until the run's transaction has begun (its start is the attempt's time): the call's.
  volatile TimestampTz began = GetCurrentTimestamp();
  PG_TRY();
  {
    Begin();
    began = GetCurrentTransactionStartTimestamp();
    outcome = RunOne(a, owner, watermark, &skipped);
    End();
  }
  PG_CATCH();
  {
    StopTimeLimit();
    MemoryContextSwitchTo(context);
    ErrorData* edata = CopyErrorData();
    if (time_limit_reached && edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
      snprintf(message, sizeof(message),
               "the run took longer than slotted_counter.attach_timeout (%d ms)",
               settings.attach_timeout);
    else
      snprintf(message, sizeof(message), "%s", edata->message != nullptr ? edata->message : "");
    FreeErrorData(edata);
    FlushErrorState();
    AbortCurrentTransaction();
    failed = true;
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  MarkRun(nullptr);
  if (failed) {
    RecordFailure(a.counter, a.target, message, began);
    return Outcome::kRan;
  }
  if (outcome == Outcome::kRan) CountRun(skipped, false);
  return outcome;
}

// Leaves the attachments of other owners to a new attacher, started now, for the same round
// (those due when it began: each run moves its attachment's last_attempt past it, so the chain
// of attachers ends).
void HandOver(Oid db, TimestampTz round) {
  auto lock = SlotsLock();
  lock.lock();
  SpinLockAcquire(&my_slot->mutex);
  bool mine = my_slot->attacher_pid == MyProcPid;
  if (mine) {
    my_slot->attacher_pid = 0;
    my_slot->attacher_requested = GetCurrentTimestamp();
  }
  SpinLockRelease(&my_slot->mutex);
  lock.unlock();
  if (mine) StartAttacher(db, round);
}

// A run of the previous attacher that ended with its process (the time limit's second step, a
// termination) is recorded as the failure it was.
void RecordCutRun() {
  SpinLockAcquire(&my_slot->mutex);
  bool cut = my_slot->run_cut;
  bool timed_out = my_slot->run_timed_out;
  int32 counter = my_slot->run_counter;
  Oid target = my_slot->run_target;
  my_slot->run_cut = false;
  SpinLockRelease(&my_slot->mutex);
  if (!cut) return;
  RecordFailure(counter, target,
                timed_out ? "the run ignored the cancel of slotted_counter.attach_timeout and "
                            "was ended with its process"
                          : "the run was ended with its process (terminated)",
                GetCurrentTimestamp());
}

}  // namespace

}  // namespace sc

void slotted_counter_attacher_main(Datum arg) {
  using namespace sc;
  Oid db = DatumGetObjectId(arg);
  // A terminated attacher ends at once, in the middle of a run if need be: the run's
  // transaction aborts, and the next attacher records it as failed.
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();
  if (DatabaseClosing(db)) proc_exit(0);  // a command on the whole database waits for no one
  BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
  if (!ClaimAttacherRole(db)) proc_exit(0);
  before_shmem_exit(LeaveSlot, 0);
  if (DatabaseClosing(db)) proc_exit(0);
  // Whatever the database's and the roles' defaults say (session.hpp); the runs have their own
  // time limit, and never wait for a lock a user's transaction holds. The owner's code may change
  // settings within its run; they are rolled back after it.
  PinSessionSettings(0);
  cancel_timeout = RegisterTimeout(USER_TIMEOUT, OnTimeLimit);
  kill_timeout = RegisterTimeout(USER_TIMEOUT, OnTimeLimitIgnored);
  pgstat_report_activity(STATE_RUNNING, "running attachments");

  RecordCutRun();
  // The round this attacher belongs to: the flusher starts one now; one handed over keeps its
  // predecessor's.
  TimestampTz round;
  memcpy(&round, MyBgworkerEntry->bgw_extra, sizeof(round));
  if (round == 0) round = GetCurrentTimestamp();
  int count = 0;
  DueAttachment* due = ReadDue(round, &count);
  // This process's identity: the owner of the table of the first attachment that runs (one whose
  // row is locked runs no code and chooses nothing, else it could make every successor hand over
  // again while the lock lasts; a gone table's attachment fails before any code runs). After each
  // run, the turn goes to the next owner if one has an attachment due (ReadDue: owners in turn).
  Oid owner = InvalidOid;
  bool others = false;
  for (int i = 0; i < count && !(others && OidIsValid(owner)); i++) {
    CHECK_FOR_INTERRUPTS();
    if (OidIsValid(owner) && OidIsValid(due[i].owner) && due[i].owner != owner) {
      others = true;
      continue;
    }
    Oid as = OidIsValid(owner) ? owner : due[i].owner;
    Outcome outcome = Run(due[i], as);
    if (outcome == Outcome::kOtherOwner) {
      others = true;
    } else if (outcome == Outcome::kRan) {
      owner = as;
      for (int j = i + 1; j < count && !others; j++)
        others = OidIsValid(due[j].owner) && due[j].owner != owner;
    }
  }
  pgstat_report_activity(STATE_IDLE, nullptr);
  if (others) HandOver(db, round);
  proc_exit(0);
}
