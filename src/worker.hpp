// worker.hpp: starting, waking and asking the flusher of this database.
#pragma once

#include "shmem.hpp"

namespace sc {

// This database's slot, with its flusher running or registered; fails with 53400 if no slot or
// no worker process can be had.
DatabaseSlot* EnsureFlusher();

// Sets the flusher's latch, if it runs.
void WakeFlusher(DatabaseSlot* slot);

// Asks for a flush that starts after this call and waits until one has committed; returns the
// number of rows it wrote.
int64 RequestFlush(DatabaseSlot* slot);

}  // namespace sc
