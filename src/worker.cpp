// worker.cpp: the flusher, one background worker per database that uses slotted_counter.
//
// No per-database setting starts it: every write (sc_incr, sc_create, sc_rollup) makes sure its
// database has one (EnsureFlusher), registering a dynamic worker when there is none. The worker
// claims its database's DatabaseSlot (slots_lock), then loops: answer write-through requests,
// flush every flush_interval or when sc_rollup() asks, start the attacher when an attachment is
// due (attach_run.cpp; no code of a user ever runs in the flusher), sleep on its latch.
//
// On SIGTERM (shutdown, pg_terminate_backend, DROP DATABASE ... WITH (FORCE)) it keeps answering
// write-throughs until no client of its database is left (5 s at most), gives up its slot, then
// flushes one last time and exits with code 0, so the postmaster never restarts it: the next write
// starts a new one. The hand-over is Dekker-style: the flusher clears worker_pid, then (after a
// barrier) reads the buffer for its last flush; a writer adds to the buffer, then (after a
// barrier) reads worker_pid. So a write either is seen by that last flush, or sees no flusher
// and starts one. Two flushers of one database may overlap for a moment; in_flush marks and the
// atomic take of write-through requests keep them from doing the same work twice.
// When the extension has been dropped from its database, it frees the slot and exits.
#include "worker.hpp"

#include "buffer.hpp"
#include "flush.hpp"
#include "settings.hpp"
#include "databases.hpp"
#include "shmem.hpp"
#include "write_through.hpp"

extern "C" {
PGDLLEXPORT void slotted_counter_flusher_main(Datum arg);
}

namespace sc {

DatabaseSlot* my_flusher_slot = nullptr;

namespace {


constexpr int kStartRetryMs = 10000;
// Fast shutdown signals clients and workers together; clients are gone within milliseconds.
// (Smart shutdown signals workers only after the clients left; pg_terminate_backend on the
// flusher leaves them connected, so the wait is bounded.)
constexpr int kShutdownWaitMs = 5000;
// How long the last flush is tried again when it fails. Not longer: pg_ctl waits 60 s for a
// shutdown, and what that flush cannot write stays in the buffer, which a clean shutdown saves
// to a file (saved_values.cpp).
constexpr int kFinalFlushMs = 3000;
constexpr int kErrorBackoffMs = 1000;

// Cleared for the flushes of a shutdown: no attacher starts then.
bool start_attachers = true;

// A failing flusher says so when it starts failing (a WARNING), then at most every
// kFailureLogMs while it goes on failing, and once more when a flush commits again.
constexpr int kFailureLogMs = 60000;
TimestampTz failure_logged_at = 0;
// Whether the last flush failed: the state the flusher rests in between flushes.
bool flush_failing = false;
// Whether the database has attachments (as of the last committed flush): the flusher then stays,
// to start their runs.
bool has_attachments = false;
// The database's name, read once at start: the reports of a failed flush are made outside any
// transaction, where no catalog can be read.
char db_name[NAMEDATALEN];

// The slot of db, or a free slot now assigned to db; nullptr if all are taken. slots_lock held.
DatabaseSlot* SlotFor(Oid db) {
  DatabaseSlot* free_slot = nullptr;
  for (int i = 0; i < shared->max_databases; i++) {
    DatabaseSlot* s = &shared->slots[i];
    if (s->db == db) return s;
    if (s->db == InvalidOid && free_slot == nullptr) free_slot = s;
  }
  if (free_slot != nullptr) {
    // Readers find slots by db without a lock (FindSlot): reset the ring and the fold epochs
    // before the slot names its new database.
    SpinMutex mutex{&free_slot->dirty_mutex};
    RingReset(free_slot->dirty, mutex);
    ResetFoldEpochs(free_slot);
    pg_write_barrier();
    free_slot->db = db;
    free_slot->worker_pid = 0;
    free_slot->worker_latch = nullptr;
    free_slot->start_requested = 0;
    pg_atomic_write_u32(&free_slot->leave_requested, 0);
    SpinLockAcquire(&free_slot->mutex);
    free_slot->worker_state = kWorkerNone;
    free_slot->flush_requested = free_slot->flush_done = free_slot->flush_failed = 0;
    free_slot->flush_error_code = 0;
    free_slot->flush_error[0] = '\0';
    free_slot->flush_error_at = 0;
    free_slot->flush_failures = 0;
    free_slot->last_flush_rows = 0;
    free_slot->flushes = free_slot->rows_written = free_slot->write_throughs = 0;
    free_slot->attach_skipped = free_slot->attach_errors = 0;
    free_slot->last_flush_at = 0;
    free_slot->last_flush_ms = 0;
    free_slot->totals_writers = 0;
    free_slot->totals_writers_since = 0;
    free_slot->attacher_pid = 0;
    free_slot->attacher_requested = 0;
    free_slot->run_open = free_slot->run_cut = free_slot->run_timed_out = false;
    SpinLockRelease(&free_slot->mutex);
  }
  return free_slot;
}

// Describes a worker of database db: the flusher, or the attacher (attach_run.cpp), with `extra`
// in bgw_extra.
BackgroundWorker DescribeWorker(Oid db, const char* function, const char* type,
                                TimestampTz extra = 0) {
  BackgroundWorker worker;
  memset(&worker, 0, sizeof(worker));
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  worker.bgw_restart_time = BGW_NEVER_RESTART;
  strlcpy(worker.bgw_library_name, "slotted_counter", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
  snprintf(worker.bgw_name, BGW_MAXLEN, "%s for database %u", type, db);
  strlcpy(worker.bgw_type, type, BGW_MAXLEN);
  worker.bgw_main_arg = ObjectIdGetDatum(db);
  memcpy(worker.bgw_extra, &extra, sizeof(extra));
  worker.bgw_notify_pid = 0;
  return worker;
}

bool RegisterWorker(Oid db, const char* function, const char* type, TimestampTz extra = 0) {
  BackgroundWorker worker = DescribeWorker(db, function, type, extra);
  return RegisterDynamicBackgroundWorker(&worker, nullptr);
}

const char* const kFlusherMain = "slotted_counter_flusher_main";
const char* const kFlusherType = "slotted_counter flusher";

bool RegisterFlusher(Oid db) { return RegisterWorker(db, kFlusherMain, kFlusherType); }

// Starts the database's attacher if an attachment is due and none runs (or was registered in
// the last kStartRetryMs). The flusher never waits for it.
void StartAttacherIfDue(Oid db, TimestampTz due) {
  TimestampTz now = GetCurrentTimestamp();
  if (due > now) return;
  SpinLockAcquire(&my_flusher_slot->mutex);
  bool start = my_flusher_slot->attacher_pid == 0 &&
               (my_flusher_slot->attacher_requested == 0 ||
                TimestampDifferenceExceeds(my_flusher_slot->attacher_requested, now,
                                           kStartRetryMs));
  if (start) my_flusher_slot->attacher_requested = now;
  SpinLockRelease(&my_flusher_slot->mutex);
  if (start) (void)StartAttacher(db);
}

// Reports a failed flush, the failures in a row counting it.
void LogFailure(int code, const char* error, uint64 failures) {
  TimestampTz now = GetCurrentTimestamp();
  if (failures == 1) {
    ereport(WARNING, (errcode(code),
                      errmsg("could not flush the counters of database \"%s\": %s",
                             db_name, error),
                      errdetail("Nothing is lost: the values stay in the buffer, and the flusher "
                                "tries again every second. slotted_counter.stats shows the "
                                "failures.")));
  } else if (TimestampDifferenceExceeds(failure_logged_at, now, kFailureLogMs)) {
    ereport(LOG, (errcode(code),
                  errmsg("the counters of database \"%s\" still cannot be flushed after %llu "
                         "attempts: %s",
                         db_name, (unsigned long long)failures, error)));
  } else {
    return;
  }
  failure_logged_at = now;
}

void SetWorkerState(WorkerState state) {
  SpinLockAcquire(&my_flusher_slot->mutex);
  my_flusher_slot->worker_state = state;
  SpinLockRelease(&my_flusher_slot->mutex);
}

// Gives up the slot, if this process still holds it; new writers then start a new flusher.
void LeaveSlot(int, Datum) {
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  bool owned = my_flusher_slot->worker_pid == MyProcPid;
  if (owned) {
    my_flusher_slot->worker_pid = 0;
    my_flusher_slot->worker_latch = nullptr;
    my_flusher_slot->start_requested = 0;
  }
  LWLockRelease(shared->slots_lock);
  if (owned) SetWorkerState(kWorkerNone);
  ConditionVariableBroadcast(&my_flusher_slot->done_cv);
}

// Claims db's slot; false if another flusher already serves it.
bool ClaimSlot(Oid db) {
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  DatabaseSlot* slot = SlotFor(db);
  bool claimed = slot != nullptr && slot->worker_pid == 0;
  if (claimed) {
    slot->worker_pid = MyProcPid;
    slot->worker_latch = MyLatch;
    my_flusher_slot = slot;
  }
  LWLockRelease(shared->slots_lock);
  return claimed;
}

void FreeSlot() {
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  my_flusher_slot->worker_pid = 0;
  my_flusher_slot->worker_latch = nullptr;
  my_flusher_slot->db = InvalidOid;
  LWLockRelease(shared->slots_lock);
}

bool ExtensionInstalled() {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  bool installed = OidIsValid(get_extension_oid("slotted_counter", true));
  if (db_name[0] == '\0') {
    const char* name = get_database_name(MyDatabaseId);
    strlcpy(db_name, name != nullptr ? name : "?", sizeof(db_name));
  }
  CommitTransactionCommand();
  return installed;
}

// One flush, recorded in the slot's statistics; false if it failed (already logged).
bool FlushAndRecord(Oid db) {
  SpinLockAcquire(&my_flusher_slot->mutex);
  uint64 ticket = my_flusher_slot->flush_requested;
  my_flusher_slot->worker_state = kWorkerFlushing;
  SpinLockRelease(&my_flusher_slot->mutex);
  pgstat_report_activity(STATE_RUNNING, "flush");

  TimestampTz start = GetCurrentTimestamp();
  MemoryContext context = CurrentMemoryContext;
  volatile int64 rows = -1;
  TimestampTz attachments_due = DT_NOEND;
  int error_code = 0;
  char error[sizeof(my_flusher_slot->flush_error)];
  PG_TRY();
  {
    rows = FlushDatabase(db, &attachments_due);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData* edata = CopyErrorData();
    error_code = edata->sqlerrcode;
    strlcpy(error, edata->message != nullptr ? edata->message : "unknown error", sizeof(error));
    FreeErrorData(edata);
    FlushErrorState();
    AbortCurrentTransaction();
    AbandonTotalsWrite();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  // Attached tables follow a committed flush, written by the attacher in a process of its own.
  if (rows >= 0 && start_attachers) StartAttacherIfDue(db, attachments_due);
  if (rows >= 0) has_attachments = attachments_due != DT_NOEND;
  pgstat_report_activity(STATE_IDLE, nullptr);

  TimestampTz end = GetCurrentTimestamp();
  flush_failing = rows < 0;
  SpinLockAcquire(&my_flusher_slot->mutex);
  my_flusher_slot->worker_state = flush_failing ? kWorkerFailing : kWorkerIdle;
  uint64 failures = my_flusher_slot->flush_failures;
  if (rows >= 0) {
    my_flusher_slot->flush_failures = 0;
    my_flusher_slot->flush_done = ticket;
    my_flusher_slot->last_flush_rows = rows;
    my_flusher_slot->flushes++;
    my_flusher_slot->rows_written += uint64(rows);
    my_flusher_slot->last_flush_at = end;
    my_flusher_slot->last_flush_ms = double(end - start) / 1000.0;
  } else {
    failures = ++my_flusher_slot->flush_failures;
    my_flusher_slot->flush_failed = ticket;
    my_flusher_slot->flush_error_code = error_code;
    memcpy(my_flusher_slot->flush_error, error, sizeof(error));
    my_flusher_slot->flush_error_at = end;
  }
  SpinLockRelease(&my_flusher_slot->mutex);
  ConditionVariableBroadcast(&my_flusher_slot->done_cv);
  if (rows < 0)
    LogFailure(error_code, error, failures);
  else if (failures > 0)
    ereport(LOG, (errmsg("the counters of database \"%s\" are flushed again, after %llu failed "
                         "attempts", db_name, (unsigned long long)failures)));
  return rows >= 0;
}

// Answers pending write-throughs; false if that failed (already logged).
bool ServeAndRecord(Oid db) {
  MemoryContext context = CurrentMemoryContext;
  volatile int served = 0;
  volatile bool ok = true;
  PG_TRY();
  {
    served = ServeWriteThroughs(db);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    EmitErrorReport();
    FlushErrorState();
    AbortCurrentTransaction();
    AbandonTotalsWrite();
    ok = false;
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  if (served > 0) {
    SpinLockAcquire(&my_flusher_slot->mutex);
    my_flusher_slot->write_throughs += uint64(served);
    SpinLockRelease(&my_flusher_slot->mutex);
    ConditionVariableBroadcast(&my_flusher_slot->done_cv);
  }
  return ok;
}

bool FlushRequested() {
  SpinLockAcquire(&my_flusher_slot->mutex);
  bool requested = my_flusher_slot->flush_requested > my_flusher_slot->flush_done;
  SpinLockRelease(&my_flusher_slot->mutex);
  return requested;
}

void WaitOnLatch(long timeout_ms) {
  int events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (timeout_ms >= 0 ? WL_TIMEOUT : 0);
  (void)WaitLatch(MyLatch, events, timeout_ms, PG_WAIT_EXTENSION);
  ResetLatch(MyLatch);
  CHECK_FOR_INTERRUPTS();
}

// Gives up the slot (a no-op once done), then flushes with a full scan: the hand-over at the
// top of this file. False if the flush failed.
bool HandOverAndFlush(Oid db) {
  LeaveSlot(0, 0);
  pg_memory_barrier();
  full_scan_next = true;
  return FlushAndRecord(db);
}

// After SIGTERM: serve the clients still connected, leave the slot, then flush until a flush
// succeeds or kFinalFlushMs passed (see the hand-over at the top of this file).
void ShutDown(Oid db) {
  SetWorkerState(kWorkerStopping);
  start_attachers = false;
  TimestampTz start = GetCurrentTimestamp();
  while (CountDBConnections(db) > 0 &&
         !TimestampDifferenceExceeds(start, GetCurrentTimestamp(), kShutdownWaitMs)) {
    ServeAndRecord(db);
    WaitOnLatch(10);
  }
  start = GetCurrentTimestamp();
  bool flushed;
  while (!(flushed = HandOverAndFlush(db)) &&
         !TimestampDifferenceExceeds(start, GetCurrentTimestamp(), kFinalFlushMs)) {
    ServeAndRecord(db);
    WaitOnLatch(kErrorBackoffMs);
  }
  ServeAndRecord(db);
  if (!flushed)
    ereport(LOG, (errmsg("the flusher of database \"%s\" exits with values it could not flush",
                         db_name),
                  errdetail("They stay in the buffer: the next flusher of the database writes "
                            "them, and a clean shutdown saves them to a file that the next start "
                            "restores.")));
}

// Whether the flusher has nothing to do and no one to do it for: no client is connected to its
// database, nothing was asked of it, its last flush committed, and no attachment needs it.
bool Idle(Oid db) {
  if (flush_failing || has_attachments || FlushRequested() || CountDBConnections(db) > 0)
    return false;
  SpinLockAcquire(&my_flusher_slot->mutex);
  bool attacher = my_flusher_slot->attacher_pid != 0;
  SpinLockRelease(&my_flusher_slot->mutex);
  return !attacher;
}

// After an idle flusher left: purges the database's clean entries and frees its slot, unless
// something of the database is left in the buffer or a client came meanwhile (its write keeps an
// entry dirty; its request for a flusher, start_requested, is made under slots_lock before it
// writes). A client that comes after that gets a slot anew, whose first flush scans everything.
void ReleaseSlot(Oid db) {
  uint32 kept = PurgeCleanEntries(db);
  bool clients = CountDBConnections(db) > 0;
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  DatabaseSlot* slot = my_flusher_slot;
  SpinLockAcquire(&slot->mutex);
  bool attacher = slot->attacher_pid != 0;
  SpinLockRelease(&slot->mutex);
  if (kept == 0 && !clients && !attacher && slot->db == db && slot->worker_pid == 0 &&
      slot->start_requested == 0 && pg_atomic_read_u32(&slot->closing) == 0)
    slot->db = InvalidOid;
  LWLockRelease(shared->slots_lock);
}

// Leaves for being idle: gives up the slot (the hand-over at the top of this file), flushes what
// is left, and gives the slot back. False if that flush failed and the slot could be taken again:
// the flusher then stays.
bool LeaveIdle(Oid db) {
  SetWorkerState(kWorkerStopping);
  if (!HandOverAndFlush(db)) return !ClaimSlot(db);
  ServeAndRecord(db);
  ReleaseSlot(db);
  return true;
}

}  // namespace

void RegisterFlusherAtStart(Oid db) {
  BackgroundWorker worker = DescribeWorker(db, kFlusherMain, kFlusherType);
  RegisterBackgroundWorker(&worker);
}

bool StartAttacher(Oid db, TimestampTz round) {
  if (RegisterWorker(db, "slotted_counter_attacher_main", "slotted_counter attacher", round))
    return true;
  ereport(LOG, (errmsg("could not start the slotted_counter attacher of database %u", db),
                errhint("Raise max_worker_processes; attachments wait until a worker is free.")));
  return false;
}

namespace {

// How long a write waits for an idle flusher of another database to leave, when every slot or
// every worker process is taken.
constexpr int kRoomForFlusherMs = 5000;

// Asks the flushers of other databases to leave now if they are idle (no client connected):
// their slots and processes are what this database needs. False if there is none to ask.
bool AskIdleFlushersToLeave() {
  bool asked = false;
  LWLockAcquire(shared->slots_lock, LW_SHARED);
  for (int i = 0; i < shared->max_databases; i++) {
    DatabaseSlot* s = &shared->slots[i];
    if (s->db == MyDatabaseId || s->worker_pid == 0) continue;
    pg_atomic_write_u32(&s->leave_requested, 1);
    if (s->worker_latch != nullptr) SetLatch(s->worker_latch);
    asked = true;
  }
  LWLockRelease(shared->slots_lock);
  return asked;
}

enum class Start { kRunning, kStarted, kNoSlot, kNoWorker };

// One attempt: this database's slot (assigned now if need be) with a flusher registered if none
// runs. A slot assigned by an attempt whose flusher could not be registered is given back: no
// value was written to it yet.
Start TryEnsureFlusher(DatabaseSlot** out) {
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  bool fresh = FindSlot(MyDatabaseId) == nullptr;
  DatabaseSlot* slot = SlotFor(MyDatabaseId);
  bool start = false;
  if (slot != nullptr && slot->worker_pid == 0 && pg_atomic_read_u32(&slot->closing) == 0) {
    TimestampTz now = GetCurrentTimestamp();
    start = slot->start_requested == 0 ||
            TimestampDifferenceExceeds(slot->start_requested, now, kStartRetryMs);
    if (start) slot->start_requested = now;
  }
  LWLockRelease(shared->slots_lock);
  *out = slot;
  if (slot == nullptr) return Start::kNoSlot;
  if (!start) return Start::kRunning;
  if (RegisterFlusher(MyDatabaseId)) return Start::kStarted;
  LWLockAcquire(shared->slots_lock, LW_EXCLUSIVE);
  slot->start_requested = 0;
  if (fresh && slot->db == MyDatabaseId && slot->worker_pid == 0) slot->db = InvalidOid;
  LWLockRelease(shared->slots_lock);
  return Start::kNoWorker;
}

}  // namespace

DatabaseSlot* EnsureFlusher(bool after_write) {
  // Unlocked fast path: a slot is reassigned only after its flusher left, so a live flusher in a
  // slot that still names this database is this database's flusher.
  if (after_write) pg_memory_barrier();
  DatabaseSlot* slot = my_flusher_slot;
  if (slot != nullptr && *reinterpret_cast<volatile int*>(&slot->worker_pid) != 0 &&
      *reinterpret_cast<volatile Oid*>(&slot->db) == MyDatabaseId)
    return slot;

  Start result = TryEnsureFlusher(&slot);
  // Every slot or worker process taken: idle flushers of other databases make room.
  if ((result == Start::kNoSlot || result == Start::kNoWorker) && AskIdleFlushersToLeave()) {
    TimestampTz since = GetCurrentTimestamp();
    do {
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 20,
                      PG_WAIT_EXTENSION);
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
      result = TryEnsureFlusher(&slot);
    } while ((result == Start::kNoSlot || result == Start::kNoWorker) &&
             !TimestampDifferenceExceeds(since, GetCurrentTimestamp(), kRoomForFlusherMs));
  }
  // After a write, fail softly: the write is done, and the next write tries again.
  int elevel = after_write ? WARNING : ERROR;
  if (result == Start::kNoSlot)
    ereport(elevel, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                     errmsg("too many databases use slotted_counter"),
                     errdetail("Each database that uses it needs one of the %d flusher slots "
                               "while a client of it is connected.",
                               shared->max_databases),
                     errhint("Raise slotted_counter.max_databases and restart the server.")));
  if (result == Start::kNoWorker)
    ereport(elevel, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                     errmsg("could not start the slotted_counter flusher"),
                     errhint("Raise max_worker_processes and restart the server.")));
  if (slot != nullptr) my_flusher_slot = slot;
  // A write that just went in may have noted its entry in a slot its database no longer has
  // (the flusher left it meanwhile): the next flush must not trust its ring alone.
  if (slot != nullptr && after_write) MarkDirtyUntracked(slot);
  return slot;
}

void WakeFlusher(DatabaseSlot* slot) {
  Latch* latch = *reinterpret_cast<Latch* volatile*>(&slot->worker_latch);
  if (latch != nullptr) SetLatch(latch);
}

int64 RequestFlush(DatabaseSlot* slot) {
  SpinLockAcquire(&slot->mutex);
  uint64 ticket = ++slot->flush_requested;
  SpinLockRelease(&slot->mutex);
  ConditionVariablePrepareToSleep(&slot->done_cv);
  int64 rows;
  bool failed;
  int error_code;
  char error[sizeof(slot->flush_error)];
  for (;;) {
    SpinLockAcquire(&slot->mutex);
    bool done = slot->flush_done >= ticket;
    failed = !done && slot->flush_failed >= ticket;
    rows = slot->last_flush_rows;
    error_code = slot->flush_error_code;
    memcpy(error, slot->flush_error, sizeof(error));
    SpinLockRelease(&slot->mutex);
    if (done || failed) break;
    EnsureFlusher(false);
    WakeFlusher(slot);
    ConditionVariableTimedSleep(&slot->done_cv, 1000, PG_WAIT_EXTENSION);
  }
  ConditionVariableCancelSleep();
  if (failed)
    ereport(ERROR, (errcode(error_code),
                    errmsg("could not flush counters: %s", error),
                    errdetail("Nothing was lost: the flusher keeps the values and tries again."),
                    errhint("The server log has the flusher's full error.")));
  return rows;
}

}  // namespace sc

void slotted_counter_flusher_main(Datum arg) {
  using namespace sc;
  Oid db = DatumGetObjectId(arg);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  BackgroundWorkerUnblockSignals();
  // A command on the whole database (DROP DATABASE, ...) waits for no connection of ours.
  if (DatabaseClosing(db)) proc_exit(0);
  BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);

  if (!ClaimSlot(db)) proc_exit(0);
  before_shmem_exit(LeaveSlot, 0);
  if (DatabaseClosing(db)) ShutdownRequestPending = true;
  if (!ExtensionInstalled()) {
    FreeSlot();
    proc_exit(0);
  }
  // Whatever the database's or the superuser's defaults say (ALTER DATABASE / ALTER ROLE ... SET),
  // the flusher's transactions must write, in read committed, with every trigger of its own
  // tables (none) firing, and wait for no one long: a read-only default made every flush fail and
  // a clean restart lose what was buffered. A flush that meets a user's lock gives up after a
  // second and tries again later, so that write-throughs and shutdown are never stuck behind it.
  static const char* const kSettings[][2] = {
      {"default_transaction_read_only", "off"},
      {"default_transaction_isolation", "read committed"},
      {"default_transaction_deferrable", "off"},
      {"session_replication_role", "origin"},
      {"statement_timeout", "0"},
      {"idle_in_transaction_session_timeout", "0"},
      {"search_path", "pg_catalog"},
      {"lock_timeout", "1000"}};
  for (const auto& setting : kSettings)
    SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
  SetWorkerState(kWorkerIdle);
  ConditionVariableBroadcast(&my_flusher_slot->done_cv);

  TimestampTz last_flush = GetCurrentTimestamp();
  TimestampTz idle_since = 0;
  bool failing = false;
  while (!ShutdownRequestPending) {
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    SetWorkerState(kWorkerServing);
    bool ok = ServeAndRecord(db);
    SetWorkerState(flush_failing ? kWorkerFailing : kWorkerIdle);

    TimestampTz now = GetCurrentTimestamp();
    int interval = settings.flush_interval;
    bool due = interval > 0 && TimestampDifferenceExceeds(last_flush, now, interval);
    if (due || FlushRequested()) {
      if (!ExtensionInstalled()) {
        FreeSlot();
        proc_exit(0);
      }
      ok = FlushAndRecord(db) && ok;
      last_flush = now;
    }
    failing = !ok;

    // With no client for idle_timeout, leave and give the slot back; the next write starts a
    // flusher again.
    // A write of another database that found every slot or worker taken asks for it at once.
    int idle_timeout = settings.idle_timeout;
    bool asked = pg_atomic_exchange_u32(&my_flusher_slot->leave_requested, 0) != 0;
    if (!failing && (idle_timeout > 0 || asked) && Idle(db)) {
      if (idle_since == 0) idle_since = GetCurrentTimestamp();
      if (asked || TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), idle_timeout)) {
        if (LeaveIdle(db)) proc_exit(0);
        idle_since = 0;
      }
    } else {
      idle_since = 0;
    }

    long timeout = -1;
    if (failing)
      timeout = kErrorBackoffMs;
    else if (interval > 0)
      timeout = Max(0L, long(interval) - long((GetCurrentTimestamp() - last_flush) / 1000));
    // Often enough to notice the idle time run out.
    if (idle_timeout > 0) {
      long check = Min(idle_timeout, 1000);
      timeout = timeout < 0 ? check : Min(timeout, check);
    }
    WaitOnLatch(timeout);
  }
  ShutDown(db);
  proc_exit(0);
}
