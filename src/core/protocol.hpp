// protocol.hpp: the lock protocol of the counter table, every step of it, in one place: the
// rules below and the declaration of every step (class Protocol); each kind of step is defined in
// a file of its own, which this file includes at its end: protocol_hits.hpp (the hot path),
// protocol_loads.hpp (take and load), protocol_flush.hpp (claim, settle, expiry),
// protocol_holds.hpp (reservations and pins), protocol_sums.hpp (sum entries) and
// protocol_purges.hpp (purges and scans).
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
#include "core/gcra.hpp"

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
  Probe WithResident(const CounterKey& k, uint32_t hash, Op&& op) noexcept;

  // Finds k's entry and, if it is resident and its sum entry too, calls op(index, entry, sum)
  // under the lock. A resident key without its sum entry is kMissing: the caller's load links one.
  // (WithResident's steps written out again: on every write's path, where a lambda around
  // WithResident cost callgrind 6 to 50 more instructions.)
  template <typename Op>
  Probe WithWritable(const CounterKey& k, uint32_t hash, Op&& op) noexcept;

  // Calls write(index, entry, sum) on k's resident entry under the SHARED lock and, if it wrote (it
  // returns whether it did: a bounded add may refuse), raises the entry's stamp to w.stamp. A key
  // that has expired (counter_table.hpp: ExpiredValue) is first turned into 0 under the EXCLUSIVE
  // lock, re-checked there (ZeroIfExpired), and the write is tried again: it counts from 0.
  // expired_refuses(): a write that a value of 0 would refuse, called (under the SHARED lock)
  // instead of zeroing, so that the refusal changes nothing.
  template <typename Op, typename ExpiredRefuses>
  Probe WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied, Op&& write,
                      ExpiredRefuses&& expired_refuses) noexcept;

  template <typename Op>
  Probe WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied,
                      Op&& write) noexcept;

  // Under the EXCLUSIVE lock: if k's entry has expired for cutoff and holds a value, sets the
  // value to 0 (flushed stays: the next flush writes the change, so the row holds 0 too), and
  // calls emptied(index) (a distinct counter's key: its sketch is emptied with it).
  void ZeroIfExpired(const CounterKey& k, uint32_t hash, int64_t cutoff, Dirtied* dirtied) noexcept;
  template <typename Emptied>
  void ZeroIfExpired(const CounterKey& k, uint32_t hash, int64_t cutoff, Dirtied* dirtied,
                     Emptied&& emptied) noexcept;

  // Adds delta to k's resident entry. *overflow: refused (nothing changed), *value holds the
  // unchanged value; otherwise *value is the new value. The hot path, for a write that carries
  // no time to a key that cannot expire (most counters: definitions/expiry.hpp).
  Probe AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta, int64_t* value,
                      bool* overflow, Dirtied* dirtied) noexcept;

  // AddIfResident for a write w: stamped, and counting from 0 on an expired key.
  Probe AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta, int64_t* value,
                      bool* overflow, Dirtied* dirtied, Write w) noexcept;

  // Adds delta to k's resident entry if the result stays within bounds. *refused: nothing
  // changed, *value is the value it was refused against; otherwise *value is the new value.
  Probe AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta, Bounds bounds,
                            int64_t* value, bool* refused, Dirtied* dirtied) noexcept;

  // AddIfResidentWithin for a write w: stamped, and checked against 0 on an expired key (a
  // refusal then changes nothing; an add zeroes it first, as AddIfResident).
  Probe AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta, Bounds bounds,
                            int64_t* value, bool* refused, Dirtied* dirtied, Write w) noexcept;

  // A rate limiter's call of `cost` on k's resident entry, whose value is the key's TAT, at
  // w.stamp (core/gcra.hpp; CounterTable::Throttle: one compare-and-swap). An expired key is full
  // (zeroed first, as AddIfResident does). *answer is the call's; only an admitted cost writes
  // (and stamps) the entry.
  Probe ThrottleIfResident(const CounterKey& k, uint32_t hash, int64_t cost,
                           const GcraLimit& limit, Write w, GcraAnswer* answer,
                           Dirtied* dirtied) noexcept;

  // Gives a rolled-back limiter call's cost back to k's resident entry (core/gcra.hpp:
  // GcraGiveBack, never below w.stamp, the moment of the give-back). An expired key is full: it
  // is left as it is.
  Probe GiveBackIfResident(const CounterKey& k, uint32_t hash, int64_t cost,
                           const GcraLimit& limit, Write w, Dirtied* dirtied) noexcept;

  // A distinct counter's add (core/sketch_pool.hpp): add(index) adds the element to the sketch
  // of k's resident entry and says whether the sketch changed; a change counts 1 into the entry's
  // value (and its sum entry), so that the entry is dirty until a flush wrote the sketch.
  template <typename SketchAddOp>
  Probe SketchAddIfResident(const CounterKey& k, uint32_t hash, bool* changed, Dirtied* dirtied,
                            SketchAddOp&& add) noexcept;
  // The same for a counter whose keys expire: every add stamps the entry with w.stamp, changed or
  // not (the key was used); a key that has expired for w.cutoff and holds a value is first
  // emptied under the EXCLUSIVE lock, its sketch by empty(index) (ZeroIfExpired), so that the
  // add counts from an empty set.
  template <typename SketchAddOp, typename SketchEmptyOp>
  Probe SketchAddIfResident(const CounterKey& k, uint32_t hash, Write w, bool* changed,
                            Dirtied* dirtied, SketchAddOp&& add, SketchEmptyOp&& empty) noexcept;

  Probe ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value) noexcept;

  // The value of k's resident entry as a reader whose cutoff is `cutoff` sees it.
  Probe ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value, int64_t cutoff) noexcept;

  // Replaces k's resident value with new_value; *old_value is what it was.
  Probe ExchangeIfResident(const CounterKey& k, uint32_t hash, int64_t new_value,
                           int64_t* old_value, Dirtied* dirtied, Write w = Write{}) noexcept;
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
                           uint64_t* evicted) noexcept;
  // Evicts entry (index, generation) to the free list if it is still that entry, resident,
  // clean, claimed by no flush, unpinned and unused since the last sweep (the clock's second
  // chance: a used one is marked unused), and may_evict agrees: a loader that needs the sketch
  // block it holds (core/sketch_pool.hpp). True if it did.
  template <typename MayEvict>
  bool EvictIfIdle(uint32_t index, uint32_t generation, MayEvict&& may_evict) noexcept;
  // ---- load -----------------------------------------------------------------------------------


  // Links the taken entry `index` for k as kLoading, unless k is linked already (kRetry) or
  // refuse() says kRetry or kStale; a refused entry goes back to the free list.
  template <typename Refuse>
  LoadStart BeginLoad(uint32_t index, const CounterKey& k, uint32_t hash, Refuse&& refuse,
                      Loading* loading) noexcept;

  // Makes the loading entry resident with the stored value (and its stamp, and where its row is:
  // Entry::row); false (the entry removed) if stale() says the catalog changed meanwhile.
  template <typename Stale>
  bool FinishLoad(const Loading& loading, int64_t stored, Stale&& stale,
                  int64_t stored_stamp = kNoWrite, uint64_t row = 0) noexcept;

  // Removes an entry this process linked as kLoading and did not finish loading.
  void AbandonLoad(const Loading& loading) noexcept;
  // ---- claim and settle: the flusher ----------------------------------------------------------


  // What a flush of an entry holding `value`, whose row holds `flushed`, adds to the row: the
  // difference, or, where that leaves bigint (a value set from near one end of the range to near
  // the other since the last flush), the step that brings the row to 0 (-1 from the lowest
  // bigint): the row stays in range, and the next flush writes the rest.
  static int64_t FlushDelta(int64_t value, int64_t flushed) noexcept;

  // Under the entry's partition lock (shared): claims a resident entry of database db that
  // eligible(entry) lets this flush write.
  template <typename Eligible>
  static Take ClaimForFlush(uint32_t db, uint32_t index, uint32_t partition, Entry& e,
                            Eligible&& eligible, Claim* claim) noexcept;

  // Claims every dirty entry of db in the table, a partition at a time, while room() says there
  // is room for one more: taken(claim, entry) receives each claim (under the lock); once there is
  // no room, overflowed(entry) is called for every entry left. left(index, generation) names the
  // dirty entries eligible refused.
  template <typename Eligible, typename Room, typename Taken, typename Left, typename Overflowed>
  void ClaimAll(uint32_t db, Eligible&& eligible, Room&& room, Taken&& taken, Left&& left,
                Overflowed&& overflowed) noexcept;

  // Claims the entries the refs name (taken from a ring), skipping refs whose slot was freed or
  // reused since they were noted.
  template <typename Eligible, typename Taken, typename Left>
  void ClaimNoted(uint32_t db, const DirtyRef* refs, int nrefs, Eligible&& eligible, Taken&& taken,
                  Left&& left) noexcept;

  // After the flush's transaction ended: a committed delta moves into flushed; either way the
  // entry is free to be flushed again or evicted. True if the entry is still dirty (the flush
  // failed, or it was counted into meanwhile): the caller notes it again.
  // stored_stamp: the stamp the flush stored for an entry whose claim took none (its writes carry
  // no time: definitions/expiry.hpp), which the entry's stamp rises to, as the row's did.
  // *stored (if given, and the entry is still the claim's): the value its row holds once a
  // committed flush settled, its new flushed.
  bool SettleClaim(const Claim& claim, bool committed, int64_t stored_stamp = kNoWrite,
                   int64_t* stored = nullptr) noexcept;
  // ---- reserve and settle: transactional commits ----------------------------------------------


  // Reserves delta on k's resident entry and pins it. kOverflow: the value could leave the bigint
  // range in some order of the reserved transactions' outcomes (*committed: the value);
  // kOutOfBounds: the value right after this delta could leave bounds in some order. A key that
  // has expired for w.cutoff counts from 0: with no other reservation on it, this one's delta
  // also takes the expired value away (*committed then reads 0); with one, kBusy.
  Reserve ReserveIfResident(const CounterKey& k, uint32_t hash, int64_t delta, Reservation* out,
                            int64_t* committed, Bounds bounds = Bounds{},
                            Write w = Write{}) noexcept;
  // The same, under k's partition lock EXCLUSIVE, which the caller holds.
  Reserve ReserveLocked(const CounterKey& k, uint32_t hash, int64_t delta, Reservation* out,
                        int64_t* committed, Bounds bounds, Write w) noexcept;

  // At commit (adds the delta, tags the entry with epoch) or abort. False if the entry is gone
  // (a purge removed it meanwhile).
  bool SettleReservation(const Reservation& r, bool committed, uint32_t epoch) noexcept;
  // ---- pins: buffered batches -----------------------------------------------------------------


  // Under partition p's exclusive lock: pins k's entry if it is resident. kMissing: no entry;
  // kLoading: being loaded.
  // A key that has expired for cutoff is turned into 0 first (as ZeroIfExpired), so the batch's
  // adds count from 0.
  Probe PinLocked(const CounterKey& k, uint32_t hash, Pin* pin, int64_t cutoff = kNeverExpires,
                  Dirtied* dirtied = nullptr) noexcept;

  // Under partition p's exclusive lock: removes k's entry if it holds nothing the tables lack
  // and nothing holds it (resident, clean, not claimed, not pinned, no reservation, no commit
  // since its fold could be unfolded: commit_epoch 0); true if it did. For a key resident
  // without its sum entry, which a batch writes through rather than wait for room for one. *row
  // (if given): the removed entry's hint of where its row is (Entry::row), else 0.
  bool DropCleanLocked(const CounterKey& k, uint32_t hash, uint64_t* row = nullptr) noexcept;

  // Calls fn() under partition p's exclusive lock.
  template <typename Fn>
  void Exclusively(uint32_t p, Fn&& fn) noexcept;

  void Unpin(const Pin& pin) noexcept;

  // Adds delta to a pinned entry; false if that leaves the bigint range (nothing changed). An
  // entry purged meanwhile (a new generation) takes nothing, *value = 0.
  // Raises a pinned entry's stamp to `stamp` (as WriteResident does after its write): a batch
  // does so once all its adds are in.
  void StampPinned(const Pin& pin, int64_t stamp, Dirtied* dirtied) noexcept;

  // stamp: the write's time (as WriteResident).
  bool AddPinned(const Pin& pin, int64_t delta, int64_t* value, Dirtied* dirtied,
                 int64_t stamp = kNoWrite) noexcept;
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
                       bool* expirable, MayEvict&& may_evict, Hold&& hold) noexcept;
  // ---- sums -----------------------------------------------------------------------------------


  // Under partition p's lock (either mode): the resident sum entry of k's (counter, bucket) in p,
  // or nullptr.
  Entry* SumOf(const CounterKey& k, uint32_t p) noexcept;

  // Adds change to a sum entry, wrapping around on overflow (remembered: sum_wrapped). Marks it
  // used: the sum entries of a counter being written get the clock's second chance, as its keys.
  static void AddToSum(Entry& sum, int64_t change) noexcept;

  // Adds a - b to a sum entry (a difference that may itself leave bigint).
  static void AddDifferenceToSum(Entry& sum, int64_t a, int64_t b) noexcept;

  // Under partition p's exclusive lock: whether sum entry `sum` may leave: it holds 0, and no key
  // entry of its (counter, bucket) in p differs from its row, is claimed by a flush or is pinned.
  // A pass over the partition's entries.
  bool SumRemovable(uint32_t p, const Entry& sum) noexcept;

  // Whether k's sum entry in its partition is resident (under the SHARED lock).
  bool HasSum(const CounterKey& k, uint32_t hash) noexcept;

  // Links the taken entry `index` as k's sum entry, holding 0, under the EXCLUSIVE lock, unless
  // one is linked already: then the entry goes back to the free list.
  void LinkSum(uint32_t index, const CounterKey& k, uint32_t hash) noexcept;

  // Calls fn(sum entry) for each resident sum entry of (db, counter) in partition p, under its
  // SHARED lock: one chain.
  template <typename Fn>
  void ForEachSum(uint32_t db, int32_t counter, uint32_t p, Fn&& fn) noexcept;
  // ---- purge and scans ------------------------------------------------------------------------


  // Removes every resident entry for which pred(entry) holds, under each partition's exclusive
  // lock in turn; returns how many.
  template <typename Pred>
  uint64_t PurgeIf(Pred&& pred) noexcept;

  // Removes db's entries that hold nothing the tables lack: resident, clean, not claimed by a
  // flush, not pinned, and allowed by may_evict (its deltas are folded). Returns how many of db's
  // entries stay.
  template <typename MayEvict>
  uint64_t PurgeClean(uint32_t db, MayEvict&& may_evict) noexcept;

  // As PurgeIf, but a matching entry that a committing transaction holds (a reservation) stays,
  // emptied (value = flushed = 0): its settle adds that transaction's delta to 0.
  template <typename Pred>
  uint64_t PurgeIfUnreserved(Pred&& pred) noexcept;

  // Raises the stamp of every resident entry for which pred(entry) holds to `stamp`, under each
  // partition's SHARED lock in turn (a stamp only rises, with an atomic compare-and-swap).
  template <typename Pred>
  void RaiseStamps(Pred&& pred, int64_t stamp) noexcept;

  // Calls fn(index, entry) for every resident entry of partition p, under its shared lock.
  template <typename Fn>
  void ForEachResident(uint32_t p, Fn&& fn) noexcept;
 private:
  CounterTable& t_;
  Locks locks_;
};

}  // namespace sc

// The definitions of the steps, by kind.
#define SC_PROTOCOL_DECLARED
#include "core/protocol_hits.hpp"
#include "core/protocol_loads.hpp"
#include "core/protocol_flush.hpp"
#include "core/protocol_holds.hpp"
#include "core/protocol_sums.hpp"
#include "core/protocol_purges.hpp"
#undef SC_PROTOCOL_DECLARED
