// flusher_slots.cpp: a database's slot and its flusher, seen from the processes that need them.
//
// A backend that writes makes sure its database has a slot and a flusher (EnsureFlusher): under
// slots_lock it finds the slot, or assigns a free one, and registers a dynamic flusher when none
// runs and none was asked for in the last kStartRetryMs. When every slot or worker process is
// taken it asks idle flushers of other databases to leave (leave_requested) and waits 5 s at most
// for one to go. The flusher itself (worker.cpp) claims the slot here (ClaimFlusherSlot); what it
// does then, and how it gives the slot back, is worker.cpp's. The steps of the slot's life cycle
// and of its flush tickets are core/database_slot.hpp's; what is here registers workers, sets
// latches and sleeps. Nothing here depends on the buffer, the flush or the write-throughs: they
// call in, never the reverse.
#include "shared/flusher_slots.hpp"

#include "shared/late_cancel.hpp"

namespace sc {

DatabaseSlot* my_flusher_slot = nullptr;

namespace {

// A slot about to be assigned to a database (core/database_slot.hpp: SlotForLocked, under
// slots_lock, before the slot names it): its ring, its fold epochs, its tickets and statistics
// start anew.
void ResetSlot(DatabaseSlot& slot) {
  SpinMutex ring_mutex{&slot.dirty_mutex};
  RingReset(slot.dirty, ring_mutex);
  ResetFoldEpochs(&slot);
  // The last database's keys: its flusher may still be rebuilding them, and fails to validate.
  InvalidateStored(slot.stored);
  SpinLockAcquire(&slot.mutex);
  InitFlushTickets(slot.tickets);
  slot.flush_error_code = 0;
  slot.flush_error[0] = '\0';
  slot.flush_error_at = 0;
  slot.flush_failures = 0;
  slot.last_flush_rows = 0;
  slot.flushes = slot.rows_written = slot.write_throughs = 0;
  slot.attach_skipped = slot.attach_errors = 0;
  slot.last_flush_at = 0;
  slot.last_flush_ms = 0;
  slot.flush_lagging_at = 0;
  slot.totals_writers = 0;
  slot.totals_writers_since = 0;
  slot.attacher_pid = 0;
  slot.attacher_requested = 0;
  slot.run_open = slot.run_cut = slot.run_timed_out = false;
  SpinLockRelease(&slot.mutex);
  SpinMutex ids_mutex{&slot.ids_mutex};
  EmptyTextIds(slot.text_ids, ids_mutex);
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

}  // namespace

// Claims db's slot; false if another flusher already serves it.
bool ClaimFlusherSlot(Oid db) {
  auto lock = SlotsLock();
  DatabaseSlot* slot = ClaimForFlusher(lock, shared->slots, shared->max_databases, db, MyProcPid,
                                       MyLatch, ResetSlot);
  if (slot != nullptr) my_flusher_slot = slot;
  return slot != nullptr;
}


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
  auto lock = SlotsLock();
  return AskOthersToLeave(lock, shared->slots, shared->max_databases, MyDatabaseId,
                          [](void* latch) { SetLatch(static_cast<Latch*>(latch)); });
}

enum class Start { kRunning, kStarted, kNoSlot, kNoWorker };

// One attempt: this database's slot (assigned now if need be) with a flusher registered if none
// runs. A slot assigned by an attempt whose flusher could not be registered is given back: no
// value was written to it yet.
Start TryEnsureFlusher(DatabaseSlot** out) {
  auto lock = SlotsLock();
  StartRequest<DatabaseSlot> request =
      EnsureStart(lock, shared->slots, shared->max_databases, MyDatabaseId, GetCurrentTimestamp(),
                  int64(kStartRetryMs) * 1000, ResetSlot);
  *out = request.slot;
  if (request.slot == nullptr) return Start::kNoSlot;
  if (!request.start) return Start::kRunning;
  if (RegisterFlusher(MyDatabaseId)) return Start::kStarted;
  StartFailed(lock, request, MyDatabaseId);
  return Start::kNoWorker;
}

}  // namespace

DatabaseSlot* EnsureFlusher(bool after_write) {
  if (after_write) pg_memory_barrier();
  if (MyFlusherRuns()) return my_flusher_slot;

  DatabaseSlot* slot = nullptr;
  Start result = TryEnsureFlusher(&slot);
  // Every slot or worker process taken: idle flushers of other databases make room. After a
  // write, the wait raises no error: the write counted, and an error would say it did not. A
  // cancel, timeout or termination ends it, and a cancel or timeout then came too late for the
  // call (late_cancel.hpp), unless the caller holds interrupts itself and decides (a batch, a
  // write-through's wait).
  if ((result == Start::kNoSlot || result == Start::kNoWorker) && AskIdleFlushersToLeave()) {
    bool counted = after_write && InterruptHoldoffCount == 0;
    if (after_write) HOLD_INTERRUPTS();
    TimestampTz since = GetCurrentTimestamp();
    do {
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 20,
                      WaitEventOf(Wait::kFlusherStart));
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
      result = TryEnsureFlusher(&slot);
    } while ((result == Start::kNoSlot || result == Start::kNoWorker) &&
             !TimestampDifferenceExceeds(since, GetCurrentTimestamp(), kRoomForFlusherMs) &&
             !(after_write && (QueryCancelPending || ProcDiePending)));
    if (counted)
      ResumeInterruptsCounted();
    else if (after_write)
      RESUME_INTERRUPTS();
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

DatabaseSlot* FlusherForReads() {
  if (DatabaseSlot* slot = FindSlot(MyDatabaseId)) return slot;
  static TimestampTz failed_at = 0;
  TimestampTz now = GetCurrentTimestamp();
  if (failed_at != 0 && !TimestampDifferenceExceeds(failed_at, now, 1000)) return nullptr;
  DatabaseSlot* slot = nullptr;
  Start result = TryEnsureFlusher(&slot);
  failed_at = result == Start::kRunning || result == Start::kStarted ? 0 : now;
  if (slot != nullptr) my_flusher_slot = slot;
  return slot;
}

void WakeFlusher(DatabaseSlot* slot) {
  if (void* latch = FlusherLatch(slot->claim)) SetLatch(static_cast<Latch*>(latch));
}

void AskForFlush(DatabaseSlot* slot) {
  SpinMutex mutex = SlotMutex(slot);
  AskForTicket(slot->tickets, mutex);
  WakeFlusher(slot);
}

int64 RequestFlush(DatabaseSlot* slot, bool rollup) {
  SpinMutex mutex = SlotMutex(slot);
  uint64 ticket = RequestTicket(slot->tickets, mutex, rollup);
  ConditionVariablePrepareToSleep(&slot->done_cv);
  int64 rows;
  bool failed;
  int error_code;
  char error[sizeof(slot->flush_error)];
  for (;;) {
    TicketOutcome outcome = CheckTicket(slot->tickets, mutex, ticket, [&] {
      rows = slot->last_flush_rows;
      error_code = slot->flush_error_code;
      memcpy(error, slot->flush_error, sizeof(error));
    });
    failed = outcome.failed;
    if (outcome.done || outcome.failed) break;
    EnsureFlusher(false);
    WakeFlusher(slot);
    ConditionVariableTimedSleep(&slot->done_cv, 1000, WaitEventOf(Wait::kRollup));
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
