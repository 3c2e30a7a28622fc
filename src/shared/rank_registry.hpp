// rank_registry.hpp: the registry of sc_rank's indexes in shared memory (its protocol:
// rank_indexes.hpp, which says who changes what under which lock).
#pragma once

#include "core/rank_index.hpp"
#include "pg.hpp"

namespace sc {

constexpr int kRankSlots = 32;

// kRankRefused: over slotted_counter.rank_memory; not asked for again until it goes as idle.
enum RankState : uint32 {
  kRankFree = 0,
  kRankWanted = 1,
  kRankReady = 2,
  kRankBroken = 3,
  kRankRefused = 4
};

struct RankIndexSlot {
  Oid db;                    // the registry lock, with counter and state
  int32 counter;
  uint32 state;              // RankState
  pg_atomic_uint64 used_at;  // TimestampTz of the last rank it answered
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
void InitRankIndexes(RankIndexes* r, LWLockPadded* locks);

}  // namespace sc
