// sketch_set.hpp: a distinct counter's sketch as a value in one process's memory: what a read
// unions (the resident block's copy, the stored rows), what a flush or a commit writes, and what
// a transaction's own adds make before its commit.
//
// Pure C++ (no PostgreSQL header), nothing allocates or fails: the caller gives the SketchSet
// (about 32 KiB: palloc it). The forms and the shape rules are those of the resident block
// (core/sketch_block.hpp): explicit up to HllExplicitLimit hashes (exact), then dense registers
// of a byte each; the storage format is postgresql-hll's (core/hll.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hll.hpp"
#include "core/sketch_block.hpp"

namespace sc {

struct SketchSet {
  HllShape shape;
  bool dense;
  uint64_t count;  // explicit hashes, ascending
  int64_t hashes[kSketchDataBytes / sizeof(int64_t)];
  uint8_t registers[kSketchDataBytes];
};

// Whether two shapes make sketches that union: the same registers of the same width (the
// explicit threshold and the sparse flag only say how a sketch is kept).
inline bool SketchShapesMatch(const HllShape& a, const HllShape& b) noexcept {
  return a.log2m == b.log2m && a.regwidth == b.regwidth;
}

// An empty set of shape s (one a block holds: the caller checked InitSketchBlock's conditions).
inline void SketchSetInit(SketchSet& s, const HllShape& shape) noexcept {
  s.shape = shape;
  s.dense = false;
  s.count = 0;
}

inline void SketchSetPromote(SketchSet& s) noexcept {
  if (s.dense) return;
  memset(s.registers, 0, HllRegisterCount(s.shape));
  for (uint64_t i = 0; i < s.count; i++)
    (void)HllDenseAdd(s.registers, s.shape, uint64_t(s.hashes[i]));
  s.count = 0;
  s.dense = true;
}

// Adds a hash: true if the set changed.
inline bool SketchSetAdd(SketchSet& s, uint64_t hash) noexcept {
  if (!s.dense) {
    HllAdd added = HllExplicitAdd(s.hashes, &s.count, HllExplicitLimit(s.shape), int64_t(hash));
    if (added != HllAdd::kFull) return added == HllAdd::kAdded;
    SketchSetPromote(s);
    (void)HllDenseAdd(s.registers, s.shape, hash);
    return true;
  }
  return HllDenseAdd(s.registers, s.shape, hash);
}

// Whether adding hash would change the set (nothing changes).
inline bool SketchSetWouldChange(const SketchSet& s, uint64_t hash) noexcept {
  if (!s.dense) {
    uint64_t lo = 0, hi = s.count;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (s.hashes[mid] < int64_t(hash))
        lo = mid + 1;
      else
        hi = mid;
    }
    return !(lo < s.count && s.hashes[lo] == int64_t(hash));
  }
  HllSlot slot = HllSlotOf(hash, s.shape);
  return s.registers[slot.index] < slot.value;
}

// The union of b into a (shapes that match).
inline void SketchSetUnion(SketchSet& a, const SketchSet& b) noexcept {
  SC_ASSERT(SketchShapesMatch(a.shape, b.shape));
  if (!b.dense) {
    for (uint64_t i = 0; i < b.count; i++) (void)SketchSetAdd(a, uint64_t(b.hashes[i]));
    return;
  }
  SketchSetPromote(a);
  (void)HllDenseUnion(a.registers, b.registers, a.shape);
}

// The union of a stored sketch read by HllReadStored (registers: its dense registers) into s.
// False if its shape does not match s's.
inline bool SketchSetUnionStored(SketchSet& s, const HllRead& stored,
                                 const uint8_t* registers) noexcept {
  if (stored.type == HllType::kEmpty || stored.type == HllType::kUndefined) return true;
  if (!SketchShapesMatch(s.shape, stored.shape)) return false;
  if (stored.type == HllType::kExplicit) {
    for (uint64_t i = 0; i < stored.explicit_count; i++)
      (void)SketchSetAdd(s, uint64_t(HllExplicitHash(stored, i)));
    return true;
  }
  SketchSetPromote(s);
  (void)HllDenseUnion(s.registers, registers, s.shape);
  return true;
}

// The estimate, rounded to the nearest integer: an explicit set's size (exact), a dense one's
// as postgresql-hll's hll_cardinality computes it.
inline int64_t SketchSetCount(const SketchSet& s) noexcept {
  if (!s.dense) return int64_t(s.count);
  return int64_t(std::llround(HllEstimate(s.registers, s.shape)));
}

// The bytes of s in the storage format.
inline uint64_t SketchSetStoredBytes(const SketchSet& s) noexcept {
  if (!s.dense) return kHllHeaderBytes + 8 * s.count;
  uint64_t filled = 0;
  for (uint64_t i = 0, m = HllRegisterCount(s.shape); i < m; i++) filled += s.registers[i] != 0;
  bool sparse;
  return HllDenseBytes(s.shape, filled, &sparse);
}

// Writes s into out (SketchSetStoredBytes(s) bytes, zeroed).
inline void SketchSetWrite(const SketchSet& s, uint8_t* out) noexcept {
  if (!s.dense)
    HllWriteExplicit(s.hashes, s.count, s.shape, out);
  else
    HllWriteDense(s.registers, s.shape, out);
}

// A copy of a resident block into s (core/sketch_block.hpp: SketchCopy's rules).
template <typename Mutex>
void SketchSetCopyBlock(SketchSet& s, SketchBlock& b, Mutex& mutex) noexcept {
  s.shape = b.shape;
  (void)SketchCopy(b, mutex, &s.dense, s.hashes, &s.count, s.registers);
}

}  // namespace sc
