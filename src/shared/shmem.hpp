// shmem.hpp: everything slotted_counter keeps in shared memory, and who may touch what.
//
// SharedState is created once by the postmaster (shmem_startup_hook) and found by every backend.
// It holds:
//   - the counter table (counter_table.hpp): the buffer of counter values of every database.
//     Its kPartitions partitions are guarded by partition locks (partition_lock.hpp): readers
//     count themselves in partition_readers[p], writers take the LWLock partition_locks[p]
//     EXCLUSIVE and wait for the counted readers. Every step of the table's lock protocol is in
//     protocol.hpp, run here with the policy PartitionLocks (below): the increment path takes
//     its partition lock SHARED and changes a value with an atomic add;
//     linking or unlinking an entry (load, eviction, purge), pins and reservations take it
//     EXCLUSIVE. Lock order: never hold two partition locks (eviction takes its victim's
//     conditionally, holding none).
//   - one DatabaseSlot per database that uses the extension. Its life cycle, its flusher's claim
//     and hand-over, and its flush tickets are core/database_slot.hpp's (SlotClaim under the
//     LWLock slots_lock, FlushTickets under the slot's spinlock `mutex`); `mutex` also guards the
//     slot's statistics (a few instructions, never held across anything that can fail). Waiters
//     for a flush or a write-through sleep on the slot's condition variable `done_cv`.
//   - one WriteThroughRequest per backend (indexed by MyProcIndex(), compat.hpp), with its spinlock `mutex`,
//     and write_throughs_open (how many are PENDING or TAKEN, by database): the requests' states,
//     their lock rule and every step of them are in core/write_through_request.hpp, run here over
//     Requests() (below).
//   - through_holds: partitions held against loads while a batch's keys are written through or
//     the rows of expired keys are deleted; the rule and its steps are in core/through_holds.hpp,
//     run here with Table()'s partition locks.
//   - catalog_epoch: bumped after any commit that drops a counter (and after the abort of one that
//     created one); a backend that sees it change drops its cached counter definitions.
//   - in each DatabaseSlot, the ring of entries that turned dirty (dirty_mutex, a spinlock taken
//     under a partition lock at most) and the fold epochs (core/fold_epochs.hpp).
//   - in each DatabaseSlot, under its spinlock `mutex`: the attacher (at most one per database; the
//     flusher registers it, it claims attacher_pid itself and clears it as it exits, noting a run
//     its exit cut short; both under slots_lock exclusive too, so that whoever holds slots_lock, as
//     a command that signals it does, reads the pid of a live attacher), and the count of open
//     flusher transactions that write slotted_counter.key_values with the time the first of them
//     opened. An attachment run reads that (clock first, then the count) before it takes its
//     snapshot; a flusher reads the clock, counts itself in, and only then starts its transaction,
//     whose now() stamps the rows it writes. So every row that run cannot see is stamped at or
//     after the watermark it keeps (attach_run.cpp).
//   - request_ids, with its parts' LWLocks and the databases' apply locks: the ids of buffered
//     sc_incr_once calls until the flush that writes their increments writes them, shared by the
//     databases by the fair share of core/fair_share.hpp (request_ids.hpp).
//   - bucket_drops: the old buckets that committing transactions dropped (sc_drop_buckets), from
//     their pre-commit until they have purged the buffer after the commit, guarded by the
//     spinlock bucket_drops_mutex. The dropper holds its counter's row FOR UPDATE, so no flush of
//     that counter runs until it commits; between its commit and its purge, a flusher that reads
//     the registry after locking the counter (FOR KEY SHARE) leaves those buckets' entries alone,
//     so no delta counted before the drop reaches the table after it.
#pragma once

#include <sched.h>

#include "core/commit_window.hpp"
#include "core/database_slot.hpp"
#include "core/fold_epochs.hpp"
#include "core/partition_lock.hpp"
#include "core/protocol.hpp"
#include "core/shared_key_cache.hpp"
#include "core/sketch_pool.hpp"
#include "core/stored_filter.hpp"
#include "core/text_ids.hpp"
#include "core/through_holds.hpp"
#include "core/write_through_request.hpp"
#include "pg.hpp"
#include "shared/wait_events.hpp"

namespace sc {

struct DatabaseSlot {
  // The database it is assigned to (db, 0 when free), its flusher (worker_pid, worker_latch),
  // the start asked for, the closing mark of commands on the whole database (databases.cpp) and
  // the request to leave: core/database_slot.hpp, under slots_lock (SlotsLock()).
  SlotClaim claim;

  slock_t mutex;                 // guards everything below
  FlushTickets tickets;          // sc_rollup's (core/database_slot.hpp) and the worker's state
  int flush_error_code;          // the last failure's SQLSTATE, message and time
  char flush_error[256];
  TimestampTz flush_error_at;
  uint64 flush_failures;         // failed flushes since the last committed one
  int64 last_flush_rows;
  uint64 flushes;
  uint64 rows_written;
  uint64 write_throughs;
  uint64 attach_skipped;         // changed keys with no row in an attached table
  uint64 attach_errors;          // attachment runs that failed
  TimestampTz last_flush_at;
  double last_flush_ms;
  TimestampTz flush_lagging_at;  // when the flush in progress shows as lagging (0: none, never)

  // Flusher transactions that write key_values (flush.cpp), and the clock before the first of them.
  int totals_writers;
  TimestampTz totals_writers_since;

  // The attacher of this database (attach_run.cpp).
  int attacher_pid;              // 0: none runs
  TimestampTz attacher_requested;  // when the flusher last registered one; 0 once it runs
  // The attachment being run (run_open), or the one whose run ended with its process (run_cut;
  // run_timed_out if its time limit ended it), for the next attacher to record as failed.
  bool run_open;
  bool run_cut;
  bool run_timed_out;
  int32 run_counter;
  Oid run_target;

  ConditionVariable done_cv;     // broadcast after each flush and each batch of write-throughs

  // The entries of this database that became dirty since its flusher last took them, so that a
  // flush reads those instead of the whole buffer (flush.cpp). Guarded by dirty_mutex. A writer
  // that turns a clean entry dirty appends it; a flush that leaves an entry dirty (it failed, the
  // entry was counted into meanwhile, or its counter was locked) appends it again. When the ring
  // is full, or the slot was (re)assigned, dirty_overflow makes the next flush scan everything
  // (as does the flusher every 10 s and before it exits, a safety net under the ring).
  slock_t dirty_mutex;
  DirtyRing dirty;

  // Folds of transactional deltas (flush.cpp), so that loads need not read slotted_counter.deltas
  // (load.cpp, stored.cpp): the protocol and who writes what are in core/fold_epochs.hpp;
  // fold_mutex is its Mutex.
  slock_t fold_mutex;
  FoldEpochs fold;

  // The ids that backends give new text keys of buffered counters themselves, and the writes of
  // slotted_counter.keys rows that a giver must not race (core/text_ids.hpp): the range under
  // ids_mutex, the writes' atomics without a lock.
  slock_t ids_mutex;
  TextIdRange text_ids;
  KeyWrites key_writes;

  // The keys of key_values, so that a load of a key never stored skips the probe
  // (core/stored_filter.hpp; shared/stored_keys.hpp).
  StoredFilter stored;
};

// One backend's write-through request (core/write_through_request.hpp: its states and steps),
// guarded by its own spinlock.
// The bytes of an intern request that fit in the request itself (its one text and its item), so
// that the common case, a call's one new text, needs no segment (write_through.hpp).
constexpr int kInlineInternBytes = 240;

struct WriteThroughRequest {
  slock_t mutex;
  ThroughRequest request;
  // An intern request whose `batch` is 0: its items and texts, as a segment would hold them.
  // Written by the requester before it publishes, by the flusher that took it before it answers.
  alignas(8) char inline_intern[kInlineInternBytes];
};
static_assert(sizeof(dsm_handle) == sizeof(ThroughRequest::batch), "a segment's handle fits");

// Buckets of one counter, before `before`, dropped by a committing transaction.
struct BucketDrop {
  Oid db;                        // InvalidOid: a free slot
  int32 counter;
  int64 before;                  // a timestamp: buckets that start before it are dropped
  int pid;                       // the committing backend
};

constexpr int kMaxBucketDrops = 32;

struct RequestIdTable;
struct RankIndexes;

// The version of the layout below: raised with every change to a struct in shared memory. A
// library attaches only to shared memory of its own layout and size (CreateSharedState).
constexpr uint32 kLayoutVersion = 28;

struct SharedState {
  uint32 layout_version;          // kLayoutVersion of the library that made it; first, always
  uint64 layout_size;             // SharedStateSize() then
  LWLock* slots_lock;
  LWLockPadded* partition_locks;  // kPartitions of them
  PartitionReaders* partition_readers;  // kPartitions of them
  pg_atomic_uint64 catalog_epoch;
  OpenCounts write_throughs_open;  // core/write_through_request.hpp
  pg_atomic_uint64 evictions;
  int max_databases;
  int max_requests;
  DatabaseSlot* slots;            // max_databases
  WriteThroughRequest* requests;  // max_requests
  CounterTable* table;
  ThroughHolds through_holds;     // core/through_holds.hpp
  pg_atomic_uint32 batch_pins_used;  // entries pinned by buffered batches (buffer/batch.cpp)
  // When a database under its fair share of the buffer last found no entry to take (a
  // TimestampTz): for kRoomWantedMs after, databases over their share take no clean entry of
  // their own (buffer/load.cpp: LoadEntry). Written and read with plain atomic stores and loads.
  pg_atomic_uint64 room_wanted_at;
  slock_t bucket_drops_mutex;
  BucketDrop bucket_drops[kMaxBucketDrops];
  // The request ids of buffered sc_incr_once calls waiting for their flush (the protocol:
  // request_ids.hpp).
  RequestIdTable* request_ids;
  RankIndexes* rank_indexes;      // buffer/rank_indexes.hpp
  // The ids of text keys the backends share (core/shared_key_cache.hpp; SharedKeys() below):
  // shared_key_sets sets of slots under kKeyCacheLocks LWLocks; no slots when
  // slotted_counter.shared_text_keys is 0.
  SharedKeySlot* shared_keys;
  uint32 shared_key_sets;
  LWLockPadded* shared_key_locks;
  // The resident sketches of distinct counters' keys (core/sketch_pool.hpp has the rules), and
  // the spinlock of each block (core/sketch_block.hpp: its explicit form's Mutex).
  SketchPool* sketches;
  slock_t* sketch_locks;
  // Each flush's commit and settle, as readers of key_values see them (core/commit_window.hpp);
  // database db's in cell db % kCommitWindowCells.
  CommitWindow commit_windows[kCommitWindowCells];
  // The wait event of each Wait (wait_events.hpp), registered as the state was made.
  uint32 wait_events[size_t(Wait::kCount)];
};

// Shared by every process: plain layouts only (no constructor, no virtual, no pointer into one
// process's heap).
static_assert(std::is_standard_layout<DatabaseSlot>::value &&
                  std::is_standard_layout<WriteThroughRequest>::value &&
                  std::is_standard_layout<BucketDrop>::value &&
                  std::is_standard_layout<SharedState>::value &&
                  std::is_standard_layout<DirtyRing>::value,
              "shared structs have a standard layout");

// Set in every process once the shared state exists; NULL when the library was not preloaded.
extern SharedState* shared;

void RequestSharedState();
// True if this call created it (rather than found it).
bool CreateSharedState();

// The slot of database db, read without a lock (slots change hands only when a database stops
// using the extension); nullptr if it has none.
DatabaseSlot* FindSlot(Oid db);

// The wait event of w (wait_events.hpp), for WaitLatch and ConditionVariableTimedSleep.
inline uint32 WaitEventOf(Wait w) { return shared->wait_events[size_t(w)]; }

// pg_usleep, shown in pg_stat_activity as the wait w.
inline void SleepAs(Wait w, long microseconds) {
  pgstat_report_wait_start(WaitEventOf(w));
  pg_usleep(microseconds);
  pgstat_report_wait_end();
}

// Database db's commit window (core/commit_window.hpp).
inline CommitWindow& CommitWindowOf(Oid db) {
  return shared->commit_windows[db % kCommitWindowCells];
}
// The steps of core/fold_epochs.hpp on a slot's epochs, with its spinlock fold_mutex.
void ResetFoldEpochs(DatabaseSlot* slot);
// Whether loads of the slot's database must read slotted_counter.deltas too (always without a
// slot).
inline bool LoadsReadDeltas(DatabaseSlot* slot) {
  return slot == nullptr || LoadsReadDeltas(slot->fold);
}
inline void RequireDeltaReads(DatabaseSlot* slot) { RequireDeltaReads(slot->fold); }
void PublishFold(DatabaseSlot* slot, uint32 epoch, const int32* skipped, int nskipped);
bool Folded(DatabaseSlot* slot, int32 counter, uint32 epoch);

// Appends an entry that became dirty to the ring of `slot` (this backend's database's slot).
void NoteDirty(DatabaseSlot* slot, uint32 index, uint32 generation);
// The next flush of the slot's database scans the whole buffer.
void MarkDirtyUntracked(DatabaseSlot* slot);

// A flusher transaction that writes slotted_counter.key_values opens (before it starts) and closes
// (after it ended); see the protocol at the top.
void OpenTotalsWrite(DatabaseSlot* slot);
void CloseTotalsWrite(DatabaseSlot* slot);
// The time from which on rows of key_values that a snapshot taken after this call cannot see may
// be stamped (updated_at).
TimestampTz TotalsWatermark(DatabaseSlot* slot);

// Fails with 55000 unless the library was preloaded.
void ReportNotPreloaded();
inline void RequireShared() {
  if (unlikely(shared == nullptr)) ReportNotPreloaded();
}

// The lock policies of the protocol (protocol.hpp) in the server: the partition locks
// (partition_lock.hpp) over the partition LWLocks, and a spinlock for a ring of dirty entries.
struct PartitionLWLocks {
  LWLockPadded* locks;
  void Shared(uint32 p) { LWLockAcquire(&locks[p].lock, LW_SHARED); }
  void Exclusive(uint32 p) { LWLockAcquire(&locks[p].lock, LW_EXCLUSIVE); }
  bool TryExclusive(uint32 p) { return LWLockConditionalAcquire(&locks[p].lock, LW_EXCLUSIVE); }
  void ReleaseShared(uint32 p) { LWLockRelease(&locks[p].lock); }
  void Release(uint32 p) { LWLockRelease(&locks[p].lock); }
};

// A writer's wait for the counted readers of its partition, who hold it for a few instructions
// unless descheduled: spin, then yield the processor, then sleep.
struct ReaderWaitBackoff {
  int waits = 0;
  void operator()() {
    waits++;
    if (waits <= 100)
      SPIN_DELAY();
    else if (waits <= 1100)
      sched_yield();
    else
      SleepAs(Wait::kPartitionWriter, 100);
  }
};

// The partition this backend holds as a counted reader, or -1. A counted reader is not released
// by an error's cleanup as an LWLock is; nothing under a partition lock SHARED can fail, but
// should an error come there anyway, the abort callback releases the count
// (ForgetCountedReader) rather than leave every writer of the partition waiting for it.
extern int counted_partition;
void ForgetCountedReader();

struct PartitionLocks {
  CountedReaderLocks<PartitionLWLocks, ReaderWaitBackoff> locks;
  void Shared(uint32 p) {
    locks.Shared(p);
    counted_partition = int(p);
  }
  void ReleaseShared(uint32 p) {
    counted_partition = -1;
    locks.ReleaseShared(p);
  }
  void Exclusive(uint32 p) { locks.Exclusive(p); }
  bool TryExclusive(uint32 p) { return locks.TryExclusive(p); }
  void Release(uint32 p) { locks.Release(p); }
};

struct SpinMutex {
  slock_t* mutex;
  void lock() { SpinLockAcquire(mutex); }
  void unlock() { SpinLockRelease(mutex); }
};

// The ids of text keys the backends share (core/shared_key_cache.hpp has the rules), over their
// LWLocks; SharedKeysOn() says whether there are any (slotted_counter.shared_text_keys > 0).
inline bool SharedKeysOn() { return shared->shared_key_sets > 0; }
inline SharedKeyCache<PartitionLWLocks> SharedKeys() {
  return SharedKeyCache<PartitionLWLocks>(shared->shared_keys, shared->shared_key_sets,
                                          PartitionLWLocks{shared->shared_key_locks});
}

// The slots' lock policy (core/database_slot.hpp) over the LWLock slots_lock.
struct SlotsLWLock {
  LWLock* lock_;
  void lock() { LWLockAcquire(lock_, LW_EXCLUSIVE); }
  void unlock() { LWLockRelease(lock_); }
  void lock_shared() { LWLockAcquire(lock_, LW_SHARED); }
  void unlock_shared() { LWLockRelease(lock_); }
};
inline SlotsLWLock SlotsLock() { return SlotsLWLock{shared->slots_lock}; }

// The slot's own (the tickets', the statistics') spinlock.
inline SpinMutex SlotMutex(DatabaseSlot* slot) { return SpinMutex{&slot->mutex}; }

// The counter table of shared memory, with the protocol's steps.
inline Protocol<PartitionLocks> Table() {
  return Protocol<PartitionLocks>(
      shared->table, PartitionLocks{{shared->partition_readers,
                                     PartitionLWLocks{shared->partition_locks}}});
}

// The write-through requests of shared memory, for their steps (core/write_through_request.hpp).
struct SharedRequests {
  WriteThroughRequest* requests;
  int count;
  int size() const { return count; }
  SpinMutex mutex(int i) const { return SpinMutex{&requests[i].mutex}; }
  ThroughRequest& at(int i) const { return requests[i].request; }
};

inline WriteThroughs<SharedRequests> Requests() {
  return WriteThroughs<SharedRequests>(SharedRequests{shared->requests, shared->max_requests},
                                       &shared->write_throughs_open);
}

}  // namespace sc
