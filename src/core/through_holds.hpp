// through_holds.hpp: partitions of the counter table held against loads, while a batch's keys are
// written through to slotted_counter.key_values by the flusher, or while the flusher deletes the
// rows of expired keys.
//
// Pure C++ (no PostgreSQL header). The server runs these steps with the table's protocol
// (core/protocol.hpp, over its partition locks) on SharedState::through_holds (shared/shmem.hpp);
// the unit tests with recording and standard locks (test/unit/).
//
// The rule (said here once): the hold of database db on partition p (HoldOf) counts the batches
// of db being written through that have keys in p, plus 1 while db's flusher deletes the rows of
// expired keys of p. It is raised only under p's partition lock EXCLUSIVE, after checking that
// none of the keys it covers is resident (a batch pins those that are and adds to them in the
// buffer instead; an expiry unlinks the clean entries of its keys first) and none is being loaded
// (HoldPartitionForBatch, HoldPartitionForExpiry). While it is nonzero no key of p is loaded:
// loaders check it under the same exclusive lock (BeginLoadUnlessHeld). So no value of a batch's
// keys is linked into the buffer while the flusher writes them, and none of an expiring key while
// its row is deleted. It is lowered (ReleaseHold) with no lock, by whoever raised it, once the
// write or the delete is over (committed or not); never below zero.
//
// Databases share the counters by a hash of their OID (kHoldGroups groups, HoldGroup), so one
// database's batches hold off the loads of few others: a hold only delays a load, and it is
// never wrong to wait for one.
//
// A commit that writes its keys' rows itself (transactions/large_commit.hpp: more keys than the
// buffer should pin) holds its counters instead (CounterHoldOf: kCounterHoldSlots counts shared
// by a hash of (db, counter), so it delays the loads of few other counters). The rule: the hold is
// raised (RaiseCounterHold) before the commit looks at any of its keys; a key the commit writes
// itself is one it found, under its partition's lock EXCLUSIVE, without an entry, or with one
// that held nothing the tables lack, which it removed (ReserveOrWriteOwn); loaders check the
// hold under the same lock (BeginLoadUnlessHeld). So none of those keys is linked into the buffer
// with a value read before the commit is visible. It is lowered (ReleaseCounterHold) with no
// lock, once the commit is visible or aborted.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"
#include "core/entry_handles.hpp"
#include "core/protocol.hpp"

namespace sc {

// Groups of databases sharing the counters of the holds.
constexpr uint32_t kHoldGroups = 16;

// Slots of the counters' holds.
constexpr uint32_t kCounterHoldSlots = 64;

struct ThroughHolds {
  std::atomic<uint32_t> held[kHoldGroups][kPartitions];
  std::atomic<uint32_t> counters[kCounterHoldSlots];
};
static_assert(std::is_standard_layout<ThroughHolds>::value,
              "shared structs have a standard layout");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the holds are lock-free");

inline void InitThroughHolds(ThroughHolds& holds) noexcept {
  for (auto& group : holds.held)
    for (std::atomic<uint32_t>& hold : group) hold.store(0, std::memory_order_relaxed);
  for (std::atomic<uint32_t>& hold : holds.counters) hold.store(0, std::memory_order_relaxed);
}

// The group whose counters database db shares.
inline uint32_t HoldGroup(uint32_t db) noexcept { return uint32_t(MixBits(db) % kHoldGroups); }

// The hold of database db on partition p.
inline std::atomic<uint32_t>& HoldOf(ThroughHolds& holds, uint32_t db, uint32_t p) noexcept {
  SC_ASSERT(p < kPartitions);
  return holds.held[HoldGroup(db)][p];
}

// Whether loads of db's keys in partition p must wait. Under p's lock EXCLUSIVE.
inline bool LoadsHeld(ThroughHolds& holds, uint32_t db, uint32_t p) noexcept {
  return HoldOf(holds, db, p).load(std::memory_order_seq_cst) != 0;
}

// The hold of database db on its counter `counter`.
inline std::atomic<uint32_t>& CounterHoldOf(ThroughHolds& holds, uint32_t db,
                                            int32_t counter) noexcept {
  uint64_t mixed = MixBits((uint64_t(db) << 32) | uint32_t(counter));
  return holds.counters[mixed % kCounterHoldSlots];
}

// Whether loads of db's keys of `counter` must wait. Under the key's partition lock EXCLUSIVE.
inline bool CounterLoadsHeld(ThroughHolds& holds, uint32_t db, int32_t counter) noexcept {
  return CounterHoldOf(holds, db, counter).load(std::memory_order_seq_cst) != 0;
}

// Before a commit looks at its keys of `counter`. No lock needed.
inline void RaiseCounterHold(ThroughHolds& holds, uint32_t db, int32_t counter) noexcept {
  CounterHoldOf(holds, db, counter).fetch_add(1, std::memory_order_seq_cst);
}

// Lowers a hold that the caller raised (RaiseCounterHold). No lock needed.
inline void ReleaseCounterHold(ThroughHolds& holds, uint32_t db, int32_t counter) noexcept {
  uint32_t before = CounterHoldOf(holds, db, counter).fetch_sub(1, std::memory_order_seq_cst);
  SC_ASSERT(before > 0);
}

// Lowers a hold that the caller raised (HoldPartitionForBatch, HoldForExpiry). No lock needed.
inline void ReleaseHold(ThroughHolds& holds, uint32_t db, uint32_t p) noexcept {
  uint32_t before = HoldOf(holds, db, p).fetch_sub(1, std::memory_order_seq_cst);
  SC_ASSERT(before > 0);
}

namespace hold_step {

// Under p's lock EXCLUSIVE, the keys checked.
inline void Raise(ThroughHolds& holds, uint32_t db, uint32_t p) noexcept {
  HoldOf(holds, db, p).fetch_add(1, std::memory_order_seq_cst);
}

}  // namespace hold_step

// A batch of database db, before its keys of partition p are written through: under p's lock
// EXCLUSIVE, pins each of them that is resident (pinned(j, pin): the batch adds to it in the
// buffer instead), and raises db's hold on p if none of them is being loaded. False, holding
// nothing, when one is (the keys before it may be pinned): the caller waits for that load and
// calls again. key_of(j, &key, &hash) gives the j-th of the n keys (all of db, in p), false if
// the caller has pinned it already.
template <typename Locks, typename KeyOf, typename Pinned>
bool HoldPartitionForBatch(Protocol<Locks>& table, ThroughHolds& holds, uint32_t db, uint32_t p,
                           int n, KeyOf&& key_of, Pinned&& pinned) noexcept {
  bool loading = false;
  table.Exclusively(p, [&] {
    for (int j = 0; j < n && !loading; j++) {
      CounterKey k;
      uint32_t hash;
      if (!key_of(j, &k, &hash)) continue;
      SC_ASSERT(k.db == db && CounterTable::PartitionOf(hash) == p);
      Pin pin{kNil, 0, p};
      Probe probe = table.PinLocked(k, hash, &pin);
      // Resident without its sum entry, it holds nothing beyond its row: dropped, it is written
      // through with the others; held (a flush or a fold to come), it is waited for as a load.
      if (probe == Probe::kNoSum) probe = table.DropCleanLocked(k, hash) ? Probe::kMissing
                                                                          : Probe::kLoading;
      loading = probe == Probe::kLoading;
      if (probe == Probe::kFound) pinned(j, pin);
    }
    if (!loading) hold_step::Raise(holds, db, p);
  });
  return !loading;
}

// The expiry of database db, before it deletes the rows of n keys of partition p: under p's
// lock EXCLUSIVE, unlinks the clean entries of the keys (Protocol::UnlinkForExpiry: expirable[i]
// says whether keys[i] has no entry now) and raises db's hold on p, always (the caller releases
// it once its delete is over).
template <typename Locks, typename MayEvict>
void HoldPartitionForExpiry(Protocol<Locks>& table, ThroughHolds& holds, uint32_t db, uint32_t p,
                            const CounterKey* keys, const uint32_t* hashes, int n,
                            bool* expirable, MayEvict&& may_evict) noexcept {
  table.UnlinkForExpiry(p, keys, hashes, n, expirable, may_evict,
                        [&] { hold_step::Raise(holds, db, p); });
}

// A commit of `counter`'s keys that holds it (RaiseCounterHold), for one of them: under k's
// partition lock EXCLUSIVE, kMissing if k has no entry, or had one that held nothing the tables
// lack (DropCleanLocked removed it; *row: its hint of where k's row is, or 0): the commit writes
// k's row itself, and no load links k until the hold is released. Otherwise reserves delta on the
// entry as ReserveIfResident does (kLoading, kBusy, kOverflow, kOutOfBounds as there).
template <typename Locks>
Reserve ReserveOrWriteOwn(Protocol<Locks>& table, ThroughHolds& holds, const CounterKey& k,
                          uint32_t hash, int64_t delta, Reservation* out, int64_t* committed,
                          Bounds bounds, Write w, uint64_t* row = nullptr) noexcept {
  SC_ASSERT(CounterLoadsHeld(holds, k.db, k.counter));
  Reserve result = Reserve::kMissing;
  table.Exclusively(CounterTable::PartitionOf(hash), [&] {
    if (!table.DropCleanLocked(k, hash, row))
      result = table.ReserveLocked(k, hash, delta, out, committed, bounds, w);
  });
  return result;
}

// A load (Protocol::BeginLoad) that also waits (kRetry) while k's partition is held for k's
// database, or k's counter by a commit; refuse() decides otherwise, as for BeginLoad.
template <typename Locks, typename Refuse>
LoadStart BeginLoadUnlessHeld(Protocol<Locks>& table, ThroughHolds& holds, uint32_t index,
                              const CounterKey& k, uint32_t hash, Refuse&& refuse,
                              Loading* loading) noexcept {
  return table.BeginLoad(index, k, hash, [&] {
    return LoadsHeld(holds, k.db, CounterTable::PartitionOf(hash)) ||
                   CounterLoadsHeld(holds, k.db, k.counter)
               ? LoadStart::kRetry
               : refuse();
  }, loading);
}

}  // namespace sc
