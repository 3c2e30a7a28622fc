// counter_table.cpp: the shared counter table: its layout, the links of its entries, the
// occupancy and fair share of each database, the clock sweep (counter_table.hpp says what each
// step may assume; the lock protocol that calls them is core/protocol.hpp).
#include <new>

#include "core/counter_table.hpp"

#include "core/checked_math.hpp"
#include "core/fair_share.hpp"
#include "core/cpp_only_file.hpp"

namespace sc {

namespace {

constexpr size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

uint32_t BucketsFor(uint32_t capacity) {
  uint32_t n = kPartitions;
  while (n < capacity && n < (1u << 31)) n <<= 1;
  return n;
}

}  // namespace

size_t CounterTable::BytesFor(uint32_t capacity) noexcept {
  return AlignUp(sizeof(CounterTable), 64) +
         AlignUp(sizeof(std::atomic<uint32_t>) * BucketsFor(capacity), 64) +
         sizeof(Entry) * size_t(capacity);
}

CounterTable* CounterTable::Create(void* mem, uint32_t capacity) noexcept {
  auto* t = static_cast<CounterTable*>(mem);
  t->capacity_ = capacity;
  t->nbuckets_ = BucketsFor(capacity);
  t->entries_offset_ =
      AlignUp(sizeof(CounterTable), 64) + AlignUp(sizeof(std::atomic<uint32_t>) * t->nbuckets_, 64);
  t->clock_hand_.store(0, std::memory_order_relaxed);
  t->used_.store(0, std::memory_order_relaxed);
  for (auto& cell : t->occupancy_) cell.store(0, std::memory_order_relaxed);
  for (uint32_t b = 0; b < t->nbuckets_; b++) t->heads()[b].store(kNil, std::memory_order_relaxed);
  Entry* es = t->entries();
  for (uint32_t i = 0; i < capacity; i++) {
    Entry& e = es[i];
    e.id = CounterKey{0, 0, 0, 0};
    e.value.store(0, std::memory_order_relaxed);
    e.flushed.store(0, std::memory_order_relaxed);
    e.last_write.store(kNoWrite, std::memory_order_relaxed);
    e.state.store(kFree, std::memory_order_relaxed);
    e.generation.store(0, std::memory_order_relaxed);
    e.next.store(i + 1 < capacity ? i + 1 : kNil, std::memory_order_relaxed);
    e.hash.store(0, std::memory_order_relaxed);
    e.usage.store(0, std::memory_order_relaxed);
    e.in_flush.store(0, std::memory_order_relaxed);
    e.stamp_dirty.store(0, std::memory_order_relaxed);
    e.sum_wrapped.store(0, std::memory_order_relaxed);
    e.reserved_up.store(0, std::memory_order_relaxed);
    e.reserved_down.store(0, std::memory_order_relaxed);
    e.pins.store(0, std::memory_order_relaxed);
    e.commit_epoch.store(0, std::memory_order_relaxed);
    e.row.store(0, std::memory_order_relaxed);
  }
  t->free_head_.store(capacity > 0 ? 0 : kNil, std::memory_order_release);
  return t;
}

void CounterTable::Link(uint32_t index) noexcept {
  Entry& e = at(index);
  std::atomic<uint32_t>& head = heads()[e.hash.load(std::memory_order_relaxed) & (nbuckets_ - 1)];
  e.next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  head.store(index, std::memory_order_release);
  CountLinked(e.id.db, 1);
}

void CounterTable::CountLinked(uint32_t db, int delta) noexcept {
  for (;;) {
    // db's cell, or (to count a new database in) the first cell whose count is 0.
    int found = -1, spare = -1;
    uint64_t seen = 0;
    for (uint32_t c = 0; c < kOccupancyCells && found < 0; c++) {
      uint64_t cell = occupancy_[c].load(std::memory_order_relaxed);
      if (uint32_t(cell >> 32) == db && uint32_t(cell) != 0) {
        found = int(c);
        seen = cell;
      } else if (uint32_t(cell) == 0 && spare < 0) {
        spare = int(c);
        seen = cell;
      }
    }
    int c = found >= 0 ? found : spare;
    // Not counted: a database beyond the cells, or a decrement of one that was not counted.
    if (c < 0 || (found < 0 && delta < 0)) return;
    uint64_t count = uint32_t(seen) + uint64_t(int64_t(delta));
    uint64_t next = uint64_t(db) << 32 | uint32_t(count);
    if (occupancy_[c].compare_exchange_strong(seen, next, std::memory_order_relaxed)) return;
  }
}

uint32_t CounterTable::OccupancyOf(uint32_t db) const noexcept {
  for (const auto& cell : occupancy_) {
    uint64_t v = cell.load(std::memory_order_relaxed);
    if (uint32_t(v >> 32) == db && uint32_t(v) != 0) return uint32_t(v);
  }
  return 0;
}

namespace {

// A snapshot of the cells, and the fair share with db counted among the databases.
uint32_t ReadShares(const std::atomic<uint64_t>* occupancy, uint32_t capacity, uint32_t db,
                    uint64_t* cells) {
  uint32_t databases = 0;
  bool counted = false;
  for (uint32_t c = 0; c < kOccupancyCells; c++) {
    cells[c] = occupancy[c].load(std::memory_order_relaxed);
    if (uint32_t(cells[c]) == 0) continue;
    databases++;
    if (uint32_t(cells[c] >> 32) == db) counted = true;
  }
  if (!counted) databases++;
  return uint32_t(FairShare(capacity, ReserveOf(capacity, PoolKind::kTakesBack), databases));
}

}  // namespace

int CounterTable::OverShare(uint32_t db, uint32_t* out, int max) const noexcept {
  uint64_t cells[kOccupancyCells];
  uint32_t share = ReadShares(occupancy_, capacity_, db, cells);
  int n = 0;
  for (uint32_t c = 0; c < kOccupancyCells && n < max; c++)
    if (AboveShare(uint32_t(cells[c]), share) && uint32_t(cells[c] >> 32) != db)
      out[n++] = uint32_t(cells[c] >> 32);
  return n;
}

bool CounterTable::OverItsShare(uint32_t db) const noexcept {
  uint64_t cells[kOccupancyCells];
  uint32_t share = ReadShares(occupancy_, capacity_, db, cells);
  for (uint32_t c = 0; c < kOccupancyCells; c++)
    if (uint32_t(cells[c] >> 32) == db && AboveShare(uint32_t(cells[c]), share)) return true;
  return false;
}

void CounterTable::Unlink(uint32_t index) noexcept {
  Entry* es = entries();
  std::atomic<uint32_t>* link =
      &heads()[es[index].hash.load(std::memory_order_relaxed) & (nbuckets_ - 1)];
  for (uint32_t i = link->load(std::memory_order_relaxed); i != kNil;
       link = &es[i].next, i = link->load(std::memory_order_relaxed)) {
    if (i == index) {
      link->store(es[index].next.load(std::memory_order_relaxed), std::memory_order_release);
      es[index].state.store(kOwned, std::memory_order_release);
      CountLinked(es[index].id.db, -1);
      return;
    }
  }
}

uint32_t CounterTable::Allocate() noexcept {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  for (;;) {
    uint32_t index = uint32_t(head);
    if (index == kNil) return kNil;
    uint32_t next = at(index).next.load(std::memory_order_relaxed);
    uint64_t tagged = ((head >> 32) + 1) << 32 | next;
    if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      Entry& e = at(index);
      e.state.store(kOwned, std::memory_order_relaxed);
      e.usage.store(1, std::memory_order_relaxed);
      e.in_flush.store(0, std::memory_order_relaxed);
      e.stamp_dirty.store(0, std::memory_order_relaxed);
      e.sum_wrapped.store(0, std::memory_order_relaxed);
      e.last_write.store(kNoWrite, std::memory_order_relaxed);
      e.reserved_up.store(0, std::memory_order_relaxed);
      e.reserved_down.store(0, std::memory_order_relaxed);
      e.pins.store(0, std::memory_order_relaxed);
      e.commit_epoch.store(0, std::memory_order_relaxed);
      used_.fetch_add(1, std::memory_order_relaxed);
      return index;
    }
  }
}

void CounterTable::Release(uint32_t index) noexcept {
  Entry& e = at(index);
  e.generation.fetch_add(1, std::memory_order_relaxed);
  e.state.store(kFree, std::memory_order_relaxed);
  used_.fetch_sub(1, std::memory_order_relaxed);
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  for (;;) {
    e.next.store(uint32_t(head), std::memory_order_relaxed);
    uint64_t tagged = ((head >> 32) + 1) << 32 | index;
    if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_release,
                                         std::memory_order_relaxed))
      return;
  }
}

uint32_t CounterTable::ClockNext() noexcept {
  if (capacity_ == 0) return kNil;
  return uint32_t(clock_hand_.fetch_add(1, std::memory_order_relaxed) % capacity_);
}

bool CounterTable::AgeAndTestEvictable(Entry& e, bool second_chance) noexcept {
  if (e.state.load(std::memory_order_acquire) != kResident) return false;
  if (e.in_flush.load(std::memory_order_acquire) != 0) return false;
  if (e.pins.load(std::memory_order_acquire) != 0) return false;
  if (second_chance && e.usage.load(std::memory_order_relaxed) != 0) {
    e.usage.store(0, std::memory_order_relaxed);
    return false;
  }
  return Clean(e);
}

}  // namespace sc
