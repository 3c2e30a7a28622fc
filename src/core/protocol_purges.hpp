// protocol_purges.hpp: purges of the entries that match, and scans over the resident entries.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- purge and scans ----------------------------------------------------------------------------

template <typename Locks>
template <typename Pred>
uint64_t Protocol<Locks>::PurgeIf(Pred&& pred) noexcept {
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

template <typename Locks>
template <typename MayEvict>
uint64_t Protocol<Locks>::PurgeClean(uint32_t db, MayEvict&& may_evict) noexcept {
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

template <typename Locks>
template <typename Pred>
uint64_t Protocol<Locks>::PurgeIfUnreserved(Pred&& pred) noexcept {
  auto reserved = [](const Entry& e) {
    return e.reserved_up.load(std::memory_order_relaxed) != 0 ||
           e.reserved_down.load(std::memory_order_relaxed) != 0;
  };
  uint64_t removed = 0;
  for (uint32_t p = 0; p < kPartitions; p++) {
    locks_.Exclusive(p);
    t_.ForEachInPartition(p, [&](uint32_t, Entry& e) {
      if (e.state.load(std::memory_order_relaxed) == kResident &&
          pred(static_cast<const Entry&>(e)) && reserved(e)) {
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

template <typename Locks>
template <typename Pred>
void Protocol<Locks>::RaiseStamps(Pred&& pred, int64_t stamp) noexcept {
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

template <typename Locks>
template <typename Fn>
void Protocol<Locks>::ForEachResident(uint32_t p, Fn&& fn) noexcept {
  locks_.Shared(p);
  t_.ForEachInPartition(p, [&](uint32_t index, Entry& e) {
    if (e.state.load(std::memory_order_acquire) == kResident)
      fn(index, static_cast<const Entry&>(e));
  });
  locks_.ReleaseShared(p);
}

}  // namespace sc
