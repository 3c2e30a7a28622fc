// worker.hpp: starting, waking and asking the flusher of this database.
#pragma once

#include "shmem.hpp"

namespace sc {

// This database's slot, with its flusher running or registered; fails with 53400 if no slot or
// no worker process can be had. Called again after a write with after_write = true: then it
// orders the write before its check (see worker.cpp) and only warns, returning nullptr.
DatabaseSlot* EnsureFlusher(bool after_write = false);

// Sets the flusher's latch, if it runs.
void WakeFlusher(DatabaseSlot* slot);

// Asks for a flush that starts after this call and waits for it: returns the number of rows it
// wrote, or fails with the flush's own error (a lock timeout, say) if it failed.
int64 RequestFlush(DatabaseSlot* slot);

}  // namespace sc
