// flusher_slots.hpp: a database's slot and its flusher, seen from a backend (starting, waking and
// asking the flusher of this database) and from the flusher (claiming the slot).
#pragma once

#include "shared/shmem.hpp"

namespace sc {

// This database's slot, with its flusher running or registered; fails with 53400 if no slot or
// no worker process can be had. Called again after a write with after_write = true: then it
// orders the write before its check (see worker.cpp) and only warns, returning nullptr.
DatabaseSlot* EnsureFlusher(bool after_write = false);

// For a read that must know the fold's state (a transactional key's load: shared/shmem.hpp,
// LoadsReadDeltas): this database's slot, assigned and its flusher registered now if it has none,
// as EnsureFlusher does; nullptr, without an error or a wait, if no slot or worker is free (tried
// again a second later at the soonest).
DatabaseSlot* FlusherForReads();

// This backend's slot, once EnsureFlusher found it; the flusher's own slot, once claimed.
extern DatabaseSlot* my_flusher_slot;

// Whether my_flusher_slot has a live flusher of this database, read without a lock
// (core/database_slot.hpp: FlusherRuns).
inline bool MyFlusherRuns() {
  DatabaseSlot* slot = my_flusher_slot;
  return slot != nullptr && FlusherRuns(slot->claim, MyDatabaseId);
}

// EnsureFlusher with its fast path inline.
inline void EnsureFlusherFast(bool after_write = false) {
  if (after_write) pg_memory_barrier();
  if (likely(MyFlusherRuns())) return;
  (void)EnsureFlusher(after_write);
}

// How long a request to start a worker (a flusher, an attacher) is taken to be on its way: none
// is registered again before.
constexpr int kStartRetryMs = 10000;

// The flusher of db (worker.cpp) claims db's slot, assigned now if need be: false if another
// flusher already serves it or no slot is free. Sets my_flusher_slot.
bool ClaimFlusherSlot(Oid db);

// From _PG_init: registers a flusher of database db that starts with the server (to write the
// values a clean shutdown saved; saved_values.cpp).
void RegisterFlusherAtStart(Oid db);

// Registers an attacher for database db (attach_run.cpp), for the round that began at `round`
// (0: a new round, when it starts); logs and returns false if no worker process can be had.
bool StartAttacher(Oid db, TimestampTz round = 0);

// Sets the flusher's latch, if it runs.
void WakeFlusher(DatabaseSlot* slot);

// Asks for a flush that starts after this call and waits for it: returns the number of rows it
// wrote, or fails with the flush's own error (a lock timeout, say) if it failed. rollup: the
// whole of a flush, the retention pass included (sc_rollup); else its writes only (a commit's).
int64 RequestFlush(DatabaseSlot* slot, bool rollup = true);
// Asks for a flush as soon as the flusher can, without waiting for it (none is added while one
// asked for is still to come).
void AskForFlush(DatabaseSlot* slot);

}  // namespace sc
