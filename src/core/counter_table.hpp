// counter_table.hpp: the table of counter values that lives in one block of shared memory.
//
// Pure C++ (no PostgreSQL header). The steps that take the partition locks, in the order the
// rules below require, are in protocol.hpp, run by the server with its LWLocks and by the unit
// tests (test/unit) with std::shared_mutex. Nothing here allocates or throws: every function is
// noexcept.
//
// Layout: a CounterTable header, then `nbuckets` chain heads, then `capacity` 88-byte entries.
// The hash space is split into kPartitions partitions (partition = hash % kPartitions, and every
// bucket belongs to exactly one partition), each guarded by one reader-writer lock of the caller's.
//
// Protocol (what the caller must hold):
//   - Find: the entry's partition lock, shared or exclusive. Link/Unlink: that lock, exclusive.
//     So an entry found under a shared lock stays linked, with the same id, until that lock is
//     released. `id` and `hash` are written only by the entry's owner (kOwned, not linked); the
//     clock sweep reads `hash` without a lock, then re-checks it and the state under the lock of
//     the partition it names: an entry becomes resident in a partition only by a Link under that
//     partition's lock. Unlink hands the entry to its caller (kOwned), so no second sweep can
//     evict an entry that one sweep has already taken.
//   - Entry::value and Entry::flushed are atomics: incrementers add to value under the shared
//     lock (Add); only the flusher of the entry's database advances flushed. An entry is clean
//     when value == flushed, and only clean resident entries that no flush is writing
//     (in_flush == 0) and nothing holds (pins == 0) are evicted: a value that
//     went up and back down during a flush is clean by value while the table is about to receive
//     the flush's delta, and a pinned entry is about to receive a committed delta or a batch.
//   - Entry::last_write is the time of the key's latest write (the stored updated_at when loaded):
//     raised, never lowered, by every write under the lock it writes under. A key of a counter
//     with a retention reads 0 once last_write <= the reader's cutoff; a write turns such a value
//     into 0 under the EXCLUSIVE lock before it adds (protocol.hpp: expiry). stamp_dirty says the
//     tables lack the latest stamp: a write that raised it sets it, a flush's claim takes it (and
//     gives it back if the flush failed). Clean means value == flushed and !stamp_dirty: only
//     then may an entry leave the buffer, as its stamp would be lost with it.
//   - Entry::reserved_* belong to transactional counters, Entry::pins to them and to batches of
//     buffered ones; they change only under the partition lock EXCLUSIVE (pre-commit reserves and
//     pins, commit or abort settles; a batch pins its keys until it has applied them or failed).
//   - The free list is a lock-free stack (tagged head, so a popped-and-pushed slot cannot be
//     mistaken for the one read); an allocated entry belongs to its allocator until linked.
//   - generation changes each time a slot returns to the free list, so code that remembered
//     (index, generation) across a lock release can tell whether it still has the same entry.
//   - Sum entries: besides one entry per (key, bucket), partition p holds for each (counter,
//     bucket) whose keys in p changed since their flush a sum entry (IsSum: counter < 0,
//     SumKeyOf, SumHash puts it in p): its value is the sum of value - flushed over those keys'
//     entries in p, its flushed stays 0. Every change of a key entry's value or flushed changes
//     its sum entry by as much under the same partition lock (protocol.hpp: sums), so a reader
//     of the 128 sum entries of a (counter, bucket) has what the buffer holds beyond the tables
//     without reading a key. A sum entry is never claimed by a flush nor noted dirty; it leaves
//     only under p's exclusive lock, when it holds 0 and no key entry of its (counter, bucket) in
//     p differs from its row, is being flushed or is pinned (SumRemovable), so that every key
//     entry that a write, a settle or a batch changes has its sum entry. sum_wrapped: an add
//     left the bigint range (the value wrapped around); a reader then sums the keys instead.
//   - Occupancy: how many linked entries each database has, in kOccupancyCells cells of
//     (db << 32 | count), changed with a compare-and-swap by Link, Unlink and RemoveIf (so a cell
//     changes hands only while its count is 0, and a count never lands in another database's
//     cell). A database beyond the cells is not counted. A load's clock sweep evicts clean
//     entries of its own database, and of databases holding more than their fair share
//     (capacity / databases with entries): one database's dirty flood keeps no other from its
//     share of the buffer (protocol.hpp: TakeFreeOrClean).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/gcra.hpp"
#include "core/murmur3.hpp"

namespace sc {

// The bucket of an unbucketed counter; equal to PostgreSQL's -infinity timestamp.
constexpr int64_t kNoBucket = INT64_MIN;
constexpr uint32_t kNil = UINT32_MAX;
constexpr uint32_t kPartitions = 128;
constexpr uint32_t kOccupancyCells = 64;

// Write stamps (Entry::last_write) are PostgreSQL timestamps. kNoWrite: none known (a key never
// written); kNeverExpires: the cutoff of a key that does not expire. Every stamp is above it, so
// a cutoff of kNeverExpires finds nothing expired.
constexpr int64_t kNeverExpires = INT64_MIN;
constexpr int64_t kNoWrite = INT64_MIN + 1;

// What a write brings besides its delta: its time (stamp, kNoWrite for none), and the cutoff of
// its counter's retention: a key last written at or before cutoff has expired, reads 0, and the
// write counts from 0 (kNeverExpires: no retention).
struct Write {
  int64_t stamp = kNoWrite;
  int64_t cutoff = kNeverExpires;
};

struct CounterKey {
  uint32_t db;       // database oid
  int32_t counter;   // counter id within that database
  int64_t key;
  int64_t bucket;    // start of the time bucket (PostgreSQL timestamp), or kNoBucket
};

// The range a bounded increment keeps its result in (sc_incr_bounded: a NULL bound is no bound);
// the full range of bigint is no bound at all.
struct Bounds {
  int64_t lower = INT64_MIN;
  int64_t upper = INT64_MAX;

  bool Admit(int64_t value) const noexcept { return value >= lower && value <= upper; }
  // What both admit.
  Bounds And(Bounds other) const noexcept {
    return Bounds{lower > other.lower ? lower : other.lower,
                  upper < other.upper ? upper : other.upper};
  }
};

inline bool operator==(const CounterKey& a, const CounterKey& b) noexcept {
  return a.db == b.db && a.counter == b.counter && a.key == b.key && a.bucket == b.bucket;
}

// murmur3's 64-bit finaliser (core/murmur3.hpp): every output bit depends on every input bit.
inline uint64_t MixBits(uint64_t x) noexcept { return Murmur3Finalize(x); }

// Every bucket of one (db, counter, key) hashes to the same partition (PartitionOf), so that one
// partition's lock covers all of a key's buckets; the chain within it depends on the bucket too.
// Inline and one finaliser for an unbucketed key: it is on every increment's path. The counter
// is spread by a multiply (odd, so distinct counters stay distinct) before the key joins it.
inline uint32_t HashCounterKey(const CounterKey& k) noexcept {
  uint64_t counter = (uint64_t(k.db) << 32 | uint32_t(k.counter)) * 0x9e3779b97f4a7c15ULL;
  uint64_t h = MixBits(counter ^ uint64_t(k.key));
  if (k.bucket == kNoBucket) return uint32_t(h);
  // The partition bits come from the key alone, the chain bits from the bucket too.
  uint32_t partition_bits = uint32_t(h) % kPartitions;
  uint32_t chain_bits = uint32_t(MixBits(h ^ uint64_t(k.bucket)));
  return chain_bits - chain_bits % kPartitions + partition_bits;
}

// Sum entries (see the protocol above): counter ids are >= 1, so a negated one names no key's
// entry. The key is the partition, the hash leaves out the bucket: all the sum entries of a
// counter in partition p share a chain, which a reader of a range of buckets walks once.
inline bool IsSum(const CounterKey& k) noexcept { return k.counter < 0; }
inline CounterKey SumKeyOf(const CounterKey& k, uint32_t partition) noexcept {
  return CounterKey{k.db, -k.counter, int64_t(partition), k.bucket};
}
// One multiply (on every write's path): the high bits of a multiplicative hash of the counter.
inline uint32_t SumHash(uint32_t db, int32_t counter, uint32_t partition) noexcept {
  uint32_t bits = uint32_t(((uint64_t(db) << 32 | uint32_t(counter)) * 0x9e3779b97f4a7c15ULL) >> 32);
  return bits - bits % kPartitions + partition;
}

enum EntryState : uint32_t {
  kFree = 0,      // on the free list
  kOwned = 1,     // allocated, not yet linked: only its allocator touches it
  kLoading = 2,   // linked; its allocator is reading the stored value, others wait
  kResident = 3,  // linked and current
};

struct Entry {
  CounterKey id;
  std::atomic<int64_t> value;        // the exact current value
  std::atomic<int64_t> flushed;      // the part of value that the values table holds
  std::atomic<int64_t> last_write;   // the time of the latest write (see the protocol above)
  std::atomic<uint32_t> state;       // EntryState
  std::atomic<uint32_t> generation;  // bumped each time the slot is freed
  std::atomic<uint32_t> next;        // chain link, or free-list link while kFree
  std::atomic<uint32_t> hash;        // of id; written by the owner before Link
  std::atomic<uint8_t> usage;        // clock-sweep reference bit
  std::atomic<uint8_t> in_flush;     // 1 while a flush that read this entry has not settled it
  std::atomic<uint8_t> stamp_dirty;  // 1 while the tables lack last_write
  std::atomic<uint8_t> sum_wrapped;  // a sum entry's: an add to it wrapped around (see above)
  uint8_t pad[4];
  // Transactional counters: the positive and the negative deltas of transactions between their
  // pre-commit and their end (kept apart so that any order of their commits and aborts stays in
  // range), and how many such transactions hold the entry. Changed only under the exclusive lock.
  std::atomic<int64_t> reserved_up;
  std::atomic<int64_t> reserved_down;
  std::atomic<uint32_t> pins;
  // The fold epoch of the entry's database when a transaction last committed a delta into it
  // (0: none since it was loaded). The entry may be evicted only after a fold of that epoch
  // moved those deltas into the values table (buffer/load.cpp), so a key that is not resident has
  // no unfolded deltas and its load reads the values table alone.
  std::atomic<uint32_t> commit_epoch;
  // Where the key's row of the values table was when its load read it or the last committed flush
  // wrote it (a TID, packed by src/tid.hpp; 0: not known). Written by FinishLoad and by the flush
  // that holds the entry's claim, at its settle. A hint: a flush that finds no row of this key
  // there (moved, deleted, or the slot holding another row) looks the row up by its key, so
  // nothing depends on the hint being current.
  std::atomic<uint64_t> row;
};
static_assert(sizeof(Entry) == 104, "an entry is 104 bytes");
// Shared by every process: a plain layout, and atomics that are real instructions (a lock-based
// atomic would be a lock inside shared memory that no process could clean up).
static_assert(std::is_standard_layout<Entry>::value && std::is_standard_layout<CounterKey>::value,
              "shared structs have a standard layout");
static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint8_t>::is_always_lock_free,
              "the atomics of shared memory are lock-free");

class CounterTable {
 public:
  static size_t BytesFor(uint32_t capacity) noexcept;
  // Lays out an empty table in `mem` (BytesFor(capacity) bytes) and returns it.
  static CounterTable* Create(void* mem, uint32_t capacity) noexcept;

  static uint32_t PartitionOf(uint32_t hash) noexcept { return hash % kPartitions; }

  uint32_t capacity() const noexcept { return capacity_; }
  uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  Entry& at(uint32_t index) noexcept { return entries()[index]; }
  const Entry& at(uint32_t index) const noexcept { return entries()[index]; }

  // Caller holds the partition lock of `hash`. Inline: it is on every increment's path.
  uint32_t Find(const CounterKey& k, uint32_t hash) const noexcept {
    const Entry* es = entries();
    for (uint32_t i = heads()[hash & (nbuckets_ - 1)].load(std::memory_order_acquire); i != kNil;
         i = es[i].next.load(std::memory_order_relaxed)) {
      if (es[i].hash.load(std::memory_order_relaxed) == hash && es[i].id == k) return i;
    }
    return kNil;
  }
  // Caller holds the partition lock of the entry's hash exclusively.
  void Link(uint32_t index) noexcept;
  void Unlink(uint32_t index) noexcept;

  // Takes a free entry (state kOwned, id/hash to be filled by the caller), or kNil if none.
  uint32_t Allocate() noexcept;
  // Returns an unlinked entry to the free list.
  void Release(uint32_t index) noexcept;

  // The next entry the clock sweep looks at.
  uint32_t ClockNext() noexcept;

  // How many linked entries database db has (0 if it has none, or is beyond the cells).
  uint32_t OccupancyOf(uint32_t db) const noexcept;
  // The databases other than db that hold more than their fair share of the entries: capacity /
  // the number of databases with entries, db counted among them; at most max written to out,
  // returns how many. A load of db may evict their clean entries (and its own).
  int OverShare(uint32_t db, uint32_t* out, int max) const noexcept;
  // Whether db holds more than its fair share.
  bool OverItsShare(uint32_t db) const noexcept;
  // Clock-sweep test, under the entry's exclusive partition lock: a recently used entry gets a
  // second chance (unless second_chance is false: an entry of a database over its share);
  // otherwise true if the entry is resident, clean, not being flushed and not pinned.
  static bool AgeAndTestEvictable(Entry& e, bool second_chance = true) noexcept;

  // Calls fn(index, entry) for every linked entry of partition p; the caller holds its lock.
  template <typename Fn>
  void ForEachInPartition(uint32_t p, Fn&& fn) noexcept {
    Entry* es = entries();
    for (uint32_t b = p; b < nbuckets_; b += kPartitions)
      for (uint32_t i = heads()[b].load(std::memory_order_acquire); i != kNil;
           i = es[i].next.load(std::memory_order_relaxed))
        fn(i, es[i]);
  }

  // Calls fn(index, entry) for every linked entry of the chain that `hash` names; the caller
  // holds the lock of its partition.
  template <typename Fn>
  void ForEachInChain(uint32_t hash, Fn&& fn) noexcept {
    Entry* es = entries();
    for (uint32_t i = heads()[hash & (nbuckets_ - 1)].load(std::memory_order_acquire); i != kNil;
         i = es[i].next.load(std::memory_order_relaxed))
      fn(i, es[i]);
  }

  // Unlinks and frees every linked entry of partition p for which pred(entry) is true; returns
  // how many. The caller holds the partition lock exclusively.
  template <typename Pred>
  uint32_t RemoveIf(uint32_t p, Pred&& pred) noexcept {
    Entry* es = entries();
    uint32_t removed = 0;
    for (uint32_t b = p; b < nbuckets_; b += kPartitions) {
      std::atomic<uint32_t>* link = &heads()[b];
      for (uint32_t i = link->load(std::memory_order_relaxed); i != kNil;
           i = link->load(std::memory_order_relaxed)) {
        if (pred(es[i])) {
          link->store(es[i].next.load(std::memory_order_relaxed), std::memory_order_release);
          CountLinked(es[i].id.db, -1);
          Release(i);
          removed++;
        } else {
          link = &es[i].next;
        }
      }
    }
    return removed;
  }

  // Whether the entry holds nothing the tables lack (its value and its stamp are stored).
  static bool Clean(const Entry& e) noexcept {
    return e.value.load(std::memory_order_acquire) == e.flushed.load(std::memory_order_acquire) &&
           e.stamp_dirty.load(std::memory_order_acquire) == 0;
  }

  // Whether a key last written at `last_write` has expired for cutoff. One written with no time
  // known (kNoWrite: before its counter had a retention, and not flushed since) has not.
  static bool Expired(int64_t last_write, int64_t cutoff) noexcept {
    return last_write <= cutoff && last_write != kNoWrite;
  }

  // Whether the entry's key has expired for a reader whose cutoff is `cutoff` and still holds a
  // value (one that holds 0 reads the same expired or not).
  static bool ExpiredValue(const Entry& e, int64_t cutoff) noexcept {
    return Expired(e.last_write.load(std::memory_order_acquire), cutoff) &&
           e.value.load(std::memory_order_acquire) != 0;
  }

  // The value a reader whose cutoff is `cutoff` sees: 0 once the key has expired.
  static int64_t ReadValue(const Entry& e, int64_t cutoff) noexcept {
    int64_t value = e.value.load(std::memory_order_acquire);
    return Expired(e.last_write.load(std::memory_order_acquire), cutoff) ? 0 : value;
  }

  // Raises the entry's stamp to `stamp` if that is later; true if that made the tables lack it
  // (stamp_dirty went from 0 to 1), so the caller notes the entry dirty.
  static bool RaiseStamp(Entry& e, int64_t stamp) noexcept {
    if (stamp == kNoWrite) return false;  // a write that carries no time (a constant, mostly)
    int64_t old = e.last_write.load(std::memory_order_relaxed);
    if (stamp <= old) return false;
    while (!e.last_write.compare_exchange_weak(old, stamp, std::memory_order_seq_cst,
                                               std::memory_order_relaxed))
      if (stamp <= old) return false;
    return e.stamp_dirty.load(std::memory_order_relaxed) == 0 &&
           e.stamp_dirty.exchange(1, std::memory_order_seq_cst) == 0;
  }

  // Adds delta to the entry's value unless that overflows; returns false (changing nothing) then.
  static bool Add(Entry& e, int64_t delta, int64_t* new_value) noexcept {
    int64_t old = e.value.load(std::memory_order_relaxed);
    int64_t sum;
    do {
      if (__builtin_add_overflow(old, delta, &sum)) return false;
    } while (!e.value.compare_exchange_weak(old, sum, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if (e.usage.load(std::memory_order_relaxed) == 0) e.usage.store(1, std::memory_order_relaxed);
    *new_value = sum;
    return true;
  }

  // Adds delta to the entry's value if the sum stays within bounds (and so within bigint);
  // otherwise changes nothing and returns false, *value the value it was refused against.
  // Under the same lock as Add: the check and the add are one compare-and-swap, so concurrent
  // bounded adds admit exactly as many as fit. (Add's own loop stays apart: it is the hot path.)
  static bool AddWithin(Entry& e, int64_t delta, Bounds bounds, int64_t* value) noexcept {
    int64_t old = e.value.load(std::memory_order_relaxed);
    int64_t sum;
    do {
      if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {
        *value = old;
        return false;
      }
    } while (!e.value.compare_exchange_weak(old, sum, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if (e.usage.load(std::memory_order_relaxed) == 0) e.usage.store(1, std::memory_order_relaxed);
    *value = sum;
    return true;
  }

  // A limiter's call (gcra.hpp) on the entry, whose value is the key's TAT: the step applied by
  // one compare-and-swap, under the same lock as Add, so that concurrent callers of one key admit
  // exactly what some serial order of them would. A refused call, and a read (cost 0), write
  // nothing.
  // *old: the TAT the answer was computed from (the one replaced, if the call wrote).
  static GcraAnswer Throttle(Entry& e, int64_t now, int64_t cost, const GcraLimit& limit,
                             int64_t* old) noexcept {
    *old = e.value.load(std::memory_order_relaxed);
    GcraAnswer answer;
    do {
      answer = GcraStep(*old, now, cost, limit);
      if (!answer.allowed || answer.tat == *old) return answer;
    } while (!e.value.compare_exchange_weak(*old, answer.tat, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if (e.usage.load(std::memory_order_relaxed) == 0) e.usage.store(1, std::memory_order_relaxed);
    return answer;
  }
  static GcraAnswer Throttle(Entry& e, int64_t now, int64_t cost, const GcraLimit& limit) noexcept {
    int64_t old;
    return Throttle(e, now, cost, limit, &old);
  }

  // A rolled-back call's give-back (GcraGiveBack, never below `floor`), by compare-and-swap;
  // returns the TAT after it, *old the one before (equal: nothing written).
  static int64_t GiveBack(Entry& e, int64_t cost, const GcraLimit& limit, int64_t floor,
                          int64_t* old) noexcept {
    *old = e.value.load(std::memory_order_relaxed);
    int64_t tat;
    do {
      if (*old <= floor) return *old;  // full already: nothing to give back
      tat = GcraGiveBack(*old, cost, limit, floor);
    } while (!e.value.compare_exchange_weak(*old, tat, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    return tat;
  }

 private:
  // The chain heads follow the header (cache-line aligned), the entries follow the heads.
  static constexpr size_t HeadsOffset() noexcept { return (sizeof(CounterTable) + 63) / 64 * 64; }
  Entry* entries() noexcept {
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + entries_offset_);
  }
  const Entry* entries() const noexcept {
    return reinterpret_cast<const Entry*>(reinterpret_cast<const char*>(this) + entries_offset_);
  }
  std::atomic<uint32_t>* heads() noexcept {
    return reinterpret_cast<std::atomic<uint32_t>*>(reinterpret_cast<char*>(this) + HeadsOffset());
  }
  const std::atomic<uint32_t>* heads() const noexcept {
    return reinterpret_cast<const std::atomic<uint32_t>*>(reinterpret_cast<const char*>(this) +
                                                          HeadsOffset());
  }

  // Adds delta to db's occupancy, taking a cell whose count is 0 for a database not counted yet.
  void CountLinked(uint32_t db, int delta) noexcept;

  uint32_t capacity_;
  uint32_t nbuckets_;                 // a power of two, a multiple of kPartitions
  std::atomic<uint64_t> occupancy_[kOccupancyCells];  // (db << 32) | linked entries
  std::atomic<uint64_t> free_head_;   // (tag << 32) | index
  std::atomic<uint64_t> clock_hand_;
  std::atomic<uint64_t> used_;
  uint64_t entries_offset_;           // bytes from the header to the first entry
};

}  // namespace sc
