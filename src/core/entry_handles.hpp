// entry_handles.hpp: what the steps of the counter table's protocol (core/protocol.hpp) hand out
// and report: a load in progress, a flush's claim, a commit's reservation, a batch's pin, and
// the outcome of a probe, a load's start, a take and a reservation. Plain values, in a
// backend's memory; pure C++ (no PostgreSQL header).
#pragma once

#include <cstdint>

namespace sc {

// kNoSum (PinLocked only): the key is resident, its sum entry is not (protocol.hpp: sums).
enum class Probe { kFound, kMissing, kLoading, kNoSum };

// What a load is doing: the entry it linked kLoading, and how to find it again.
struct Loading {
  uint32_t index;
  uint32_t generation;
  uint32_t hash;
};

enum class LoadStart { kLinked, kRetry, kStale };

// What a flush claimed of one entry: written as delta, settled by SettleClaim.
// stamp: the entry's last_write, which the flush stores with the delta; stamped: the claim took
// stamp_dirty (the tables lack that stamp), which a failed flush gives back. row: the entry's
// row hint (Entry::row) when claimed; the flush sets it to where it wrote the row (0: not known),
// which a committed settle stores.
struct Claim {
  uint32_t index;
  uint32_t generation;
  uint32_t partition;
  int64_t delta;
  int64_t stamp;
  bool stamped;
  uint64_t row;
};

// kTaken: claimed with a nonzero delta; kClean: nothing to write (or another flusher claimed it);
// kLeft: dirty, but not for this flush (the caller's eligible refused it).
enum class Take { kTaken, kClean, kLeft };

// A committing transaction's hold on one entry of a transactional counter: delta is its delta,
// expired the value of an expired key that the commit takes away (0 if none: the commit adds
// delta - expired), stamp the commit's time.
struct Reservation {
  uint32_t index;
  uint32_t generation;
  uint32_t partition;
  int64_t delta;
  int64_t expired;
  int64_t stamp;
};

// kOverflow: the value could leave bigint; kOutOfBounds: it could leave the reservation's bounds;
// kBusy: the key has expired while another transaction's reservation holds it, so whether this
// one counts from 0 depends on that one's outcome: wait for its settle.
enum class Reserve { kReserved, kOverflow, kOutOfBounds, kLoading, kMissing, kBusy };

// A buffered batch's pin on one entry.
struct Pin {
  uint32_t index;
  uint32_t generation;
  uint32_t partition;
};

}  // namespace sc
