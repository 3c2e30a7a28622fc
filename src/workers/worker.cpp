// worker.cpp: the flusher, one background worker per database that uses slotted_counter.
//
// No per-database setting starts it: every write (sc_incr, sc_create, sc_rollup) makes sure its
// database has one (EnsureFlusher, flusher_slots.cpp), registering a dynamic worker when there is
// none. The worker claims its database's DatabaseSlot (ClaimFlusherSlot, under slots_lock), then
// loops: answer write-through requests, flush every flush_interval or when sc_rollup() asks, start
// the attacher when an attachment is due (attach_run.cpp; no code of a user ever runs in the
// flusher), drop what the counters' retention expired after a flush (retention.cpp), sleep on its
// latch.
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
#include "buffer/buffer.hpp"
#include "workers/databases.hpp"
#include "workers/flush.hpp"
#include "buffer/rank_indexes.hpp"
#include "shared/flusher_slots.hpp"
#include "functions/retention.hpp"
#include "settings.hpp"
#include "shared/shmem.hpp"
#include "shared/stored_keys.hpp"
#include "workers/session.hpp"
#include "workers/write_through.hpp"
#include "spi.hpp"

extern "C" {
PGDLLEXPORT void slotted_counter_flusher_main(Datum arg);
}

namespace sc {

namespace {

// Fast shutdown signals clients and workers together; clients are gone within milliseconds.
// (Smart shutdown signals workers only after the clients left; pg_terminate_backend on the
// flusher leaves them connected, so the wait is bounded.)
constexpr int kShutdownWaitMs = 5000;
// How long the last flush is tried again when it fails. Not longer: pg_ctl waits 60 s for a
// shutdown, and what that flush cannot write stays in the buffer, which a clean shutdown saves
// to a file (saved_values.cpp).
constexpr int kFinalFlushMs = 3000;
constexpr int kErrorBackoffMs = 1000;
// How many flush intervals a flush runs before slotted_counter.stats shows it as lagging.
constexpr int kLaggingIntervals = 3;

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
// Whether the database has counters with a retention, which the flusher stays to expire.
bool has_retention = false;
// Whether a client wrote since the main loop last looked (a flush wrote rows, write-throughs
// were served): an application that connects for each request is seldom connected when the
// flusher counts connections, and its writes keep the flusher as a connection would.
bool wrote_since_check = false;
// The database's name, read once at start: the reports of a failed flush are made outside any
// transaction, where no catalog can be read.
char db_name[NAMEDATALEN];

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
  SpinMutex mutex = SlotMutex(my_flusher_slot);
  sc::SetWorkerState(my_flusher_slot->tickets, mutex, state);
}

// Gives up the slot, if this process still holds it; new writers then start a new flusher.
void LeaveSlot(int, Datum) {
  auto lock = SlotsLock();
  if (sc::LeaveSlot(lock, my_flusher_slot->claim, MyProcPid)) SetWorkerState(kWorkerNone);
  ConditionVariableBroadcast(&my_flusher_slot->done_cv);
}

// The extension is gone from the database: the slot is freed (core/database_slot.hpp).
void FreeSlot() {
  auto lock = SlotsLock();
  GiveUpAndFree(lock, my_flusher_slot->claim, MyProcPid);
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

// After a flush or a write-through failed: if it failed because the extension was dropped under
// it (its tables went while it waited for a lock on them), there is nothing to report and nothing
// left to flush: the slot is freed and the flusher exits.
void LeaveIfExtensionDropped() {
  if (ExtensionInstalled()) return;
  FreeSlot();
  proc_exit(0);
}

// Whether this flusher process has maintained its database's rank indexes yet: its first
// maintenance frees them all (a flusher that took over cannot know what the last one applied).
bool ranks_maintained = false;

// MaintainRankIndexes, an error logged (and the transaction it left aborted).
void MaintainRanks(Oid db) {
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    MaintainRankIndexes(db, !ranks_maintained);
    ranks_maintained = true;
  }
  PG_CATCH();
  {
    AbortAndLog(context, "maintain the indexes of sc_rank",
                "They are looked at again after the next flush.");
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

// The filter of stored keys (shared/stored_keys.hpp), rebuilt after a flush when it answers
// nothing or describes a table that is no longer key_values; an error is logged, and it is tried
// again after the next flush.
void KeepStoredKeys() {
  if (my_flusher_slot->stored.words == nullptr) return;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    StartTransactionCommand();
    Oid tables[kStoredTables];
    for (int t = 0; t < kStoredTables; t++) tables[t] = ExtensionRelation(kStoredTableNames[t]);
    RebuildStoredKeys(my_flusher_slot, tables);
    CommitTransactionCommand();
  }
  PG_CATCH();
  {
    AbortAndLog(context, "rebuild the filter of stored keys", "It is tried again after the next "
                "flush.");
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

bool ServeAndRecord(Oid db);

// Between two steps of a long flush: write-throughs are answered then too, not only between two
// flushes (the state stays "flushing").
void ServeBetweenSteps(Oid db) { (void)ServeAndRecord(db); }

// One flush, recorded in the slot's statistics; false if it failed (already logged).
bool FlushAndRecord(Oid db) {
  SpinMutex mutex = SlotMutex(my_flusher_slot);
  TimestampTz start = GetCurrentTimestamp();
  FlushBegun begun = BeginFlush(my_flusher_slot->tickets, mutex);
  // A flush that runs kLaggingIntervals of this flusher's interval shows as lagging in stats: a
  // crash still loses only about two intervals of buffered increments (flush.cpp), but the
  // backlog is larger than an interval writes.
  int interval = settings.flush_interval;
  SpinLockAcquire(&my_flusher_slot->mutex);
  my_flusher_slot->flush_lagging_at =
      interval > 0 ? start + TimestampTz(kLaggingIntervals) * interval * 1000 : 0;
  SpinLockRelease(&my_flusher_slot->mutex);
  pgstat_report_activity(STATE_RUNNING, "flush");

  MemoryContext context = CurrentMemoryContext;
  volatile int64 rows = -1;
  TimestampTz attachments_due = DT_NOEND;
  int error_code = 0;
  char error[sizeof(my_flusher_slot->flush_error)];
  PG_TRY();
  {
    rows = FlushDatabase(db, &attachments_due, ServeBetweenSteps);
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
  // Retention after a committed flush (which wrote every key's latest write), and before the
  // flush is answered: sc_rollup returns after the pass it asked for.
  if (rows >= 0 && start_attachers) has_retention = ExpireRetained(begun.rollup);
  // sc_rank's indexes (buffer/rank_indexes.hpp): built as asked, freed when they must go; also
  // before the flush is answered, so sc_rollup returns with them.
  if (rows >= 0) MaintainRanks(db);
  if (rows > 0) wrote_since_check = true;
  pgstat_report_activity(STATE_IDLE, nullptr);

  TimestampTz end = GetCurrentTimestamp();
  flush_failing = rows < 0;
  uint64 failures = 0;
  EndFlush(my_flusher_slot->tickets, mutex, begun.ticket, !flush_failing, [&] {
    DatabaseSlot* slot = my_flusher_slot;
    slot->flush_lagging_at = 0;
    failures = slot->flush_failures;
    if (rows >= 0) {
      slot->flush_failures = 0;
      slot->last_flush_rows = rows;
      slot->flushes++;
      slot->rows_written += uint64(rows);
      slot->last_flush_at = end;
      slot->last_flush_ms = double(end - start) / 1000.0;
    } else {
      failures = ++slot->flush_failures;
      slot->flush_error_code = error_code;
      memcpy(slot->flush_error, error, sizeof(error));
      slot->flush_error_at = end;
    }
  });
  ConditionVariableBroadcast(&my_flusher_slot->done_cv);
  if (rows < 0) LeaveIfExtensionDropped();
  if (rows < 0)
    LogFailure(error_code, error, failures);
  else if (failures > 0)
    ereport(LOG, (errmsg("the counters of database \"%s\" are flushed again, after %llu failed "
                         "attempts", db_name, (unsigned long long)failures)));
  return rows >= 0;
}

// A new flusher's fold, before its first flush interval: loads read slotted_counter.deltas until
// a complete fold (core/fold_epochs.hpp), which a slot assigned now makes them do (deltas from
// before a restart, or from before the last flusher left). A failure is logged; the first flush
// folds. The filter of stored keys is built after the first flush, as before: its scan of every
// row (seconds for millions) must not hold back the first flush of what was buffered.
void FoldAtStart(Oid db) {
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    (void)FoldDatabase(db);
  }
  PG_CATCH();
  {
    AbortAndLog(context, "fold the committed deltas", "The first flush folds them.");
    AbandonTotalsWrite();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

// Answers pending write-throughs; false if that failed (already logged).
bool ServeAndRecord(Oid db) {
  MemoryContext context = CurrentMemoryContext;
  volatile int served = 0;
  ErrorData* volatile failure = nullptr;
  PG_TRY();
  {
    served = ServeWriteThroughs(db);
    // After the answers: a text the flusher gave an id just now has a smaller one than the
    // range reserved after it (ids follow the order in which texts were first written).
    ReserveTextIds(db, served > 0);
    WriteGivenTextIds(db);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    failure = CopyErrorData();
    FlushErrorState();
    AbortCurrentTransaction();
    AbandonTotalsWrite();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  bool ok = failure == nullptr;
  if (!ok) {
    LeaveIfExtensionDropped();
    failure->elevel = WARNING;
    ThrowErrorData(failure);
    FreeErrorData(failure);
  }
  if (served > 0) {
    wrote_since_check = true;
    SpinLockAcquire(&my_flusher_slot->mutex);
    my_flusher_slot->write_throughs += uint64(served);
    SpinLockRelease(&my_flusher_slot->mutex);
    ConditionVariableBroadcast(&my_flusher_slot->done_cv);
  }
  return ok;
}

bool FlushRequested() {
  SpinMutex mutex = SlotMutex(my_flusher_slot);
  return TicketsPending(my_flusher_slot->tickets, mutex);
}

void WaitOnLatch(long timeout_ms) {
  int events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (timeout_ms >= 0 ? WL_TIMEOUT : 0);
  (void)WaitLatch(MyLatch, events, timeout_ms, WaitEventOf(Wait::kFlusherMain));
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
// database, nothing was asked of it, its last flush committed, and no attachment or retention
// needs it.
bool Idle(Oid db) {
  if (flush_failing || has_attachments || has_retention || FlushRequested() ||
      CountDBConnections(db) > 0)
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
  DatabaseSlot* slot = my_flusher_slot;
  auto lock = SlotsLock();
  (void)FreeIfIdle(lock, slot->claim, db, [&] {
    SpinLockAcquire(&slot->mutex);
    bool attacher = slot->attacher_pid != 0;
    SpinLockRelease(&slot->mutex);
    return kept == 0 && !clients && !attacher;
  });
}

// Leaves for being idle: gives up the slot (the hand-over at the top of this file), flushes what
// is left, and gives the slot back. False if that flush failed and the slot could be taken again:
// the flusher then stays.
bool LeaveIdle(Oid db) {
  SetWorkerState(kWorkerStopping);
  if (!HandOverAndFlush(db)) return !ClaimFlusherSlot(db);
  ServeAndRecord(db);
  ReleaseSlot(db);
  return true;
}

}  // namespace

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

  if (!ClaimFlusherSlot(db)) proc_exit(0);
  before_shmem_exit(LeaveSlot, 0);
  if (DatabaseClosing(db)) ShutdownRequestPending = true;
  if (!ExtensionInstalled()) {
    FreeSlot();
    proc_exit(0);
  }
  // Whatever the database's and the roles' defaults say (session.hpp). A flush that meets a
  // user's lock gives up after a second and tries again later, so that write-throughs and
  // shutdown are never stuck behind it.
  PinSessionSettings(1000);
  FoldAtStart(db);
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
      AnalyzeIfGrown();
      KeepStoredKeys();
    }
    failing = !ok;

    // With no client connected and none that wrote for idle_timeout, leave and give the slot
    // back; the next write starts a flusher again. A write of another database that found every
    // slot or worker taken asks for it at once.
    int idle_timeout = settings.idle_timeout;
    bool asked = TakeLeaveRequest(my_flusher_slot->claim);
    bool wrote = wrote_since_check;
    wrote_since_check = false;
    if (!failing && (asked || (idle_timeout > 0 && !wrote)) && Idle(db)) {
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
