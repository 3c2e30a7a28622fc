// flusher_slots.cpp: a database's slot and its flusher, seen from the processes that need them.
//
// A backend that writes makes sure its database has a slot and a flusher (EnsureFlusher): under
// slots_lock it finds the slot, or assigns a free one, and registers a dynamic flusher when none
// runs and none was asked for in the last kStartRetryMs. When every slot or worker process is
// taken it asks idle flushers of other databases to leave (leave_requested) and waits 5 s at most
// for one to go. The flusher itself (worker.cpp) claims the slot here (ClaimFlusherSlot); what it
// does then, and how it gives the slot back, is worker.cpp's. Nothing here depends on the buffer,
// the flush or the write-throughs: they call in, never the reverse.
#include "shared/flusher_slots.hpp"

namespace sc {

DatabaseSlot* my_flusher_slot = nullptr;

namespace {

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

}  // namespace

// Claims db's slot; false if another flusher already serves it.
bool ClaimFlusherSlot(Oid db) {
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
  if (after_write) pg_memory_barrier();
  if (MyFlusherRuns()) return my_flusher_slot;

  DatabaseSlot* slot = nullptr;
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

void AskForFlush(DatabaseSlot* slot) {
  SpinLockAcquire(&slot->mutex);
  if (slot->flush_requested <= slot->flush_done) ++slot->flush_requested;
  SpinLockRelease(&slot->mutex);
  WakeFlusher(slot);
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
