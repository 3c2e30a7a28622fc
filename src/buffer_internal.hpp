// buffer_internal.hpp: what the files of the buffer (buffer.cpp, batch.cpp) share and no one else
// uses: the miss path's steps, and the note of an entry that turned dirty (the lock protocol is
// in protocol.hpp).
#pragma once

#include "buffer.hpp"
#include "flusher_slots.hpp"
#include "shmem.hpp"

namespace sc {

// Fails with 22003: adding delta to key's value `value` leaves the bigint range.
void ReportOverflow(const CounterDef& def, int64 key, int64 value, int64 delta);

// Another backend is loading the entry: backs off (up to a millisecond), then checks for
// interrupts.
void WaitForLoad(int* waits);

// After a miss: tries to make k resident. False if no entry can be had; otherwise the caller
// probes again.
bool MakeResident(CounterDef* def, const CounterKey& k, uint32 hash, int* waits);

// A write that turned a clean entry dirty (protocol.hpp: CheckDirtied) tells its database's
// flusher where to look (shmem.hpp: DatabaseSlot::dirty); after the partition lock.
inline void NoteDirtied(const Dirtied& dirtied) {
  if (unlikely(dirtied.index != kNil)) NoteDirty(my_flusher_slot, dirtied.index, dirtied.generation);
}

}  // namespace sc
