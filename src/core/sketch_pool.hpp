// sketch_pool.hpp: the resident sketches of distinct counters' keys, a pool of fixed-size blocks
// (core/sketch_block.hpp) beside the counter table, each lent to one entry.
//
// Pure C++ (no PostgreSQL header); nothing here allocates, throws or fails.
//
// A distinct counter's key is an entry of the counter table like any key (found, loaded, flushed,
// evicted by the table's protocol); its entry's value counts the adds that changed its sketch (so
// that it is dirty while its sketch holds what the tables lack), and its sketch is the block the
// entry borrows. The protocol:
//   - block_of[entry] names the entry's block; owner[block] is (generation << 32 | entry) of the
//     entry that borrowed it. Both are written by the entry's loader while it owns the entry
//     (kOwned or kLoading: no one else reads them), before FinishLoad publishes it kResident.
//   - A block is lent while its owner entry keeps the generation it had: an entry returns to the
//     free list (eviction, purge, an abandoned load) only through CounterTable::Release, which
//     moves its generation on, and only once no lock holder can reach it (Unlink under the
//     partition lock EXCLUSIVE). So a block whose owner's generation moved on is free: a loader
//     takes it with a compare-and-swap on owner[block] (two loaders cannot take the same one).
//   - Who reads a resident entry's block holds what keeps the entry: its partition lock (adds,
//     reads), its claim (in_flush: a flush), or a pin (a committing transaction); none of them
//     lets it leave, so the block stays the entry's meanwhile.
//   - With no free block, a loader evicts a clean entry that holds one (the table's protocol,
//     EvictIfIdle), whose block is then free, and takes it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/counter_table.hpp"
#include "core/sketch_block.hpp"

namespace sc {

constexpr uint64_t kNoOwner = UINT64_MAX;

inline uint64_t SketchOwner(uint32_t entry, uint32_t generation) noexcept {
  return uint64_t(generation) << 32 | entry;
}

class SketchPool {
 public:
  static size_t BytesFor(uint32_t blocks, uint32_t entries) noexcept {
    return Aligned(sizeof(SketchPool)) + Aligned(sizeof(std::atomic<uint64_t>) * blocks) +
           Aligned(sizeof(std::atomic<uint32_t>) * entries) + sizeof(SketchBlock) * blocks;
  }
  // Lays out an empty pool in mem (BytesFor bytes, 64-byte aligned) and returns it.
  static SketchPool* Create(void* mem, uint32_t blocks, uint32_t entries) noexcept {
    auto* pool = static_cast<SketchPool*>(mem);
    pool->blocks_ = blocks;
    pool->entries_ = entries;
    pool->hand_.store(0, std::memory_order_relaxed);
    for (uint32_t i = 0; i < blocks; i++)
      pool->owners()[i].store(kNoOwner, std::memory_order_relaxed);
    for (uint32_t i = 0; i < entries; i++)
      pool->block_of()[i].store(kNil, std::memory_order_relaxed);
    return pool;
  }

  uint32_t blocks() const noexcept { return blocks_; }
  SketchBlock& block(uint32_t b) noexcept { return this->blocks_at()[b]; }

  // The block of entry `index`, if it borrowed one as (index, generation); else kNil.
  uint32_t BlockOf(uint32_t index, uint32_t generation) noexcept {
    if (blocks_ == 0) return kNil;
    uint32_t b = block_of()[index].load(std::memory_order_acquire);
    if (b == kNil) return kNil;
    if (owners()[b].load(std::memory_order_acquire) != SketchOwner(index, generation)) return kNil;
    return b;
  }
  // The block of a resident entry that holds one (see the protocol: the caller keeps the entry).
  uint32_t BlockOfResident(uint32_t index) noexcept {
    uint32_t b = block_of()[index].load(std::memory_order_acquire);
    SC_ASSERT(b != kNil && b < blocks_);
    return b;
  }

  // Lends a free block to entry (index, generation), which the caller owns, emptied for shape:
  // its number, or kNil if every block is lent to a live entry.
  uint32_t Take(const CounterTable& table, uint32_t index, uint32_t generation,
                const HllShape& shape) noexcept {
    for (uint32_t n = 0; n < blocks_; n++) {
      uint32_t b = hand_.fetch_add(1, std::memory_order_relaxed) % blocks_;
      uint64_t owner = owners()[b].load(std::memory_order_acquire);
      if (owner != kNoOwner && !Left(table, owner)) continue;
      if (!owners()[b].compare_exchange_strong(owner, SketchOwner(index, generation),
                                               std::memory_order_acq_rel))
        continue;
      (void)InitSketchBlock(block(b), shape);
      block_of()[index].store(b, std::memory_order_release);
      return b;
    }
    return kNil;
  }

  // The owners of the next `limit` blocks the hand passes, for a loader that found none free to
  // evict one (fn(entry, generation) returns true once it did).
  template <typename Fn>
  void ForOwners(uint32_t limit, Fn&& fn) noexcept {
    for (uint32_t n = 0; n < limit && n < blocks_; n++) {
      uint32_t b = hand_.fetch_add(1, std::memory_order_relaxed) % blocks_;
      uint64_t owner = owners()[b].load(std::memory_order_acquire);
      if (owner == kNoOwner) continue;
      if (fn(uint32_t(owner), uint32_t(owner >> 32))) return;
    }
  }

 private:
  static size_t Aligned(size_t n) noexcept { return (n + 63) & ~size_t(63); }
  // Whether the entry that borrowed a block as `owner` has left (its generation moved on).
  static bool Left(const CounterTable& table, uint64_t owner) noexcept {
    return table.at(uint32_t(owner)).generation.load(std::memory_order_acquire) !=
           uint32_t(owner >> 32);
  }
  std::atomic<uint64_t>* owners() noexcept {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(this) +
                                                     Aligned(sizeof(SketchPool)));
  }
  std::atomic<uint32_t>* block_of() noexcept {
    return reinterpret_cast<std::atomic<uint32_t>*>(
        reinterpret_cast<char*>(owners()) + Aligned(sizeof(std::atomic<uint64_t>) * blocks_));
  }
  SketchBlock* blocks_at() noexcept {
    return reinterpret_cast<SketchBlock*>(reinterpret_cast<char*>(block_of()) +
                                          Aligned(sizeof(std::atomic<uint32_t>) * entries_));
  }

  uint32_t blocks_;
  uint32_t entries_;
  std::atomic<uint32_t> hand_;
};
static_assert(std::is_standard_layout<SketchPool>::value &&
                  std::is_standard_layout<SketchBlock>::value,
              "shared structs have a standard layout");

}  // namespace sc
