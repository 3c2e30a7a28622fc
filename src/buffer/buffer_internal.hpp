// buffer_internal.hpp: what the files of the buffer share and no one else uses: the stored value
// of a key (stored.cpp), the miss path's steps (load.cpp), and the steps on a resident entry that
// note an entry turned dirty (the lock protocol is in core/protocol.hpp).
#pragma once

#include "buffer/buffer.hpp"
#include "definitions/expiry.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"

namespace sc {

// Fails with 22003: adding delta to key's value `value` leaves the bigint range.
void ReportOverflow(const CounterDef& def, int64 key, int64 value, int64 delta);

// The value the tables hold for k, as of the latest commit; 0 if none. committed_only: leave
// out this transaction's own uncommitted changes (its sc_drop_buckets), as a value linked into
// the shared buffer must be true for every session whatever this transaction does next. *stamp
// (if given): the time of k's last write the tables hold (written_at), kNoWrite if none. *row (if
// given): where k's row of key_values is (tid.hpp), 0 if it has none or the value was read by a
// query.
int64 ReadStoredValue(const CounterKey& k, bool transactional, bool committed_only = false,
                      int64* stamp = nullptr, uint64* row = nullptr);

// Whether the deltas committed into a transactional entry are all in the values table (so that
// the entry may leave the buffer); always true for a buffered one. Under the entry's partition
// lock, exclusive.
bool DeltasFolded(const Entry& e);

// Another backend is loading the entry: backs off (up to a millisecond), then checks for
// interrupts.
void WaitForLoad(int* waits);

// After a miss: tries to make k resident. False if no entry can be had; otherwise the caller
// probes again.
bool MakeResident(CounterDef* def, const CounterKey& k, uint32 hash, int* waits);

// No entry could be had for an operation that must not write through (a set, a commit): waits
// for the flusher to make room; 53400 after 10 s, naming `action`.
void WaitForRoom(const CounterDef& def, const char* action, TimestampTz* since, int* waits);

// Distinct counters (sketches.cpp): a block for the entry (index, generation) that this backend
// is loading, emptied for shape (evicting a clean entry's if none is free); kNil if none can be
// had (the flusher is asked for a flush). Then the key's stored sketch, unioned into block b.
uint32 TakeSketchBlock(uint32 index, uint32 generation, const HllShape& shape);
void LoadStoredSketch(const CounterDef& def, const CounterKey& k, uint32 b);

// Calls at_resident() (a step on k's resident entry) until it finds the entry resident: waits for
// a load in progress, loads the key, and with no room waits for the flusher (an error after
// kRoomWaitMs naming `action`). For the writes that are never written through.
template <typename AtResident>
void UntilResident(CounterDef* def, const CounterKey& k, uint32 hash, const char* action,
                   AtResident&& at_resident) {
  int waits = 0;
  TimestampTz no_room_since = 0;
  for (;;) {
    Probe probe = at_resident();
    if (probe == Probe::kFound) return;
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!MakeResident(def, k, hash, &waits)) WaitForRoom(*def, action, &no_room_since, &waits);
  }
}

// A write that turned a clean entry dirty (protocol.hpp: CheckDirtied) tells its database's
// flusher where to look (shmem.hpp: DatabaseSlot::dirty); after the partition lock.
inline void NoteDirtied(const Dirtied& dirtied) {
  if (unlikely(dirtied.index != kNil)) NoteDirty(my_flusher_slot, dirtied.index, dirtied.generation);
}

}  // namespace sc
