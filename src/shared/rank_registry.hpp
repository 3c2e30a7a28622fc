// rank_registry.hpp: the registry of sc_rank's indexes in shared memory (its protocol:
// rank_indexes.hpp, which says who changes what under which lock).
#pragma once

#include <type_traits>

#include "core/rank_index.hpp"
#include "pg.hpp"

namespace sc {

constexpr int kRankSlots = 32;

// kRankRefused: its index did not fit in its share of slotted_counter.rank_memory: a note that
// its counter is not asked for again until `want` bytes would fit (rank_indexes.hpp). It holds
// no memory, and any counter's claim may take the slot.
enum RankState : uint32 {
  kRankFree = 0,
  kRankWanted = 1,
  kRankReady = 2,
  kRankBroken = 3,
  kRankRefused = 4
};

struct RankIndexSlot {
  Oid db;                    // the registry lock, with counter, owner, state and want
  int32 counter;
  Oid owner;                 // the counter's owner when it asked: the party within db
  uint32 state;              // RankState
  uint64 want;               // kRankRefused: the bytes its index would hold
  pg_atomic_uint64 used_at;  // TimestampTz of the last rank it answered
  pg_atomic_uint64 bytes;    // index.Bytes(), written with it, read for the shares
  TimestampTz built_at;      // the flusher's
  LWLock* lock;              // the index
  RankIndex index;
};

struct RankIndexes {
  LWLock* lock;             // the registry
  dsa_handle area;          // DSM_HANDLE_INVALID until the first index
  int tranche;              // of the area's locks
  pg_atomic_uint64 bytes;   // held by every index
  RankIndexSlot slots[kRankSlots];
};

// Shared memory for the registry, and how many LWLocks it takes.
Size RankIndexesSize();
constexpr int kRankLocks = 1 + kRankSlots;

static_assert(std::is_standard_layout<RankIndexSlot>::value &&
                  std::is_standard_layout<RankIndexes>::value,
              "shared structs have a standard layout");
void InitRankIndexes(RankIndexes* r, LWLockPadded* locks);

}  // namespace sc
