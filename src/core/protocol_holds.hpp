// protocol_holds.hpp: the steps that hold an entry in the buffer: a transactional commit's
// reservation and its settle, and a buffered batch's pins.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- reserve and settle: transactional commits --------------------------------------------------

template <typename Locks>
Reserve Protocol<Locks>::ReserveIfResident(const CounterKey& k, uint32_t hash, int64_t delta,
                                           Reservation* out, int64_t* committed, Bounds bounds,
                                           Write w) noexcept {
  uint32_t p = CounterTable::PartitionOf(hash);
  locks_.Exclusive(p);
  Reserve result = ReserveLocked(k, hash, delta, out, committed, bounds, w);
  locks_.Release(p);
  return result;
}

template <typename Locks>
Reserve Protocol<Locks>::ReserveLocked(const CounterKey& k, uint32_t hash, int64_t delta,
                                       Reservation* out, int64_t* committed, Bounds bounds,
                                       Write w) noexcept {
  uint32_t p = CounterTable::PartitionOf(hash);
  uint32_t index = t_.Find(k, hash);
  Reserve result = index == kNil ? Reserve::kMissing : Reserve::kLoading;
  if (index != kNil && t_.at(index).state.load(std::memory_order_acquire) == kResident) {
    Entry& e = t_.at(index);
    *committed = e.value.load(std::memory_order_relaxed);
    int64_t expired = 0;  // the value this commit takes away
    if (CounterTable::ExpiredValue(e, w.cutoff)) {
      if (e.pins.load(std::memory_order_relaxed) != 0) return Reserve::kBusy;
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
  return result;
}

template <typename Locks>
bool Protocol<Locks>::SettleReservation(const Reservation& r, bool committed,
                                        uint32_t epoch) noexcept {
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

// ---- pins: buffered batches ---------------------------------------------------------------------

template <typename Locks>
Probe Protocol<Locks>::PinLocked(const CounterKey& k, uint32_t hash, Pin* pin, int64_t cutoff,
                                 Dirtied* dirtied) noexcept {
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

template <typename Locks>
bool Protocol<Locks>::DropCleanLocked(const CounterKey& k, uint32_t hash, uint64_t* row) noexcept {
  if (row != nullptr) *row = 0;
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
    if (row != nullptr) *row = e.row.load(std::memory_order_relaxed);
    t_.Unlink(index);
    t_.Release(index);
  }
  return drop;
}

template <typename Locks>
template <typename Fn>
void Protocol<Locks>::Exclusively(uint32_t p, Fn&& fn) noexcept {
  locks_.Exclusive(p);
  fn();
  locks_.Release(p);
}

template <typename Locks>
void Protocol<Locks>::Unpin(const Pin& pin) noexcept {
  locks_.Exclusive(pin.partition);
  Entry& e = t_.at(pin.index);
  if (e.generation.load(std::memory_order_relaxed) == pin.generation)
    e.pins.fetch_sub(1, std::memory_order_relaxed);
  locks_.Release(pin.partition);
}

template <typename Locks>
void Protocol<Locks>::StampPinned(const Pin& pin, int64_t stamp, Dirtied* dirtied) noexcept {
  locks_.Shared(pin.partition);
  Entry& e = t_.at(pin.index);
  if (e.generation.load(std::memory_order_relaxed) == pin.generation &&
      e.state.load(std::memory_order_relaxed) == kResident)
    StampDirtied(pin.index, e, stamp, dirtied);
  locks_.ReleaseShared(pin.partition);
}

template <typename Locks>
bool Protocol<Locks>::AddPinned(const Pin& pin, int64_t delta, int64_t* value, Dirtied* dirtied,
                                int64_t stamp) noexcept {
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

}  // namespace sc
