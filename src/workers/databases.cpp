// databases.cpp: commands on a whole database that counts: DROP DATABASE (plain or WITH (FORCE)),
// CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME TO and ... SET TABLESPACE.
//
// Each needs the database to have no other connection, and the database's flusher (and, now and
// then, its attacher) are connected to it. A ProcessUtility hook runs before the command, if the
// current role may run it on that database (owner, superuser, or a template to copy): it marks the
// database's slot closing, so that no flusher or attacher of it starts and one that starts leaves
// at once (worker.cpp, attach_run.cpp), waits for the database's clients to be gone, as core
// would (a client that just disconnected may still be ending: kClientWaitMs at most), then asks
// the running workers to leave (SIGTERM: the flusher flushes everything first, as at shutdown, so
// a copy made from the database holds every value) and waits for them (kStopWaitMs at most). The
// command so waits for the final flush, not for the flusher's idle_timeout. DROP DATABASE ... WITH
// (FORCE) terminates them itself. After a DROP DATABASE, whichever form, the database's buffer
// entries are purged and its slot is freed for another database. The mark is an atomic counter,
// taken back whatever the command's outcome.
#include "workers/databases.hpp"

#include "buffer/buffer.hpp"
#include "definitions/role_commands.hpp"
#include "shared/shmem.hpp"

extern "C" {
#include "commands/defrem.h"
#include "tcop/utility.h"
#include "utils/syscache.h"
#include "catalog/pg_database.h"
}

namespace sc {

namespace {

constexpr long kStopWaitMs = 15000;
// As long as core waits for other sessions of the database to end (CountOtherDBBackends).
constexpr long kClientWaitMs = 5000;

ProcessUtility_hook_type prev_process_utility = nullptr;

// The database a command works on as a whole, if it is one of those above; force: WITH (FORCE).
Oid TargetDatabase(Node* statement, bool* dropping, bool* force) {
  *dropping = *force = false;
  const char* name = nullptr;
  bool copying = false;
  switch (nodeTag(statement)) {
    case T_DropdbStmt: {
      auto* drop = reinterpret_cast<DropdbStmt*>(statement);
      name = drop->dbname;
      *dropping = true;
      ListCell* cell;
      foreach (cell, drop->options)
        if (strcmp(static_cast<DefElem*>(lfirst(cell))->defname, "force") == 0) *force = true;
      break;
    }
    case T_CreatedbStmt: {
      ListCell* cell;
      foreach (cell, reinterpret_cast<CreatedbStmt*>(statement)->options) {
        auto* option = static_cast<DefElem*>(lfirst(cell));
        if (strcmp(option->defname, "template") == 0 && option->arg != nullptr)
          name = defGetString(option);
      }
      copying = true;
      break;
    }
    case T_AlterDatabaseStmt: {
      auto* alter = reinterpret_cast<AlterDatabaseStmt*>(statement);
      ListCell* cell;
      foreach (cell, alter->options)
        if (strcmp(static_cast<DefElem*>(lfirst(cell))->defname, "tablespace") == 0)
          name = alter->dbname;
      break;
    }
    case T_RenameStmt: {
      auto* rename = reinterpret_cast<RenameStmt*>(statement);
      if (rename->renameType == OBJECT_DATABASE) name = rename->subname;
      break;
    }
    default:
      break;
  }
  if (name == nullptr) return InvalidOid;
  Oid db = get_database_oid(name, true);
  if (!OidIsValid(db) || db == MyDatabaseId) return InvalidOid;
  // Only for a role that may run the command: no one else can make a database's flusher leave.
  if (OwnsDatabase(GetUserId(), db)) return db;
  if (copying) {
    HeapTuple tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(db));
    bool is_template = HeapTupleIsValid(tuple) &&
                       reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple))->datistemplate;
    if (HeapTupleIsValid(tuple)) ReleaseSysCache(tuple);
    if (is_template) return db;
  }
  return InvalidOid;
}

// Asks the database's flusher and attacher to leave, each once (SIGTERM: the flusher flushes
// everything first, as at shutdown); true once neither is left. Each pid is read and signalled
// under the slots lock, under which both workers clear their pid as they exit (WithFlusherOf;
// the attacher: shmem.hpp), so a signal never reaches a process that reused a pid. As
// PostgreSQL signals backends under ProcArrayLock (CancelDBBackends).
bool SignalWorkers(DatabaseSlot* slot, Oid db, int* signalled_flusher, int* signalled_attacher) {
  auto lock = SlotsLock();
  return WithFlusherOf(lock, slot->claim, db, [&](bool ours, int32 flusher) {
    SpinLockAcquire(&slot->mutex);
    int attacher = ours ? slot->attacher_pid : 0;
    SpinLockRelease(&slot->mutex);
    if (flusher != 0 && flusher != *signalled_flusher) {
      (void)kill(flusher, SIGTERM);
      *signalled_flusher = flusher;
    }
    if (attacher != 0 && attacher != *signalled_attacher) {
      (void)kill(attacher, SIGTERM);
      *signalled_attacher = attacher;
    }
    return flusher == 0 && attacher == 0;
  });
}

// Waits, 10 ms at a time and answering interrupts, until done() or ms have passed; done()'s last
// answer.
template <typename Done>
bool WaitFor(long ms, Done done) {
  TimestampTz start = GetCurrentTimestamp();
  for (;;) {
    if (done()) return true;
    if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), ms)) return false;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                    WaitEventOf(Wait::kWorkersStop));
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
}

// Asks the database's flusher and attacher to leave and waits until they did (or the time is up:
// the command then fails as it would have).
void StopWorkers(DatabaseSlot* slot, Oid db) {
  int signalled_flusher = 0, signalled_attacher = 0;
  (void)WaitFor(kStopWaitMs,
                [&] { return SignalWorkers(slot, db, &signalled_flusher, &signalled_attacher); });
}

// After DROP DATABASE: nothing of the database stays in the buffer, and its slot is free once no
// worker of it is left. Clears the closing mark in the same step (core/database_slot.hpp:
// ForgetDropped), so that the slot cannot be given to another database with the mark still on it.
void ForgetDatabase(DatabaseSlot* slot, Oid db) {
  PurgeDatabase(db);
  auto lock = SlotsLock();
  (void)ForgetDropped(lock, slot->claim, db, [&] { return slot->attacher_pid == 0; });
}

void OnUtility(PlannedStmt* pstmt, const char* query, bool read_only_tree,
               ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
               DestReceiver* dest, QueryCompletion* qc) {
  // Every local is read after PG_TRY below, so volatile (a longjmp restores registers).
  const volatile ProcessUtility_hook_type next =
      prev_process_utility != nullptr ? prev_process_utility : standard_ProcessUtility;
  // Commands on roles and on the extension that reach counters (role_commands.cpp).
  BeforeRoleCommand(pstmt->utilityStmt);
  bool is_drop, is_force;
  const volatile Oid db = TargetDatabase(pstmt->utilityStmt, &is_drop, &is_force);
  const volatile bool dropping = is_drop, force = is_force;
  DatabaseSlot* const volatile slot = OidIsValid(db) ? FindSlot(db) : nullptr;
  if (slot == nullptr) {
    next(pstmt, query, read_only_tree, context, params, env, dest, qc);
    // Values of a database without a slot may be in the buffer too (restored at a start, before
    // its flusher came: saved_values.cpp).
    if (dropping) PurgeDatabase(db);
    return;
  }
  MarkClosing(slot->claim);
  volatile bool done = false;
  PG_TRY();
  {
    // WITH (FORCE) terminates every process of the database, ours included, and waits. With a
    // client still connected once core would have given up, the command fails anyway: the
    // flusher stays for it.
    if (!force && WaitFor(kClientWaitMs, [&] { return CountDBConnections(db) == 0; }))
      StopWorkers(slot, db);
    next(pstmt, query, read_only_tree, context, params, env, dest, qc);
    done = true;
  }
  PG_FINALLY();
  {
    if (!done || !dropping) UnmarkClosing(slot->claim);
  }
  PG_END_TRY();
  if (dropping) ForgetDatabase(slot, db);
}

}  // namespace

void InstallDatabaseHooks() {
  prev_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = OnUtility;
}

bool DatabaseClosing(Oid db) {
  DatabaseSlot* slot = FindSlot(db);
  return slot != nullptr && Closing(slot->claim);
}

}  // namespace sc
