// write_through.hpp: an increment the buffer has no room for, written to slotted_counter.key_values
// by the flusher: the request (its states, steps and lock rule: core/write_through_request.hpp),
// and the requester's half: publishing it and waiting for the answer (write_through.cpp). The
// flusher serves it: workers/write_through.hpp.
#pragma once

#include "shared/shmem.hpp"

namespace sc {

// One key of a batch written through (WriteThroughRequest::batch): the delta to add, and the new
// value once added. Sorted by key, distinct.
struct ThroughItem {
  int64 key;
  int64 delta;
  int64 result;
};
// The item of key in items (n, sorted by key), or nullptr.
ThroughItem* FindThroughItem(ThroughItem* items, int n, int64 key);

// One text of an intern request (ThroughRequest::intern): its len bytes at `offset` from the
// start of the segment (or of the request's inline_intern, when its `batch` is 0), and the id
// the flusher gave it in slotted_counter.keys.
struct InternItem {
  int64 id;
  uint32 offset;
  uint32 len;
};

// Whether a write-through of the single key k is pending or being served: then no loader may
// link k. Under k's partition lock, exclusive.
bool WriteThroughPendingFor(const CounterKey& k);

// This backend's request, once no earlier request of it is pending (interruptible wait).
WriteThroughRequest* FreeRequest();

// Publishes r (free, this backend's) for the single key k with delta, under k's partition lock
// exclusive, unless k is resident: false then (nothing published; add to the buffer instead).
// w: the write's stamp, stored as the row's updated_at, and its counter's cutoff: a row last
// written at or before it holds an expired value, which the delta replaces.
bool PublishForKey(WriteThroughRequest* r, const CounterKey& k, uint32 hash, int64 delta,
                   Write w);
// Publishes r (free, this backend's) for a batch of nbatch keys of counter k.counter and bucket
// k.bucket in the segment `batch`, whose partitions this backend holds (core/through_holds.hpp).
void PublishBatch(WriteThroughRequest* r, const CounterKey& k, int nbatch, dsm_handle batch,
                  Write w);

// Publishes r (free, this backend's) for the nbatch texts (InternItem) of counter `counter` in
// the segment `batch`, which need ids; creator: the (sub)transaction of the requester that
// created the counter, or 0.
void PublishIntern(WriteThroughRequest* r, int32 counter, int nbatch, dsm_handle batch,
                   uint64 creator);

// Waits until the flusher answered r, and frees r. held: interrupts are held (a batch's second
// phase, a single key's write-through): no error is raised, a missing flusher only warns, and a request no flusher took within
// withdraw_after_ms (0: never) is withdrawn and answered 53400. Otherwise the wait is
// interruptible, and a cancelled requester's request is still served. Either way a request taken
// by a flusher that is gone goes back to the next flusher.
RequestAnswer AwaitAnswer(WriteThroughRequest* r, bool held, int withdraw_after_ms);

// Fails the pending requests of a dropped counter (counter 0: of a database whose extension was
// dropped) with 42704. Takes only spinlocks; cannot fail.
void FailRequests(Oid db, int32 counter);

}  // namespace sc
