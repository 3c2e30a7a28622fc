// pending_table.hpp: a backend's pending deltas of transactional counters, by key
// (transactions/transactional.cpp): what a transaction added to each key, until it ends.
//
// A transaction may change millions of keys (a backfill), and each call looks its key up once;
// dynahash's buckets, segments and chains cost a cache miss each, and its scan at the commit
// follows them. Here the entries lie dense, in the order they were entered (the commit reads them
// in one pass), and an open-addressed index (linear probing, at most half full) maps a key to its
// entry: each slot holds the key's hash and the entry's position, so a probe reads an entry only
// when the hashes match.
//
// Pure C++ (no PostgreSQL header), and it never allocates: the owner gives it room (Attach, and
// MoveTo when Full) from memory of its own, and frees it. Nothing fails or throws: every member is
// noexcept. Keys are never removed one by one; Clear empties the table, keeping its room.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"

namespace sc {

struct PendingSum {
  CounterKey key;
  int64_t delta;  // over all levels
  Bounds bounds;  // of the top level, and of the subtransactions committed into it
  uint64_t row;   // where a read found the key's row of key_values (a large commit's hint), or 0
};

class PendingTable {
 public:
  // Index slots for `capacity` entries (a power of two): twice as many.
  static constexpr uint32_t SlotsFor(uint32_t capacity) noexcept { return 2 * capacity; }

  // The table in the given room, empty: `entries` for capacity entries, `slots` for
  // SlotsFor(capacity) index slots (contents ignored; zeroed here).
  void Attach(PendingSum* entries, uint64_t* slots, uint32_t capacity) noexcept {
    SC_ASSERT(capacity > 0 && (capacity & (capacity - 1)) == 0);
    entries_ = entries;
    slots_ = slots;
    capacity_ = capacity;
    size_ = 0;
    memset(slots_, 0, sizeof(uint64_t) * SlotsFor(capacity));
  }

  // The table moved into larger room (attached as by Attach), its entries in their order; the old
  // room is the caller's to free.
  void MoveTo(PendingSum* entries, uint64_t* slots, uint32_t capacity) noexcept {
    SC_ASSERT(capacity >= size_);
    uint32_t n = size_;
    if (entries != entries_) memcpy(entries, entries_, sizeof(PendingSum) * n);
    Attach(entries, slots, capacity);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t hash = HashCounterKey(entries[i].key);
      slots_[FreeSlot(entries[i].key, hash)] = Slot(hash, i);
    }
    size_ = n;
  }

  bool attached() const noexcept { return entries_ != nullptr; }
  uint32_t size() const noexcept { return size_; }
  uint32_t capacity() const noexcept { return capacity_; }
  // Whether a new key needs more room first (MoveTo).
  bool Full() const noexcept { return size_ == capacity_; }

  uint64_t* slots() const noexcept { return slots_; }
  PendingSum* begin() const noexcept { return entries_; }
  PendingSum* end() const noexcept { return entries_ + size_; }

  // k's entry, or nullptr. hash: HashCounterKey(k).
  PendingSum* Find(const CounterKey& k, uint32_t hash) const noexcept {
    if (entries_ == nullptr) return nullptr;
    uint32_t mask = SlotsFor(capacity_) - 1;
    for (uint32_t s = hash & mask;; s = (s + 1) & mask) {
      uint64_t slot = slots_[s];
      if (slot == 0) return nullptr;
      if (uint32_t(slot >> 32) == hash && entries_[Position(slot)].key == k)
        return &entries_[Position(slot)];
    }
  }

  // k's entry, entered (all zero but its key) if it had none; *found says which. nullptr, entering
  // nothing, if k has none and the table holds `limit` keys. A new key needs room (!Full()).
  PendingSum* Enter(const CounterKey& k, uint32_t hash, bool* found, uint32_t limit) noexcept {
    uint32_t mask = SlotsFor(capacity_) - 1;
    uint32_t s = hash & mask;
    for (;; s = (s + 1) & mask) {
      uint64_t slot = slots_[s];
      if (slot == 0) break;
      if (uint32_t(slot >> 32) == hash && entries_[Position(slot)].key == k) {
        *found = true;
        return &entries_[Position(slot)];
      }
    }
    *found = false;
    if (size_ >= limit) return nullptr;
    SC_ASSERT(!Full());
    PendingSum* e = &entries_[size_];
    memset(static_cast<void*>(e), 0, sizeof(PendingSum));
    e->key = k;
    e->bounds = Bounds{};
    slots_[s] = Slot(hash, size_++);
    return e;
  }

  // Empties the table, keeping its room: the slots of its entries cleared, one by one.
  void Clear() noexcept {
    for (uint32_t i = 0; i < size_; i++) {
      uint32_t hash = HashCounterKey(entries_[i].key);
      uint32_t mask = SlotsFor(capacity_) - 1;
      uint32_t s = hash & mask;
      while (Position(slots_[s]) != i) s = (s + 1) & mask;
      slots_[s] = 0;
    }
    size_ = 0;
  }

  // Forgets its room (the caller frees it).
  void Detach() noexcept {
    entries_ = nullptr;
    slots_ = nullptr;
    capacity_ = size_ = 0;
  }

 private:
  static uint64_t Slot(uint32_t hash, uint32_t position) noexcept {
    return (uint64_t(hash) << 32) | (uint64_t(position) + 1);
  }
  static uint32_t Position(uint64_t slot) noexcept { return uint32_t(slot) - 1; }

  // The first empty slot on k's probe sequence (k is not in the table).
  uint32_t FreeSlot(const CounterKey&, uint32_t hash) const noexcept {
    uint32_t mask = SlotsFor(capacity_) - 1;
    uint32_t s = hash & mask;
    while (slots_[s] != 0) s = (s + 1) & mask;
    return s;
  }

  PendingSum* entries_ = nullptr;
  uint64_t* slots_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
};

}  // namespace sc
