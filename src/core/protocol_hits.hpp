// protocol_hits.hpp: the hot path: finding a resident key and writing or reading it under its
// partition lock SHARED, and zeroing an expired one under the EXCLUSIVE lock.
// Defined here, declared with their rules in protocol.hpp, which alone includes this file.
#ifndef SC_PROTOCOL_DECLARED
#error "include core/protocol.hpp, which declares what this file defines"
#endif
namespace sc {

// ---- the hot path: partition lock SHARED --------------------------------------------------------

template <typename Locks>
template <typename Op>
Probe Protocol<Locks>::WithResident(const CounterKey& k, uint32_t hash, Op&& op) noexcept {
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

template <typename Locks>
template <typename Op>
Probe Protocol<Locks>::WithWritable(const CounterKey& k, uint32_t hash, Op&& op) noexcept {
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

template <typename Locks>
template <typename Op, typename ExpiredRefuses>
Probe Protocol<Locks>::WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied,
                                     Op&& write, ExpiredRefuses&& expired_refuses) noexcept {
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

template <typename Locks>
template <typename Op>
Probe Protocol<Locks>::WriteResident(const CounterKey& k, uint32_t hash, Write w, Dirtied* dirtied,
                                     Op&& write) noexcept {
  return WriteResident(k, hash, w, dirtied, write, [] { return false; });
}

template <typename Locks>
void Protocol<Locks>::ZeroIfExpired(const CounterKey& k, uint32_t hash, int64_t cutoff,
                                    Dirtied* dirtied) noexcept {
  ZeroIfExpired(k, hash, cutoff, dirtied, [](uint32_t) {});
}

template <typename Locks>
template <typename Emptied>
void Protocol<Locks>::ZeroIfExpired(const CounterKey& k, uint32_t hash, int64_t cutoff,
                                    Dirtied* dirtied, Emptied&& emptied) noexcept {
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
      emptied(index);
    }
  }
  locks_.Release(p);
}

template <typename Locks>
Probe Protocol<Locks>::AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta,
                                     int64_t* value, bool* overflow, Dirtied* dirtied) noexcept {
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

template <typename Locks>
Probe Protocol<Locks>::AddIfResident(const CounterKey& k, uint32_t hash, int64_t delta,
                                     int64_t* value, bool* overflow, Dirtied* dirtied,
                                     Write w) noexcept {
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

template <typename Locks>
Probe Protocol<Locks>::AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta,
                                           Bounds bounds, int64_t* value, bool* refused,
                                           Dirtied* dirtied) noexcept {
  *refused = false;
  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
    *refused = !CounterTable::AddWithin(e, delta, bounds, value);
    if (!*refused) {
      AddToSum(sum, delta);
      CheckDirtied(index, e, *value - delta, *value, dirtied);
    }
  });
}

template <typename Locks>
Probe Protocol<Locks>::AddIfResidentWithin(const CounterKey& k, uint32_t hash, int64_t delta,
                                           Bounds bounds, int64_t* value, bool* refused,
                                           Dirtied* dirtied, Write w) noexcept {
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

template <typename Locks>
Probe Protocol<Locks>::ThrottleIfResident(const CounterKey& k, uint32_t hash, int64_t cost,
                                          const GcraLimit& limit, Write w, GcraAnswer* answer,
                                          Dirtied* dirtied) noexcept {
  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {
    int64_t old;
    *answer = CounterTable::Throttle(e, w.stamp, cost, limit, &old);
    if (answer->tat == old) return false;
    AddDifferenceToSum(sum, answer->tat, old);
    CheckDirtied(index, e, old, answer->tat, dirtied);
    return true;
  });
}

template <typename Locks>
Probe Protocol<Locks>::GiveBackIfResident(const CounterKey& k, uint32_t hash, int64_t cost,
                                          const GcraLimit& limit, Write w,
                                          Dirtied* dirtied) noexcept {
  return WriteResident(
      k, hash, w, dirtied,
      [&](uint32_t index, Entry& e, Entry& sum) {
        int64_t old;
        int64_t tat = CounterTable::GiveBack(e, cost, limit, w.stamp, &old);
        if (tat == old) return false;
        AddDifferenceToSum(sum, tat, old);
        CheckDirtied(index, e, old, tat, dirtied);
        return true;
      },
      [] { return true; });
}

template <typename Locks>
template <typename SketchAddOp>
Probe Protocol<Locks>::SketchAddIfResident(const CounterKey& k, uint32_t hash, bool* changed,
                                           Dirtied* dirtied, SketchAddOp&& add) noexcept {
  *changed = false;
  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
    *changed = add(index);
    int64_t value;
    if (!*changed || !CounterTable::Add(e, 1, &value)) return;
    AddToSum(sum, 1);
    CheckDirtied(index, e, value - 1, value, dirtied);
  });
}

template <typename Locks>
template <typename SketchAddOp, typename SketchEmptyOp>
Probe Protocol<Locks>::SketchAddIfResident(const CounterKey& k, uint32_t hash, Write w,
                                           bool* changed, Dirtied* dirtied, SketchAddOp&& add,
                                           SketchEmptyOp&& empty) noexcept {
  for (;;) {
    bool expired = false;
    *changed = false;
    Probe probe = WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {
      if (CounterTable::ExpiredValue(e, w.cutoff)) {
        expired = true;
        return;
      }
      *changed = add(index);
      int64_t value;
      if (*changed && CounterTable::Add(e, 1, &value)) {
        AddToSum(sum, 1);
        CheckDirtied(index, e, value - 1, value, dirtied);
      }
      StampDirtied(index, e, w.stamp, dirtied);
    });
    if (!expired) return probe;
    ZeroIfExpired(k, hash, w.cutoff, dirtied, empty);
  }
}

template <typename Locks>
Probe Protocol<Locks>::ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value) noexcept {
  return WithResident(k, hash, [&](uint32_t, Entry& e) {
    *value = e.value.load(std::memory_order_acquire);
  });
}

template <typename Locks>
Probe Protocol<Locks>::ReadIfResident(const CounterKey& k, uint32_t hash, int64_t* value,
                                      int64_t cutoff) noexcept {
  return WithResident(k, hash, [&](uint32_t, Entry& e) {
    *value = CounterTable::ReadValue(e, cutoff);
  });
}

template <typename Locks>
Probe Protocol<Locks>::ExchangeIfResident(const CounterKey& k, uint32_t hash, int64_t new_value,
                                          int64_t* old_value, Dirtied* dirtied, Write w) noexcept {
  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {
    *old_value = e.value.exchange(new_value, std::memory_order_seq_cst);
    AddDifferenceToSum(sum, new_value, *old_value);
    e.usage.store(1, std::memory_order_relaxed);
    CheckDirtied(index, e, *old_value, new_value, dirtied);
    return true;
  });
}

}  // namespace sc
