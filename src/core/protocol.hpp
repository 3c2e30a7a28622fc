// protocol.hpp: the lock protocol of the counter table, every step of it, in one place.
//
// Pure C++ (no PostgreSQL header; counter_table.cpp includes this file before the guard
// cpp_only_file.hpp, so including one is a compile error). The server and the unit tests run
// this same code; they differ only in the lock policy:
//
//   struct Locks {                          // one reader-writer lock per partition
//     void Shared(uint32_t partition);
//     void Exclusive(uint32_t partition);
//     bool TryExclusive(uint32_t partition);  // without waiting; true if taken
//     void ReleaseShared(uint32_t partition);  // after Shared
//     void Release(uint32_t partition);        // after Exclusive or a TryExclusive that took it
//   };
//
// In the server these are partition_lock.hpp's counted readers over the LWLocks
// partition_locks[] (shmem.hpp: PartitionLocks); in the tests std::shared_mutex, with and
// without the counted readers. A ring of dirty entries is guarded by a mutex with
// lock()/unlock() (a spinlock in the server).
//
// The rules (counter_table.hpp says what each field means):
//   - Hit: under the key's partition lock SHARED, an entry found kResident takes an atomic add,
//     exchange or read, and a write raises the entry's stamp (last_write). Nothing else happens
//     on the hot path. A bounded add checks its bounds inside the add's compare-and-swap, so
//     concurrent ones admit exactly what fits.
//   - Expiry (keys of counters with a retention; counter_table.hpp: last_write): a read of an
//     entry whose stamp is at or before its cutoff sees 0. A write to one that still holds a
//     value sets the value to 0 under the EXCLUSIVE lock, after looking again there (a write in
//     between revives it), then writes as a hit: adds exclude the zeroing, so every write lands
//     either before it (and is expired with the rest) or after it (and counts from 0). flushed
//     stays, so the flush writes the change and the row holds the new value too. A batch's pin
//     zeroes the same way, under the lock it pins under.
//   - Take: a free entry, or one taken by the clock sweep: it try-locks the partition the entry's
//     hash names (never holding another partition lock), re-checks that partition under the lock,
//     and evicts only a resident, clean, unpinned entry that no flush has claimed and that the
//     caller's may_evict allows (a transactional entry whose deltas are folded). Unlink hands the
//     entry to the sweeper (kOwned), who frees it after the lock; the generation moves on.
//   - Load: the owner fills id and hash, then under the EXCLUSIVE lock links it kLoading unless
//     the key is linked already or the caller refuses (a pending write-through of the key, a held
//     partition, a stale catalog). It reads the stored value without any lock, then under the
//     EXCLUSIVE lock makes it kResident with value = flushed = stored (or removes it if the
//     catalog went stale). An abandoned load removes the entry if its generation and kLoading
//     state are unchanged. Others that find a kLoading entry wait and probe again.
//   - Claim/settle (the flusher of the entry's database, partition lock SHARED): a claim sets
//     in_flush with an atomic exchange (two flushers overlap during a hand-over), reads the
//     delta value - flushed and takes stamp_dirty, then reads the stamp; after the flush's
//     transaction ended, the settle checks the entry's generation and state, adds the delta to
//     flushed if it committed (gives stamp_dirty back if not), and clears in_flush.
//   - Reserve/settle (transactional commits, partition lock EXCLUSIVE; an expired key: the
//     reservation takes its value away if no other reservation holds the entry, and otherwise
//     waits for that one's settle): a reservation checks that
//     value + reserved + delta fits on the delta's side (a bounded one: that the value right after
//     its delta is within its bounds at both ends, value + reserved_down + delta and value +
//     reserved_up + delta), adds delta to that side and pins the entry; the settle (same
//     generation, resident) adds delta to value on commit, takes it off the side, unpins, and
//     sets flushed = value and raises the stamp to the commit's (a transactional value and its
//     stamp are in the tables).
//   - Pins of buffered batches (EXCLUSIVE to pin and unpin; adds to a pinned entry take the
//     SHARED lock and check the generation).
//   - Purge: under each partition's EXCLUSIVE lock, resident entries that match are unlinked and
//     freed.
//   - Expiry (the flusher, keys not written for a counter's retention): under the partition's
//     EXCLUSIVE lock, the clean entries of the keys are unlinked and freed (a dirty one keeps its
//     key alive) and the caller marks the partition held against loads before the lock goes.
//   - Sums (counter_table.hpp: sum entries): a write, a zeroing, a settle of a flush or of a
//     reservation, and an add to a pinned entry change the key entry's sum entry in its partition
//     by what they change value - flushed, under the same lock. A write finds both under the
//     SHARED lock; a key resident without its sum entry (which left while its keys were clean)
//     takes no write, as if missing: the caller's load links the sum entry (LinkSum) before it
//     loads the key. Those that change a pinned or claimed entry find its sum entry there: it
//     does not leave while one of its keys is pinned, claimed or differs from its row
//     (SumRemovable, asked by the clock sweep and the purge of clean entries). A flush claims no
//     sum entry.
//   - Dirty ring: a write that turns a clean entry dirty notes it in its database's ring
//     (core/dirty_ring.hpp), so that the next flush need not scan the whole buffer.
//
// Nothing here allocates, throws or fails: every function is noexcept.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"
#include "core/dirty_ring.hpp"
#include "core/entry_handles.hpp"

namespace sc {

template <typename Locks>
class Protocol {
 public:
  Protocol(CounterTable* table, Locks locks) noexcept : t_(*table), locks_(locks) {}

  CounterTable& table() noexcept { return t_; }
  Locks& locks() noexcept { return locks_; }

  // ---- the hot path: partition lock SHARED ----------------------------------------------------

  // Finds k's entry and, if it is resident, calls op(index, entry) under the lock.
  template <typename Op>
  Probe WithResident(const CounterKey& k, uint32_t hash, Op&& op) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Shared(p);
    uint32_t index = t_.Find(k, hash);
    Probe probe = Probe::kMissing;
    if (index != kNil) {
      Entry& e = t_.at(index);
      probe = e.state.load(std::memory_order_acquire) == kResident ? Probe::kFound : Probe::kLoading;
      if (probe == Probe::kFound) op(index, e);
    }
    locks_.ReleaseShared(p);
    return probe;
  }

  // Finds k's entry and, if it is resident and its sum entry too, calls op(index, entry, sum)
  // under the lock. A resident key without its sum entry is kMissing: the caller's load links one.
  // (WithResident's steps written out again: on every write's path, where a lambda around
  // WithResident cost callgrind 6 to 50 more instructions.)
  template <typename Op>
  Probe WithWritable(const CounterKey& k, uint32_t hash, Op&& op) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Shared(p);
    uint32_t index = t_.Find(k, hash);
    Probe probe = Probe::kMissing;
    if (index != kNil) {
      Entry& e = t_.at(index);
      probe = e.state.load(std::memory_order_acquire) == kResident ? Probe::kFound : Probe::kLoading;
      if (probe == Probe::kFound) {
        Entry* sum = SumOf(k, p);
        if (sum != nullptr)
          op(index, e, *sum);
        else
          probe = Probe::kMissing;
      }
    }
    locks_.ReleaseShared(p);
    return probe;
  }

  // Calls write(index, entry, sum) on k's resident entry under the SHARED lock and, if it wrote (it
  // returns whether it did: a bounded add may refuse), raises the entry's stamp to w.stamp. A key
  // that has expired (counter_table.hpp: ExpiredValue) is first turned into 0 under the EXCLUSIVE
  // lock, re-checked there (ZeroIfExpired), and the write is tried again: it counts from 0.
  // expired_refuses(): a write that a value of 0 would refuse, called (under the SHARED lock)
  // instead of zeroing, so that the refusal changes nothing.
  template <typename Op, typename ExpiredRefuses>
  Probe WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied, Op&& write,
                      ExpiredRefuses&& expired_refuses) noexcept {
    for (;;) {
      bool expired = false;
      Probe probe = WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
        if (CounterTable::ExpiredValue(e, w.cutoff)) {
          expired = !expired_refuses();
          return;
        }
        if (write(index, e, sum)) StampDirtied(index, e, w.stamp, dirtied);
      });
      if (!expired) return probe;
      ZeroIfExpired(k, hash, w.cutoff, dirtied);
    }
  }

  template <typename Op>
  Probe WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied,
                      Op&& write) noexcept {
    return WriteResident(k, hash, w, dirtied, write, [] { return false; });
  }

  // Under the EXCLUSIVE lock: if k's entry has expired for cutoff and holds a value, sets the
  // value to 0 (flushed stays: the next flush writes the change, so the row holds 0 too).
  void ZeroIfExpired(const CounterKey& k, uint32_t hash, int64_t cutoff,
                     Dirtied* dirtied) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Exclusive(p);
    uint32_t index = t_.Find(k, hash);
    if (index != kNil) {
      Entry& e = t_.at(index);
      // Without its sum entry, left as it is: the write that asked finds it missing.
      Entry* sum = SumOf(k, p);
      if (e.state.load(std::memory_order_acquire) == kResident && sum != nullptr &&
          CounterTable::ExpiredValue(e, cutoff)) {
        int64_t old = e.value.exchange(0, std::memory_order_seq_cst);
        AddDifferenceToSum(*sum, 0, old);
        CheckDirtied(index, e, old, 0, dirtied);
      }
    }
    locks_.Release(p);
  }

  // Adds delta to k's resident entry. *overflow: refused (nothing changed), *value holds the
  // unchanged value; otherwise *value is the new value. The hot path, for a write that carries
  // no time to a key that cannot expire (most counters: definitions/expiry.hpp).
  Probe AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta, int64_t* value,
                      bool* overflow, Dirtied* dirtied) noexcept {
    *overflow = false;
    return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
      *overflow = !CounterTable::Add(e, delta, value);
      if (*overflow) {
        *value = e.value.load(std::memory_order_acquire);
      } else {
        AddToSum(sum, delta);
        CheckDirtied(index, e, *value - delta, *value, dirtied);
      }
    });
  }

  // AddIfResident for a write w: stamped, and counting from 0 on an expired key.
  Probe AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta, int64_t* value,
                      bool* overflow, Dirtied* dirtied, Write w) noexcept {
    *overflow = false;
    return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {
      *overflow = !CounterTable::Add(e, delta, value);
      if (*overflow) {
        *value = e.value.load(std::memory_order_acquire);
      } else {
        AddToSum(sum, delta);
        CheckDirtied(index, e, *value - delta, *value, dirtied);
      }
      return !*overflow;
    });
  }

  // Adds delta to k's resident entry if the result stays within bounds. *refused: nothing
  // changed, *value is the value it was refused against; otherwise *value is the new value.
  Probe AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta, Bounds bounds,
                            int64_t* value, bool* refused, Dirtied* dirtied) noexcept {
    *refused = false;
    return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
      *refused = !CounterTable::AddWithin(e, delta, bounds, value);
      if (!*refused) {
        AddToSum(sum, delta);
        CheckDirtied(index, e, *value - delta, *value, dirtied);
      }
    });
  }

  // AddIfResidentWithin for a write w: stamped, and checked against 0 on an expired key (a
  // refusal then changes nothing; an add zeroes it first, as AddIfResident).
  Probe AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta, Bounds bounds,
                            int64_t* value, bool* refused, Dirtied* dirtied,
                            Write w) noexcept {
    *refused = false;
    return WriteResident(
        k, hash, w, dirtied,
        [&](uint32_t index, Entry& e, Entry& sum) {
          *refused = !CounterTable::AddWithin(e, delta, bounds, value);
          if (!*refused) {
            AddToSum(sum, delta);
            CheckDirtied(index, e, *value - delta, *value, dirtied);
          }
          return !*refused;
        },
        [&] {
          // Refused against 0 (an expired key's value): nothing changes, not even the value.
          *refused = !bounds.Admit(delta);
          if (*refused) *value = 0;
          return *refused;
        });
  }

  Probe ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value) noexcept {
    return WithResident(k, hash, [&](uint32_t, Entry& e) {
      *value = e.value.load(std::memory_order_acquire);
    });
  }

  // The value of k's resident entry as a reader whose cutoff is `cutoff` sees it.
  Probe ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value,
                       int64_t cutoff) noexcept {
    return WithResident(k, hash, [&](uint32_t, Entry& e) {
      *value = CounterTable::ReadValue(e, cutoff);
    });
  }

  // Replaces k's resident value with new_value; *old_value is what it was.
  Probe ExchangeIfResident(const CounterKey& k, uint32_t hash, int64_t new_value,
                           int64_t* old_value, Dirtied* dirtied, Write w = Write{}) noexcept {
    return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {
      *old_value = e.value.exchange(new_value, std::memory_order_seq_cst);
      AddDifferenceToSum(sum, new_value, *old_value);
      e.usage.store(1, std::memory_order_relaxed);
      CheckDirtied(index, e, *old_value, new_value, dirtied);
      return true;
    });
  }

  // ---- take: a free entry or an evicted clean one --------------------------------------------

  // A free entry (kOwned), or a clean one the clock sweep evicted, looking at up to sweep_limit
  // entries; kNil if none. The entry is for database db: the sweep evicts only entries of db and
  // of databases over their fair share (CounterTable::OverShare), whose read is a snapshot, so
  // that no database's flood takes another's share of the buffer. yield: db is over its share
  // and another database wants room, so db takes a free entry or none, leaving its clean entries
  // to the others. may_evict(entry) is asked last, under the victim's exclusive lock. *evicted
  // counts the evictions.
  template <typename MayEvict>
  uint32_t TakeFreeOrClean(uint32_t db, bool yield, uint32_t sweep_limit, MayEvict&& may_evict,
                           uint64_t* evicted) noexcept {
    uint32_t index = t_.Allocate();
    if (index != kNil || yield) return index;
    uint32_t crowding[kOccupancyCells];
    int ncrowding = t_.OverShare(db, crowding, int(kOccupancyCells));
    // An entry of db itself gets the clock's second chance; one of a database over its share does
    // not (its flood keeps touching its entries); others are not db's to take.
    auto crowds = [&](const Entry& e) {
      for (int c = 0; c < ncrowding; c++)
        if (crowding[c] == e.id.db) return true;
      return false;
    };
    uint32_t limit = sweep_limit < t_.capacity() ? sweep_limit : t_.capacity();
    for (uint32_t n = 0; n < limit; n++) {
      uint32_t i = t_.ClockNext();
      Entry& e = t_.at(i);
      if (e.state.load(std::memory_order_relaxed) != kResident) continue;
      uint32_t p = CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire));
      if (!locks_.TryExclusive(p)) continue;
      bool evict = false;
      // The id is read only once the entry is known resident in p, under p's lock: an entry that
      // is not is being filled by its owner.
      if (CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire)) == p &&
          e.state.load(std::memory_order_acquire) == kResident) {
        bool own = e.id.db == db;
        evict = (own || crowds(e)) && CounterTable::AgeAndTestEvictable(e, own) &&
                may_evict(static_cast<const Entry&>(e)) && (!IsSum(e.id) || SumRemovable(p, e));
      }
      if (evict) t_.Unlink(i);
      locks_.Release(p);
      if (evict) {
        // Recycle the slot through the free list so its generation moves on.
        t_.Release(i);
        (*evicted)++;
        index = t_.Allocate();
        if (index != kNil) return index;
      }
    }
    return kNil;
  }

  // ---- load -----------------------------------------------------------------------------------

  // Links the taken entry `index` for k as kLoading, unless k is linked already (kRetry) or
  // refuse() says kRetry or kStale; a refused entry goes back to the free list.
  template <typename Refuse>
  LoadStart BeginLoad(uint32_t index, const CounterKey& k, uint32_t hash, Refuse&& refuse,
                      Loading* loading) noexcept {
    Entry& e = t_.at(index);
    e.id = k;
    e.hash.store(hash, std::memory_order_release);
    e.value.store(0, std::memory_order_relaxed);
    e.flushed.store(0, std::memory_order_relaxed);
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Exclusive(p);
    LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : refuse();
    if (start != LoadStart::kLinked) {
      locks_.Release(p);
      t_.Release(index);
      return start;
    }
    e.state.store(kLoading, std::memory_order_release);
    t_.Link(index);
    *loading = Loading{index, e.generation.load(std::memory_order_relaxed), hash};
    locks_.Release(p);
    return LoadStart::kLinked;
  }

  // Makes the loading entry resident with the stored value; false (the entry removed) if stale()
  // says the catalog changed meanwhile.
  template <typename Stale>
  bool FinishLoad(const Loading& loading, int64_t stored, Stale&& stale,
                  int64_t stored_stamp = kNoWrite) noexcept {
    Entry& e = t_.at(loading.index);
    uint32_t p = CounterTable::PartitionOf(loading.hash);
    locks_.Exclusive(p);
    bool gone = stale();
    if (gone) {
      t_.Unlink(loading.index);
    } else {
      e.value.store(stored, std::memory_order_relaxed);
      e.flushed.store(stored, std::memory_order_relaxed);
      e.last_write.store(stored_stamp, std::memory_order_relaxed);
      e.stamp_dirty.store(0, std::memory_order_relaxed);
      e.state.store(kResident, std::memory_order_release);
    }
    locks_.Release(p);
    if (gone) t_.Release(loading.index);
    return !gone;
  }

  // Removes an entry this process linked as kLoading and did not finish loading.
  void AbandonLoad(const Loading& loading) noexcept {
    Entry& e = t_.at(loading.index);
    uint32_t p = CounterTable::PartitionOf(loading.hash);
    locks_.Exclusive(p);
    bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&
                e.state.load(std::memory_order_relaxed) == kLoading;
    if (ours) t_.Unlink(loading.index);
    locks_.Release(p);
    if (ours) t_.Release(loading.index);
  }

  // ---- claim and settle: the flusher ----------------------------------------------------------

  // What a flush of an entry holding `value`, whose row holds `flushed`, adds to the row: the
  // difference, or, where that leaves bigint (a value set from near one end of the range to near
  // the other since the last flush), the step that brings the row to 0 (-1 from the lowest
  // bigint): the row stays in range, and the next flush writes the rest.
  static int64_t FlushDelta(int64_t value, int64_t flushed) noexcept {
    int64_t delta;
    if (!__builtin_sub_overflow(value, flushed, &delta)) return delta;
    return flushed == INT64_MIN ? INT64_MAX : -flushed;
  }

  // Under the entry's partition lock (shared): claims a resident entry of database db that
  // eligible(entry) lets this flush write.
  template <typename Eligible>
  static Take ClaimForFlush(uint32_t db, uint32_t index, uint32_t partition, Entry& e,
                            Eligible&& eligible, Claim* claim) noexcept {
    // The state first: a slot noted dirty may have been evicted and taken by a loader since, who
    // writes its id without a lock. Resident under this partition's lock, it is linked here, and
    // its id stays as it was until the lock is released.
    if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;
    if (IsSum(e.id)) return Take::kClean;  // never flushed: its keys are
    if (!eligible(static_cast<const Entry&>(e)))
      return CounterTable::Clean(e) ? Take::kClean : Take::kLeft;
    // Two flushers of one database overlap during a hand-over: claim the entry atomically (the
    // partition lock is only shared), then read its delta and take its stamp: the flag first, so
    // that a write raising the stamp after the read sets it again.
    if (e.in_flush.exchange(1, std::memory_order_acq_rel) != 0) return Take::kClean;
    int64_t delta = FlushDelta(e.value.load(std::memory_order_acquire),
                               e.flushed.load(std::memory_order_relaxed));
    bool stamped = e.stamp_dirty.exchange(0, std::memory_order_seq_cst) != 0;
    // A stamp alone is written where it protects a value: a key that holds 0 and stored nothing
    // (written, say, +1 and -1 before its first flush) reads 0 expired or not, and gets no row.
    if (delta == 0 && (!stamped || (e.value.load(std::memory_order_relaxed) == 0 &&
                                    e.flushed.load(std::memory_order_relaxed) == 0))) {
      e.in_flush.store(0, std::memory_order_release);
      return Take::kClean;
    }
    *claim = Claim{index, e.generation.load(std::memory_order_relaxed), partition, delta,
                   e.last_write.load(std::memory_order_seq_cst), stamped};
    return Take::kTaken;
  }

  // Claims every dirty entry of db in the table, a partition at a time, while room() says there
  // is room for one more: taken(claim, entry) receives each claim (under the lock); once there is
  // no room, overflowed(entry) is called for every entry left. left(index, generation) names the
  // dirty entries eligible refused.
  template <typename Eligible, typename Room, typename Taken, typename Left, typename Overflowed>
  void ClaimAll(uint32_t db, Eligible&& eligible, Room&& room, Taken&& taken, Left&& left,
                Overflowed&& overflowed) noexcept {
    for (uint32_t p = 0; p < kPartitions; p++) {
      locks_.Shared(p);
      t_.ForEachInPartition(p, [&](uint32_t index, Entry& e) {
        if (IsSum(e.id)) return;  // linked: its id is set
        if (!room()) {
          overflowed(static_cast<const Entry&>(e));
          return;
        }
        Claim claim;
        Take take = ClaimForFlush(db, index, p, e, eligible, &claim);
        if (take == Take::kTaken) taken(claim, static_cast<const Entry&>(e));
        if (take == Take::kLeft) left(index, e.generation.load(std::memory_order_relaxed));
      });
      locks_.ReleaseShared(p);
    }
  }

  // Claims the entries the refs name (taken from a ring), skipping refs whose slot was freed or
  // reused since they were noted.
  template <typename Eligible, typename Taken, typename Left>
  void ClaimNoted(uint32_t db, const DirtyRef* refs, int nrefs, Eligible&& eligible,
                  Taken&& taken, Left&& left) noexcept {
    for (int i = 0; i < nrefs; i++) {
      Entry& e = t_.at(refs[i].index);
      uint32_t p = CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire));
      locks_.Shared(p);
      bool same = e.generation.load(std::memory_order_relaxed) == refs[i].generation &&
                  CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire)) == p;
      Claim claim;
      Take take = same ? ClaimForFlush(db, refs[i].index, p, e, eligible, &claim) : Take::kClean;
      if (take == Take::kTaken) taken(claim, static_cast<const Entry&>(e));
      locks_.ReleaseShared(p);
      if (take == Take::kLeft) left(refs[i].index, refs[i].generation);
    }
  }

  // After the flush's transaction ended: a committed delta moves into flushed; either way the
  // entry is free to be flushed again or evicted. True if the entry is still dirty (the flush
  // failed, or it was counted into meanwhile): the caller notes it again.
  // stored_stamp: the stamp the flush stored for an entry whose claim took none (its writes carry
  // no time: definitions/expiry.hpp), which the entry's stamp rises to, as the row's did.
  // *stored (if given, and the entry is still the claim's): the value its row holds once a
  // committed flush settled, its new flushed.
  bool SettleClaim(const Claim& claim, bool committed, int64_t stored_stamp = kNoWrite,
                   int64_t* stored = nullptr) noexcept {
    locks_.Shared(claim.partition);
    Entry& e = t_.at(claim.index);
    bool dirty = false;
    if (e.generation.load(std::memory_order_relaxed) == claim.generation &&
        e.state.load(std::memory_order_acquire) == kResident) {
      if (committed) {
        int64_t now_flushed =
            e.flushed.fetch_add(claim.delta, std::memory_order_seq_cst) + claim.delta;
        if (stored != nullptr) *stored = now_flushed;
        // A claimed entry keeps its sum entry (SumRemovable).
        Entry* sum = SumOf(e.id, claim.partition);
        SC_ASSERT(sum != nullptr || claim.delta == 0);
        if (sum != nullptr) AddDifferenceToSum(*sum, 0, claim.delta);
      }
      if (committed && !claim.stamped && stored_stamp > e.last_write.load(std::memory_order_relaxed))
        e.last_write.store(stored_stamp, std::memory_order_seq_cst);
      if (!committed && claim.stamped) e.stamp_dirty.store(1, std::memory_order_seq_cst);
      dirty = !CounterTable::Clean(e);
      e.in_flush.store(0, std::memory_order_release);
    }
    locks_.ReleaseShared(claim.partition);
    return dirty;
  }

  // ---- reserve and settle: transactional commits ----------------------------------------------

  // Reserves delta on k's resident entry and pins it. kOverflow: the value could leave the bigint
  // range in some order of the reserved transactions' outcomes (*committed: the value);
  // kOutOfBounds: the value right after this delta could leave bounds in some order. A key that
  // has expired for w.cutoff counts from 0: with no other reservation on it, this one's delta
  // also takes the expired value away (*committed then reads 0); with one, kBusy.
  Reserve ReserveIfResident(const CounterKey& k, uint32_t hash, int64_t delta, Reservation* out,
                            int64_t* committed, Bounds bounds = Bounds{},
                            Write w = Write{}) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Exclusive(p);
    uint32_t index = t_.Find(k, hash);
    Reserve result = index == kNil ? Reserve::kMissing : Reserve::kLoading;
    if (index != kNil && t_.at(index).state.load(std::memory_order_acquire) == kResident) {
      Entry& e = t_.at(index);
      *committed = e.value.load(std::memory_order_relaxed);
      int64_t expired = 0;  // the value this commit takes away
      if (CounterTable::ExpiredValue(e, w.cutoff)) {
        if (e.pins.load(std::memory_order_relaxed) != 0) {
          locks_.Release(p);
          return Reserve::kBusy;
        }
        expired = *committed;
        *committed = 0;
      }
      // Whatever order the reserved transactions commit or abort in, the value stays between
      // committed + reserved_down and committed + reserved_up: both must fit. (An expired value
      // has no other reservation: its sides are 0.)
      std::atomic<int64_t>& side = delta >= 0 ? e.reserved_up : e.reserved_down;
      int64_t reserved = side.load(std::memory_order_relaxed);
      int64_t sum;
      int64_t change;  // what the commit adds to the value
      bool fits = !__builtin_add_overflow(reserved, delta, &sum) &&
                  !__builtin_add_overflow(*committed, sum, &sum) &&
                  !__builtin_sub_overflow(delta, expired, &change);
      result = fits ? Reserve::kReserved : Reserve::kOverflow;
      // Right after this delta the value lies between committed + reserved_down + delta and
      // committed + reserved_up + delta, whichever of the others commit first: sum is the end on
      // the delta's side, and the other end lies between committed + the other side (which
      // fits) and sum, so it cannot overflow. Both must be within bounds (always, unbounded).
      if (fits) {
        std::atomic<int64_t>& other = delta >= 0 ? e.reserved_down : e.reserved_up;
        int64_t other_end = *committed + other.load(std::memory_order_relaxed) + delta;
        if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {
          fits = false;
          result = Reserve::kOutOfBounds;
        }
      }
      if (fits) {
        side.store(reserved + delta, std::memory_order_relaxed);
        e.pins.fetch_add(1, std::memory_order_relaxed);
        *out = Reservation{index, e.generation.load(std::memory_order_relaxed), p, delta,
                           expired, w.stamp};
      }
    }
    locks_.Release(p);
    return result;
  }

  // At commit (adds the delta, tags the entry with epoch) or abort. False if the entry is gone
  // (a purge removed it meanwhile).
  bool SettleReservation(const Reservation& r, bool committed, uint32_t epoch) noexcept {
    locks_.Exclusive(r.partition);
    Entry& e = t_.at(r.index);
    bool ours = e.generation.load(std::memory_order_relaxed) == r.generation &&
                e.state.load(std::memory_order_relaxed) == kResident;
    if (ours) {
      // Concurrent committers read the epoch in any order: keep the latest.
      if (committed && epoch > e.commit_epoch.load(std::memory_order_relaxed))
        e.commit_epoch.store(epoch, std::memory_order_relaxed);
      int64_t value = e.value.load(std::memory_order_relaxed);
      // What the buffer held beyond the tables goes: the value is in them once settled. (A
      // transactional entry holds nothing beyond them, mostly.)
      int64_t flushed = e.flushed.load(std::memory_order_relaxed);
      if (value != flushed) {
        Entry* sum = SumOf(e.id, r.partition);
        SC_ASSERT(sum != nullptr);
        if (sum != nullptr) AddDifferenceToSum(*sum, flushed, value);
      }
      // The reservation made the sum fit; if it somehow did not, keep the old value rather than
      // wrap (a commit cannot fail). An expired value is taken away by the same commit.
      if (committed && !__builtin_add_overflow(value, r.delta - r.expired, &value))
        e.value.store(value, std::memory_order_release);
      // The stamp is in the tables with the delta (deltas.written_at): not stamp_dirty.
      if (committed && r.stamp > e.last_write.load(std::memory_order_relaxed))
        e.last_write.store(r.stamp, std::memory_order_release);
      std::atomic<int64_t>& side = r.delta >= 0 ? e.reserved_up : e.reserved_down;
      side.store(side.load(std::memory_order_relaxed) - r.delta, std::memory_order_relaxed);
      e.pins.fetch_sub(1, std::memory_order_relaxed);
      // A transactional value is durable in the tables: the entry stays clean.
      e.flushed.store(e.value.load(std::memory_order_relaxed), std::memory_order_release);
    }
    locks_.Release(r.partition);
    return ours;
  }

  // ---- pins: buffered batches -----------------------------------------------------------------

  // Under partition p's exclusive lock: pins k's entry if it is resident. kMissing: no entry;
  // kLoading: being loaded.
  // A key that has expired for cutoff is turned into 0 first (as ZeroIfExpired), so the batch's
  // adds count from 0.
  Probe PinLocked(const CounterKey& k, uint32_t hash, Pin* pin, int64_t cutoff = kNeverExpires,
                  Dirtied* dirtied = nullptr) noexcept {
    uint32_t index = t_.Find(k, hash);
    if (index == kNil) return Probe::kMissing;
    Entry& e = t_.at(index);
    if (e.state.load(std::memory_order_relaxed) != kResident) return Probe::kLoading;
    // The batch's adds change the sum entry, which stays while the key is pinned; without one,
    // kNoSum: the caller loads (which links it), or drops the key (DropCleanLocked).
    Entry* sum = SumOf(k, CounterTable::PartitionOf(hash));
    if (sum == nullptr) return Probe::kNoSum;
    if (CounterTable::ExpiredValue(e, cutoff)) {
      int64_t old = e.value.exchange(0, std::memory_order_seq_cst);
      AddDifferenceToSum(*sum, 0, old);
      Dirtied ignored;
      CheckDirtied(index, e, old, 0, dirtied != nullptr ? dirtied : &ignored);
    }
    e.pins.fetch_add(1, std::memory_order_relaxed);
    *pin = Pin{index, e.generation.load(std::memory_order_relaxed),
               CounterTable::PartitionOf(hash)};
    return Probe::kFound;
  }

  // Under partition p's exclusive lock: removes k's entry if it holds nothing the tables lack
  // and nothing holds it (resident, clean, not claimed, not pinned, no reservation, no commit
  // since its fold could be unfolded: commit_epoch 0); true if it did. For a key resident
  // without its sum entry, which a batch writes through rather than wait for room for one.
  bool DropCleanLocked(const CounterKey& k, uint32_t hash) noexcept {
    uint32_t index = t_.Find(k, hash);
    if (index == kNil) return true;
    Entry& e = t_.at(index);
    bool drop = e.state.load(std::memory_order_relaxed) == kResident && CounterTable::Clean(e) &&
                e.in_flush.load(std::memory_order_relaxed) == 0 &&
                e.pins.load(std::memory_order_relaxed) == 0 &&
                e.reserved_up.load(std::memory_order_relaxed) == 0 &&
                e.reserved_down.load(std::memory_order_relaxed) == 0 &&
                e.commit_epoch.load(std::memory_order_relaxed) == 0;
    if (drop) {
      t_.Unlink(index);
      t_.Release(index);
    }
    return drop;
  }

  // Calls fn() under partition p's exclusive lock.
  template <typename Fn>
  void Exclusively(uint32_t p, Fn&& fn) noexcept {
    locks_.Exclusive(p);
    fn();
    locks_.Release(p);
  }

  void Unpin(const Pin& pin) noexcept {
    locks_.Exclusive(pin.partition);
    Entry& e = t_.at(pin.index);
    if (e.generation.load(std::memory_order_relaxed) == pin.generation)
      e.pins.fetch_sub(1, std::memory_order_relaxed);
    locks_.Release(pin.partition);
  }

  // Adds delta to a pinned entry; false if that leaves the bigint range (nothing changed). An
  // entry purged meanwhile (a new generation) takes nothing, *value = 0.
  // Raises a pinned entry's stamp to `stamp` (as WriteResident does after its write): a batch
  // does so once all its adds are in.
  void StampPinned(const Pin& pin, int64_t stamp, Dirtied* dirtied) noexcept {
    locks_.Shared(pin.partition);
    Entry& e = t_.at(pin.index);
    if (e.generation.load(std::memory_order_relaxed) == pin.generation &&
        e.state.load(std::memory_order_relaxed) == kResident)
      StampDirtied(pin.index, e, stamp, dirtied);
    locks_.ReleaseShared(pin.partition);
  }

  // stamp: the write's time (as WriteResident).
  bool AddPinned(const Pin& pin, int64_t delta, int64_t* value, Dirtied* dirtied,
                 int64_t stamp = kNoWrite) noexcept {
    locks_.Shared(pin.partition);
    Entry& e = t_.at(pin.index);
    bool ours = e.generation.load(std::memory_order_relaxed) == pin.generation &&
                e.state.load(std::memory_order_relaxed) == kResident;
    bool ok = true;
    if (ours) {
      ok = CounterTable::Add(e, delta, value);
      if (ok) {
        Entry* sum = SumOf(e.id, pin.partition);
        SC_ASSERT(sum != nullptr);
        if (sum != nullptr) AddToSum(*sum, delta);
      }
      if (ok) CheckDirtied(pin.index, e, *value - delta, *value, dirtied);
      if (ok) StampDirtied(pin.index, e, stamp, dirtied);
    } else {
      *value = 0;
    }
    locks_.ReleaseShared(pin.partition);
    return ok;
  }

  // ---- expiry: the flusher, before it deletes the rows of keys not written lately -------------

  // Under partition p's exclusive lock: removes the entry of each of the n keys (all of partition
  // p; hashes[i] is keys[i]'s) that holds nothing the tables lack (resident, clean, not claimed by
  // a flush, not pinned, no reservation, and may_evict allows it), and sets expirable[i] to
  // whether keys[i] has no entry now (one that stays was written since its last flush, or is
  // being loaded or held). Then, still under the lock, calls hold(): the caller's mark that keeps
  // every key of p from being loaded (a loader checks it under the same lock), so that none of
  // the expirable keys is in the buffer until the caller drops the mark.
  template <typename MayEvict, typename Hold>
  void UnlinkForExpiry(uint32_t p, const CounterKey* keys, const uint32_t* hashes, int n,
                       bool* expirable, MayEvict&& may_evict, Hold&& hold) noexcept {
    locks_.Exclusive(p);
    for (int i = 0; i < n; i++) {
      uint32_t index = t_.Find(keys[i], hashes[i]);
      if (index == kNil) {
        expirable[i] = true;
        continue;
      }
      Entry& e = t_.at(index);
      bool clean = e.state.load(std::memory_order_relaxed) == kResident &&
                   CounterTable::Clean(e) &&
                   e.in_flush.load(std::memory_order_relaxed) == 0 &&
                   e.pins.load(std::memory_order_relaxed) == 0 &&
                   e.reserved_up.load(std::memory_order_relaxed) == 0 &&
                   e.reserved_down.load(std::memory_order_relaxed) == 0 &&
                   may_evict(static_cast<const Entry&>(e));
      expirable[i] = clean;
      if (clean) {
        t_.Unlink(index);
        t_.Release(index);
      }
    }
    hold();
    locks_.Release(p);
  }

  // ---- sums -----------------------------------------------------------------------------------

  // Under partition p's lock (either mode): the resident sum entry of k's (counter, bucket) in p,
  // or nullptr.
  Entry* SumOf(const CounterKey& k, uint32_t p) noexcept {
    uint32_t index = t_.Find(SumKeyOf(k, p), SumHash(k.db, k.counter, p));
    if (index == kNil) return nullptr;
    Entry& sum = t_.at(index);
    return sum.state.load(std::memory_order_acquire) == kResident ? &sum : nullptr;
  }

  // Adds change to a sum entry, wrapping around on overflow (remembered: sum_wrapped). Marks it
  // used: the sum entries of a counter being written get the clock's second chance, as its keys.
  static void AddToSum(Entry& sum, int64_t change) noexcept {
    if (sum.usage.load(std::memory_order_relaxed) == 0) sum.usage.store(1, std::memory_order_relaxed);
    if (change == 0) return;
    int64_t old = sum.value.fetch_add(change, std::memory_order_seq_cst);
    int64_t ignored;
    if (__builtin_add_overflow(old, change, &ignored))
      sum.sum_wrapped.store(1, std::memory_order_seq_cst);
  }

  // Adds a - b to a sum entry (a difference that may itself leave bigint).
  static void AddDifferenceToSum(Entry& sum, int64_t a, int64_t b) noexcept {
    int64_t change;
    if (__builtin_sub_overflow(a, b, &change)) {
      sum.sum_wrapped.store(1, std::memory_order_seq_cst);
      change = int64_t(uint64_t(a) - uint64_t(b));
    }
    AddToSum(sum, change);
  }

  // Under partition p's exclusive lock: whether sum entry `sum` may leave: it holds 0, and no key
  // entry of its (counter, bucket) in p differs from its row, is claimed by a flush or is pinned.
  // A pass over the partition's entries.
  bool SumRemovable(uint32_t p, const Entry& sum) noexcept {
    if (sum.value.load(std::memory_order_acquire) != 0) return false;
    bool removable = true;
    t_.ForEachInPartition(p, [&](uint32_t, Entry& e) {
      if (!removable || e.id.db != sum.id.db || e.id.counter != -sum.id.counter ||
          e.id.bucket != sum.id.bucket)
        return;
      if (e.value.load(std::memory_order_acquire) != e.flushed.load(std::memory_order_acquire) ||
          e.in_flush.load(std::memory_order_acquire) != 0 ||
          e.pins.load(std::memory_order_acquire) != 0)
        removable = false;
    });
    return removable;
  }

  // Whether k's sum entry in its partition is resident (under the SHARED lock).
  bool HasSum(const CounterKey& k, uint32_t hash) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    locks_.Shared(p);
    bool has = SumOf(k, p) != nullptr;
    locks_.ReleaseShared(p);
    return has;
  }

  // Links the taken entry `index` as k's sum entry, holding 0, under the EXCLUSIVE lock, unless
  // one is linked already: then the entry goes back to the free list.
  void LinkSum(uint32_t index, const CounterKey& k, uint32_t hash) noexcept {
    uint32_t p = CounterTable::PartitionOf(hash);
    Entry& sum = t_.at(index);
    sum.id = SumKeyOf(k, p);
    uint32_t sum_hash = SumHash(k.db, k.counter, p);
    sum.hash.store(sum_hash, std::memory_order_release);
    sum.value.store(0, std::memory_order_relaxed);
    sum.flushed.store(0, std::memory_order_relaxed);
    sum.sum_wrapped.store(0, std::memory_order_relaxed);
    locks_.Exclusive(p);
    bool linked = t_.Find(sum.id, sum_hash) != kNil;
    if (!linked) {
      sum.state.store(kResident, std::memory_order_release);
      t_.Link(index);
    }
    locks_.Release(p);
    if (linked) t_.Release(index);
  }

  // Calls fn(sum entry) for each resident sum entry of (db, counter) in partition p, under its
  // SHARED lock: one chain.
  template <typename Fn>
  void ForEachSum(uint32_t db, int32_t counter, uint32_t p, Fn&& fn) noexcept {
    uint32_t sum_hash = SumHash(db, counter, p);
    locks_.Shared(p);
    t_.ForEachInChain(sum_hash, [&](uint32_t, const Entry& e) {
      if (e.hash.load(std::memory_order_relaxed) == sum_hash && e.id.db == db &&
          e.id.counter == -counter && e.state.load(std::memory_order_acquire) == kResident)
        fn(e);
    });
    locks_.ReleaseShared(p);
  }

  // ---- purge and scans ------------------------------------------------------------------------

  // Removes every resident entry for which pred(entry) holds, under each partition's exclusive
  // lock in turn; returns how many.
  template <typename Pred>
  uint64_t PurgeIf(Pred&& pred) noexcept {
    uint64_t removed = 0;
    for (uint32_t p = 0; p < kPartitions; p++) {
      locks_.Exclusive(p);
      removed += t_.RemoveIf(p, [&](const Entry& e) {
        return e.state.load(std::memory_order_relaxed) == kResident && pred(e);
      });
      locks_.Release(p);
    }
    return removed;
  }

  // Removes db's entries that hold nothing the tables lack: resident, clean, not claimed by a
  // flush, not pinned, and allowed by may_evict (its deltas are folded). Returns how many of db's
  // entries stay.
  template <typename MayEvict>
  uint64_t PurgeClean(uint32_t db, MayEvict&& may_evict) noexcept {
    uint64_t kept = 0;
    for (uint32_t p = 0; p < kPartitions; p++) {
      locks_.Exclusive(p);
      t_.RemoveIf(p, [&](const Entry& e) {
        if (e.id.db != db) return false;
        bool clean = e.state.load(std::memory_order_relaxed) == kResident &&
                     CounterTable::Clean(e) &&
                     e.in_flush.load(std::memory_order_relaxed) == 0 &&
                     e.pins.load(std::memory_order_relaxed) == 0 && may_evict(e) &&
                     (!IsSum(e.id) || SumRemovable(p, e));
        if (!clean) kept++;
        return clean;
      });
      locks_.Release(p);
    }
    return kept;
  }

  // As PurgeIf, but a matching entry that a committing transaction holds (a reservation) stays,
  // emptied (value = flushed = 0): its settle adds that transaction's delta to 0.
  template <typename Pred>
  uint64_t PurgeIfUnreserved(Pred&& pred) noexcept {
    auto reserved = [](const Entry& e) {
      return e.reserved_up.load(std::memory_order_relaxed) != 0 ||
             e.reserved_down.load(std::memory_order_relaxed) != 0;
    };
    uint64_t removed = 0;
    for (uint32_t p = 0; p < kPartitions; p++) {
      locks_.Exclusive(p);
      t_.ForEachInPartition(p, [&](uint32_t, Entry& e) {
        if (e.state.load(std::memory_order_relaxed) == kResident && pred(static_cast<const Entry&>(e)) &&
            reserved(e)) {
          e.value.store(0, std::memory_order_relaxed);
          e.flushed.store(0, std::memory_order_relaxed);
        }
      });
      removed += t_.RemoveIf(p, [&](const Entry& e) {
        return e.state.load(std::memory_order_relaxed) == kResident && pred(e) && !reserved(e);
      });
      locks_.Release(p);
    }
    return removed;
  }

  // Raises the stamp of every resident entry for which pred(entry) holds to `stamp`, under each
  // partition's SHARED lock in turn (a stamp only rises, with an atomic compare-and-swap).
  template <typename Pred>
  void RaiseStamps(Pred&& pred, int64_t stamp) noexcept {
    for (uint32_t p = 0; p < kPartitions; p++) {
      locks_.Shared(p);
      t_.ForEachInPartition(p, [&](uint32_t, Entry& e) {
        if (e.state.load(std::memory_order_acquire) == kResident &&
            pred(static_cast<const Entry&>(e)))
          (void)CounterTable::RaiseStamp(e, stamp);
      });
      locks_.ReleaseShared(p);
    }
  }

  // Calls fn(index, entry) for every resident entry of partition p, under its shared lock.
  template <typename Fn>
  void ForEachResident(uint32_t p, Fn&& fn) noexcept {
    locks_.Shared(p);
    t_.ForEachInPartition(p, [&](uint32_t index, Entry& e) {
      if (e.state.load(std::memory_order_acquire) == kResident)
        fn(index, static_cast<const Entry&>(e));
    });
    locks_.ReleaseShared(p);
  }

 private:
  CounterTable& t_;
  Locks locks_;
};

}  // namespace sc
