// saved_values.hpp: buffered values that a clean shutdown could not flush, kept in a file until
// the next start (saved_values.cpp).
#pragma once

#include "pg.hpp"

namespace sc {

// From _PG_init, in the postmaster: reads the file a clean shutdown left, if any, checks that it
// belongs to this cluster and to the checkpoint this start begins from, and registers a flusher
// for each database it names.
void ReadSavedValues();

// From the creation of the shared state, in the postmaster: puts the values read into the buffer,
// each as it was at shutdown (dirty: its flusher writes it), and removes the file. Whatever
// cannot be restored is logged as lost, counter by counter.
void RestoreSavedValues();

// Registered in the postmaster with on_shmem_exit: after a clean shutdown (the shutdown
// checkpoint written, every process gone) writes every value the flushers did not write to the
// file; if that fails, logs how many increments of which counters are lost.
void SaveUnflushedValues(int code, Datum arg);

}  // namespace sc
