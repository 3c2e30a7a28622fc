// protocol_loads.hpp: a miss: taking a free entry or evicting a clean one (the clock sweep), and
// loading the key into it.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- take: a free entry or an evicted clean one -------------------------------------------------

template <typename Locks>
template <typename MayEvict>
uint32_t Protocol<Locks>::TakeFreeOrClean(uint32_t db, bool yield, uint32_t sweep_limit,
                                          MayEvict&& may_evict, uint64_t* evicted) noexcept {
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

template <typename Locks>
template <typename MayEvict>
bool Protocol<Locks>::EvictIfIdle(uint32_t index, uint32_t generation,
                                  MayEvict&& may_evict) noexcept {
  Entry& e = t_.at(index);
  if (e.state.load(std::memory_order_relaxed) != kResident) return false;
  uint32_t p = CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire));
  if (!locks_.TryExclusive(p)) return false;
  bool evict = CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire)) == p &&
               e.state.load(std::memory_order_acquire) == kResident &&
               e.generation.load(std::memory_order_acquire) == generation && !IsSum(e.id) &&
               CounterTable::AgeAndTestEvictable(e) &&
               may_evict(static_cast<const Entry&>(e));
  if (evict) t_.Unlink(index);
  locks_.Release(p);
  // Through the free list, so that its generation moves on and its block is free.
  if (evict) t_.Release(index);
  return evict;
}

// ---- load ---------------------------------------------------------------------------------------

template <typename Locks>
template <typename Refuse>
LoadStart Protocol<Locks>::BeginLoad(uint32_t index, const CounterKey& k, uint32_t hash,
                                     Refuse&& refuse, Loading* loading) noexcept {
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

template <typename Locks>
template <typename Stale>
bool Protocol<Locks>::FinishLoad(const Loading& loading, int64_t stored, Stale&& stale,
                                 int64_t stored_stamp, uint64_t row) noexcept {
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
    e.row.store(row, std::memory_order_relaxed);
    e.state.store(kResident, std::memory_order_release);
  }
  locks_.Release(p);
  if (gone) t_.Release(loading.index);
  return !gone;
}

template <typename Locks>
void Protocol<Locks>::AbandonLoad(const Loading& loading) noexcept {
  Entry& e = t_.at(loading.index);
  uint32_t p = CounterTable::PartitionOf(loading.hash);
  locks_.Exclusive(p);
  bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&
              e.state.load(std::memory_order_relaxed) == kLoading;
  if (ours) t_.Unlink(loading.index);
  locks_.Release(p);
  if (ours) t_.Release(loading.index);
}

}  // namespace sc
