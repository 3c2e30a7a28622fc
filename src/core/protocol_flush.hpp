// protocol_flush.hpp: the flusher's steps: claiming dirty entries and settling them after the
// flush's transaction, and unlinking the keys whose rows the retention pass deletes.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- claim and settle: the flusher --------------------------------------------------------------

template <typename Locks>
int64_t Protocol<Locks>::FlushDelta(int64_t value, int64_t flushed) noexcept {
  int64_t delta;
  if (!__builtin_sub_overflow(value, flushed, &delta)) return delta;
  return flushed == INT64_MIN ? INT64_MAX : -flushed;
}

template <typename Locks>
template <typename Eligible>
Take Protocol<Locks>::ClaimForFlush(uint32_t db, uint32_t index, uint32_t partition, Entry& e,
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
                 e.last_write.load(std::memory_order_seq_cst), stamped,
                 e.row.load(std::memory_order_relaxed)};
  return Take::kTaken;
}

template <typename Locks>
template <typename Eligible, typename Room, typename Taken, typename Left, typename Overflowed>
void Protocol<Locks>::ClaimAll(uint32_t db, Eligible&& eligible, Room&& room, Taken&& taken,
                               Left&& left, Overflowed&& overflowed) noexcept {
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

template <typename Locks>
template <typename Eligible, typename Taken, typename Left>
void Protocol<Locks>::ClaimNoted(uint32_t db, const DirtyRef* refs, int nrefs, Eligible&& eligible,
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

template <typename Locks>
bool Protocol<Locks>::SettleClaim(const Claim& claim, bool committed, int64_t stored_stamp,
                                  int64_t* stored) noexcept {
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
      // Only a flush that holds the claim (in_flush) writes the hint.
      e.row.store(claim.row, std::memory_order_relaxed);
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

// ---- expiry: the flusher, before it deletes the rows of keys not written lately -----------------

template <typename Locks>
template <typename MayEvict, typename Hold>
void Protocol<Locks>::UnlinkForExpiry(uint32_t p, const CounterKey* keys, const uint32_t* hashes,
                                      int n, bool* expirable, MayEvict&& may_evict,
                                      Hold&& hold) noexcept {
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

}  // namespace sc
