// protocol_sums.hpp: the sum entries: finding, linking and changing a key's sum entry, and when one
// may leave.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- sums ---------------------------------------------------------------------------------------

template <typename Locks>
Entry* Protocol<Locks>::SumOf(const CounterKey& k, uint32_t p) noexcept {
  uint32_t index = t_.Find(SumKeyOf(k, p), SumHash(k.db, k.counter, p));
  if (index == kNil) return nullptr;
  Entry& sum = t_.at(index);
  return sum.state.load(std::memory_order_acquire) == kResident ? &sum : nullptr;
}

template <typename Locks>
void Protocol<Locks>::AddToSum(Entry& sum, int64_t change) noexcept {
  if (sum.usage.load(std::memory_order_relaxed) == 0) sum.usage.store(1, std::memory_order_relaxed);
  if (change == 0) return;
  int64_t old = sum.value.fetch_add(change, std::memory_order_seq_cst);
  int64_t ignored;
  if (__builtin_add_overflow(old, change, &ignored))
    sum.sum_wrapped.store(1, std::memory_order_seq_cst);
}

template <typename Locks>
void Protocol<Locks>::AddDifferenceToSum(Entry& sum, int64_t a, int64_t b) noexcept {
  int64_t change;
  if (__builtin_sub_overflow(a, b, &change)) {
    sum.sum_wrapped.store(1, std::memory_order_seq_cst);
    change = int64_t(uint64_t(a) - uint64_t(b));
  }
  AddToSum(sum, change);
}

template <typename Locks>
bool Protocol<Locks>::SumRemovable(uint32_t p, const Entry& sum) noexcept {
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

template <typename Locks>
bool Protocol<Locks>::HasSum(const CounterKey& k, uint32_t hash) noexcept {
  uint32_t p = CounterTable::PartitionOf(hash);
  locks_.Shared(p);
  bool has = SumOf(k, p) != nullptr;
  locks_.ReleaseShared(p);
  return has;
}

template <typename Locks>
void Protocol<Locks>::LinkSum(uint32_t index, const CounterKey& k, uint32_t hash) noexcept {
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

template <typename Locks>
template <typename Fn>
void Protocol<Locks>::ForEachSum(uint32_t db, int32_t counter, uint32_t p, Fn&& fn) noexcept {
  uint32_t sum_hash = SumHash(db, counter, p);
  locks_.Shared(p);
  t_.ForEachInChain(sum_hash, [&](uint32_t, const Entry& e) {
    if (e.hash.load(std::memory_order_relaxed) == sum_hash && e.id.db == db &&
        e.id.counter == -counter && e.state.load(std::memory_order_acquire) == kResident)
      fn(e);
  });
  locks_.ReleaseShared(p);
}

}  // namespace sc
