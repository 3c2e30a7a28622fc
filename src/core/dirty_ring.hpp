// dirty_ring.hpp: where a database's flusher finds the entries that turned dirty since its last
// flush, without scanning the whole buffer.
//
// Pure C++ (no PostgreSQL header); core/protocol.hpp's steps call these. The rule: a write that
// turns a clean entry dirty notes (index, generation) in its database's ring: it reads flushed
// after its add, a settle reads value after its add to flushed (both sequentially consistent), so
// one of the two notes the entry. A full ring sets `overflow`: the next flush scans the whole
// table.
// A ring is guarded by a mutex of the caller's: in the server the spinlock dirty_mutex of the
// database's slot (shared/shmem.hpp), taken under a partition lock at most; in the tests a
// std::mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/counter_table.hpp"

namespace sc {

// An entry that became dirty: its index, and its generation then (a stale one is skipped).
struct DirtyRef {
  uint32_t index;
  uint32_t generation;
};

// How many dirty entries one database's ring remembers between two flushes (beyond that, the
// next flush scans the whole buffer): an eighth of the buffer, at least 8,192 and at most 65,536.
// A ring that overflows every interval makes every flush a scan of the whole buffer.
constexpr uint32_t kMinDirtyRing = 8192;
constexpr uint32_t kMaxDirtyRing = 65536;
constexpr int DirtyRingCapacity(uint32_t max_entries) noexcept {
  return int(max_entries / 8 < kMinDirtyRing   ? kMinDirtyRing
             : max_entries / 8 > kMaxDirtyRing ? kMaxDirtyRing
                                               : max_entries / 8);
}

// One database's entries that turned dirty since its flusher last took them. In shared memory
// (refs: `capacity` of them, laid out beside it), guarded by a mutex of the caller's.
struct DirtyRing {
  int count;
  int capacity;
  bool overflow;
  DirtyRef* refs;
};
static_assert(std::is_standard_layout<DirtyRing>::value, "shared structs have a standard layout");

template <typename Mutex>
void RingNote(DirtyRing& ring, Mutex& mutex, uint32_t index, uint32_t generation) noexcept {
  mutex.lock();
  if (ring.count < ring.capacity)
    ring.refs[ring.count++] = DirtyRef{index, generation};
  else
    ring.overflow = true;
  mutex.unlock();
}

// The next flush scans the whole buffer.
template <typename Mutex>
void RingMarkUntracked(DirtyRing& ring, Mutex& mutex) noexcept {
  mutex.lock();
  ring.overflow = true;
  mutex.unlock();
}

// Empties the ring (a slot just (re)assigned): the next flush scans everything.
template <typename Mutex>
void RingReset(DirtyRing& ring, Mutex& mutex) noexcept {
  mutex.lock();
  ring.count = 0;
  ring.overflow = true;
  mutex.unlock();
}

template <typename Mutex>
bool RingOverflowed(DirtyRing& ring, Mutex& mutex) noexcept {
  mutex.lock();
  bool overflow = ring.overflow;
  mutex.unlock();
  return overflow;
}

// Takes the ring whole (copies it into out, ring.capacity refs of room, and empties it at once: two
// flushers overlap during a hand-over). Returns how many refs; *scan_all: the flush must scan the
// whole table instead (the ring overflowed, and the caller, having read RingOverflowed first,
// made room for that: an overflow flagged after that look waits for the next flush).
template <typename Mutex>
int RingTake(DirtyRing& ring, Mutex& mutex, bool room_for_all, DirtyRef* out,
             bool* scan_all) noexcept {
  mutex.lock();
  *scan_all = room_for_all && ring.overflow;
  int n = ring.count;
  for (int i = 0; i < n; i++) out[i] = ring.refs[i];
  ring.count = 0;
  if (*scan_all) ring.overflow = false;
  mutex.unlock();
  return n;
}

// A write that may have turned a clean entry dirty (index kNil: none did).
struct Dirtied {
  uint32_t index = kNil;
  uint32_t generation = 0;
};

// After a write that moved an entry's value from old_value to new_value, under the partition
// lock: the entry turned dirty if it was clean before. Reads flushed after the write (seq_cst).
inline void CheckDirtied(uint32_t index, const Entry& e, int64_t old_value, int64_t new_value,
                         Dirtied* dirtied) noexcept {
  if (old_value != new_value && old_value == e.flushed.load(std::memory_order_seq_cst))
    *dirtied = Dirtied{index, e.generation.load(std::memory_order_relaxed)};
}

// After a write with stamp `stamp` (counter_table.hpp: RaiseStamp): the entry turned dirty if the
// stamp was the first the tables lack.
inline void StampDirtied(uint32_t index, Entry& e, int64_t stamp, Dirtied* dirtied) noexcept {
  if (CounterTable::RaiseStamp(e, stamp))
    *dirtied = Dirtied{index, e.generation.load(std::memory_order_relaxed)};
}

}  // namespace sc
