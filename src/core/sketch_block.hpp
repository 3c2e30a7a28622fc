// sketch_block.hpp: a distinct counter's sketch resident in shared memory (issue 49), in a block
// of fixed size, and every step that touches it.
//
// Pure C++ (no PostgreSQL header), run by the server over the block's spinlock (Mutex: lock() /
// unlock(), sc::SpinMutex) and by the unit tests over std::mutex, with threads.
//
// A block holds one sketch of a shape (core/hll.hpp) of at most kSketchMaxLog2m, in one of two
// forms, and never more bytes than the dense form's registers, one byte each: the fixed bound
// per sketch.
//   - Explicit: up to HllExplicitLimit(shape) hashes, sorted, in `data` as int64 (exact).
//   - Dense: 2^log2m registers, a byte each, in `data`.
// The protocol:
//   - `form` goes from explicit to dense once (Promote), under the Mutex, after the registers
//     are written (release); it is read with acquire. A block's shape is fixed while it is in use.
//   - Explicit adds hold the Mutex (the sorted insertion moves hashes).
//   - Dense adds take no lock: a register's byte grows by compare-and-swap on its aligned
//     64-bit word, so concurrent adds to one word (other registers' bytes) are not lost, and a
//     register never shrinks. An add that read `form` explicit takes the Mutex and reads it again.
//   - `changes` counts the adds that changed the set (fetch_add after the change, release): a
//     flush that copied the set after reading `changes` as c (acquire) and finds it still c has
//     every change up to then; a reader's copy of dense registers without the Mutex is some
//     moment's set or a later one, never a mix that loses a register (registers only grow).
//   - Copy (the flush's and a read's): explicit under the Mutex; dense without it.
//   - Union (a load's stored sketch, a commit's): as adds, one register or hash at a time.
// Nothing here allocates, throws or fails: every function is noexcept.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/core_assert.hpp"
#include "core/hll.hpp"

namespace sc {

// The largest precision a resident sketch may have: 16,384 registers, 16 KiB.
constexpr uint8_t kSketchMaxLog2m = 14;
constexpr size_t kSketchDataBytes = size_t(1) << kSketchMaxLog2m;

// A distinct counter's shape for its precision, its log2m: postgresql-hll's defaults otherwise
// (regwidth 5, expthresh auto, sparse on), so that a sketch is hll(log2m, 5). The default, 14,
// gives a standard error of 1.04 / sqrt(2^14), about 0.8% (hll's own default, 11, gives 2.3%).
constexpr int kDefaultLog2m = 14;
constexpr int kMinLog2m = 4;
inline HllShape DistinctShape(int log2m) noexcept { return HllShape{uint8_t(log2m), 5, -1, true}; }

enum SketchForm : uint32_t { kSketchExplicit = 0, kSketchDense = 1 };

struct alignas(64) SketchBlock {
  std::atomic<uint32_t> form;       // SketchForm
  uint32_t count;                   // explicit hashes held (under the Mutex)
  HllShape shape;                   // fixed while the block is in use
  std::atomic<uint64_t> changes;    // adds that changed the set
  alignas(8) uint8_t data[kSketchDataBytes];
};

// A block for a sketch of shape s, empty (explicit, no hash), or false if s is not one a block
// holds.
inline bool InitSketchBlock(SketchBlock& b, const HllShape& s) noexcept {
  if (!HllShapeValid(s) || s.log2m > kSketchMaxLog2m) return false;
  if (HllExplicitLimit(s) * sizeof(int64_t) > kSketchDataBytes) return false;
  b.form.store(kSketchExplicit, std::memory_order_relaxed);
  b.count = 0;
  b.shape = s;
  b.changes.store(0, std::memory_order_relaxed);
  memset(b.data, 0, sizeof(b.data));
  return true;
}

namespace sketch_detail {

inline int64_t* Hashes(SketchBlock& b) noexcept { return reinterpret_cast<int64_t*>(b.data); }

// Raises register `index` to `value` by compare-and-swap on its word; true if it grew.
inline bool RaiseRegister(SketchBlock& b, uint32_t index, uint8_t value) noexcept {
  auto* word = reinterpret_cast<std::atomic<uint64_t>*>(b.data + (index & ~7u));
  // The register's byte within the word, as memory holds the word's bytes.
  unsigned byte = index & 7u;
  unsigned shift = 8 * (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? byte : 7u - byte);
  uint64_t old = word->load(std::memory_order_relaxed);
  for (;;) {
    uint8_t current = uint8_t(old >> shift);
    if (current >= value) return false;
    uint64_t raised = (old & ~(uint64_t(0xff) << shift)) | (uint64_t(value) << shift);
    if (word->compare_exchange_weak(old, raised, std::memory_order_acq_rel,
                                    std::memory_order_relaxed))
      return true;
  }
}

inline bool DenseAdd(SketchBlock& b, uint64_t hash) noexcept {
  HllSlot slot = HllSlotOf(hash, b.shape);
  return slot.value != 0 && RaiseRegister(b, slot.index, slot.value);
}

// Under the Mutex: the explicit hashes become registers.
inline void Promote(SketchBlock& b) noexcept {
  SC_ASSERT(b.form.load(std::memory_order_relaxed) == kSketchExplicit);
  int64_t hashes[kSketchDataBytes / sizeof(int64_t)];
  uint32_t n = b.count;
  memcpy(hashes, b.data, n * sizeof(int64_t));
  memset(b.data, 0, sizeof(b.data));
  for (uint32_t i = 0; i < n; i++) (void)DenseAdd(b, uint64_t(hashes[i]));
  b.count = 0;
  b.form.store(kSketchDense, std::memory_order_release);
}

}  // namespace sketch_detail

// Adds an element's hash: true if the set changed (the estimate could change: what sc_add
// answers, as PFADD does).
template <typename Mutex>
bool SketchAdd(SketchBlock& b, Mutex& mutex, uint64_t hash) noexcept {
  using namespace sketch_detail;
  bool changed;
  if (b.form.load(std::memory_order_acquire) == kSketchDense) {
    changed = DenseAdd(b, hash);
  } else {
    mutex.lock();
    if (b.form.load(std::memory_order_relaxed) == kSketchDense) {
      changed = DenseAdd(b, hash);
    } else {
      uint64_t n = b.count;
      HllAdd added = HllExplicitAdd(Hashes(b), &n, HllExplicitLimit(b.shape), int64_t(hash));
      if (added == HllAdd::kFull) {
        Promote(b);
        (void)DenseAdd(b, hash);
        changed = true;  // the form changed, whatever the register did
      } else {
        b.count = uint32_t(n);
        changed = added == HllAdd::kAdded;
      }
    }
    mutex.unlock();
  }
  if (changed) b.changes.fetch_add(1, std::memory_order_release);
  return changed;
}

// Whether adding hash would change the set (nothing changes): explicit under the Mutex.
template <typename Mutex>
bool SketchLacks(SketchBlock& b, Mutex& mutex, uint64_t hash) noexcept {
  if (b.form.load(std::memory_order_acquire) != kSketchDense) {
    mutex.lock();
    if (b.form.load(std::memory_order_relaxed) != kSketchDense) {
      const int64_t* hashes = sketch_detail::Hashes(b);
      uint64_t lo = 0, hi = b.count;
      while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (hashes[mid] < int64_t(hash))
          lo = mid + 1;
        else
          hi = mid;
      }
      bool lacks = !(lo < b.count && hashes[lo] == int64_t(hash));
      mutex.unlock();
      return lacks;
    }
    mutex.unlock();
  }
  HllSlot slot = HllSlotOf(hash, b.shape);
  auto* word = reinterpret_cast<std::atomic<uint64_t>*>(b.data + (slot.index & ~7u));
  unsigned byte = slot.index & 7u;
  unsigned shift = 8 * (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? byte : 7u - byte);
  return uint8_t(word->load(std::memory_order_relaxed) >> shift) < slot.value;
}

// A copy of the set, as a flush or a read takes it: *dense says the form; an explicit set's
// hashes go to hashes (*count of them, room for HllExplicitLimit), a dense one's registers to
// registers (HllRegisterCount bytes): the caller gives both. Returns `changes` as read before the
// copy.
template <typename Mutex>
uint64_t SketchCopy(SketchBlock& b, Mutex& mutex, bool* dense, int64_t* hashes, uint64_t* count,
                    uint8_t* registers) noexcept {
  SC_ASSERT(hashes != nullptr && registers != nullptr);
  uint64_t changes = b.changes.load(std::memory_order_acquire);
  if (b.form.load(std::memory_order_acquire) != kSketchDense) {
    mutex.lock();
    if (b.form.load(std::memory_order_relaxed) != kSketchDense) {
      *dense = false;
      *count = b.count;
      memcpy(hashes, b.data, b.count * sizeof(int64_t));
      mutex.unlock();
      return changes;
    }
    mutex.unlock();
  }
  *dense = true;
  *count = 0;
  uint64_t m = HllRegisterCount(b.shape);
  for (uint64_t i = 0; i < m; i += 8) {
    uint64_t word = reinterpret_cast<std::atomic<uint64_t>*>(b.data + i)
                        ->load(std::memory_order_relaxed);
    memcpy(registers + i, &word, m - i < 8 ? m - i : 8);
  }
  return changes;
}

// Unions a stored sketch read by HllReadStored (its registers in `registers` when dense) into
// the block: true if the set changed. The shapes must match (the caller checks).
template <typename Mutex>
bool SketchUnion(SketchBlock& b, Mutex& mutex, const HllRead& stored,
                 const uint8_t* registers) noexcept {
  bool changed = false;
  if (stored.type == HllType::kExplicit) {
    for (uint64_t i = 0; i < stored.explicit_count; i++)
      changed = SketchAdd(b, mutex, uint64_t(HllExplicitHash(stored, i))) || changed;
    return changed;
  }
  if (stored.type != HllType::kSparse && stored.type != HllType::kFull) return false;
  if (b.form.load(std::memory_order_acquire) != kSketchDense) {
    mutex.lock();
    if (b.form.load(std::memory_order_relaxed) != kSketchDense) {
      sketch_detail::Promote(b);
      changed = true;
    }
    mutex.unlock();
  }
  for (uint64_t i = 0, m = HllRegisterCount(b.shape); i < m; i++)
    if (registers[i] != 0)
      changed = sketch_detail::RaiseRegister(b, uint32_t(i), registers[i]) || changed;
  if (changed) b.changes.fetch_add(1, std::memory_order_release);
  return changed;
}

}  // namespace sc
