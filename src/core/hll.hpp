// hll.hpp: HyperLogLog sketches as postgresql-hll keeps them (issue 49's distinct counters): what
// an element's hash sets, the estimate of a set of registers, and the storage format (its
// STORAGE.markdown, schema version 1), so that a distinct counter's sketch read as bytes is an
// `hll` value that extension's functions take (hll_cardinality, hll_union_agg).
//
// Pure C++ (no PostgreSQL header), nothing allocates: the caller gives every buffer.
//
// A sketch has 2^log2m registers of regwidth bits. An element's 64-bit hash (core/murmur3.hpp)
// names its register by its low log2m bits; the register keeps the largest, over the elements,
// of 1 + the number of trailing zero bits of the remaining bits (0 when they are all zero), at
// most 2^regwidth - 1. A union is the registers' maximum, so merging a sketch twice changes
// nothing. Small sets are kept explicit, as the sorted list of their hashes (exact), up to
// expthresh elements; postgresql-hll's "auto" (-1) is as many as fit in the dense form's bytes.
//
// Storage: a header of three bytes, (version 1 << 4 | type), ((regwidth - 1) << 5 | log2m), and
// (sparse << 6 | the encoded expthresh), then the data: none (EMPTY), the hashes as big-endian
// 64-bit words in ascending signed order (EXPLICIT), (index, value) pairs of log2m + regwidth bits
// for the nonzero registers (SPARSE), or every register in regwidth bits (FULL), bit-packed from
// the top of the first byte. A dense sketch is stored SPARSE when sparse is on and that form is
// the smaller, as postgresql-hll chooses.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/core_assert.hpp"

namespace sc {

enum class HllType : uint8_t { kUndefined = 0, kEmpty = 1, kExplicit = 2, kSparse = 3, kFull = 4 };

// A sketch's parameters, as its storage header holds them.
struct HllShape {
  uint8_t log2m;      // 4 to 31 in the format; registers = 2^log2m
  uint8_t regwidth;   // 1 to 8 bits per register
  int64_t expthresh;  // -1: auto; 0: never explicit; else a power of 2 up to 2^62
  bool sparse;        // a dense sketch may be stored SPARSE
};

inline bool HllShapeValid(const HllShape& s) noexcept {
  if (s.log2m < 4 || s.log2m > 31 || s.regwidth < 1 || s.regwidth > 8) return false;
  if (s.expthresh == -1 || s.expthresh == 0) return true;
  return s.expthresh > 0 && (s.expthresh & (s.expthresh - 1)) == 0 && s.expthresh <= (1LL << 62);
}

inline uint64_t HllRegisterCount(const HllShape& s) noexcept { return uint64_t(1) << s.log2m; }

// The bytes of the FULL form's registers.
inline uint64_t HllFullDataBytes(const HllShape& s) noexcept {
  return (uint64_t(s.regwidth) * HllRegisterCount(s) + 7) / 8;
}

// How many elements a sketch keeps explicit before it turns dense.
inline uint64_t HllExplicitLimit(const HllShape& s) noexcept {
  if (s.expthresh >= 0) return uint64_t(s.expthresh);
  return HllFullDataBytes(s) / 8;  // auto: as many hashes as fit in the dense form's bytes
}

// The register an element's hash sets, and the value it offers it.
struct HllSlot {
  uint32_t index;
  uint8_t value;
};

inline HllSlot HllSlotOf(uint64_t hash, const HllShape& s) noexcept {
  uint64_t rest = hash >> s.log2m;
  unsigned value = rest == 0 ? 0 : unsigned(__builtin_ctzll(rest)) + 1;
  unsigned max = (1u << s.regwidth) - 1;
  return HllSlot{uint32_t(hash & (HllRegisterCount(s) - 1)), uint8_t(value > max ? max : value)};
}

// The estimate of a dense sketch's registers (one byte each), as postgresql-hll's
// hll_cardinality computes it: the raw estimate alpha·m²/Σ2^-r, linear counting while it is
// below 5m/2 and a register is 0, and the large-range correction above 2^L/30 (L, the bits a hash
// can fill: log2m + 2^regwidth - 2).
inline double HllEstimate(const uint8_t* registers, const HllShape& s) noexcept {
  uint64_t m = HllRegisterCount(s);
  double sum = 0.0;
  uint64_t zeros = 0;
  for (uint64_t i = 0; i < m; i++) {
    sum += std::ldexp(1.0, -int(registers[i]));
    if (registers[i] == 0) zeros++;
  }
  double md = double(m);
  double alpha =
      m == 16 ? 0.673 : m == 32 ? 0.697 : m == 64 ? 0.709 : 0.7213 / (1.0 + 1.079 / md);
  double estimate = alpha * md * md / sum;
  if (zeros != 0 && estimate < 5.0 * md / 2.0) return md * std::log(md / double(zeros));
  unsigned bits = unsigned(s.log2m) + (1u << s.regwidth) - 2;
  double two_to_l = bits >= 64 ? std::ldexp(1.0, int(bits)) : double(uint64_t(1) << bits);
  if (estimate <= two_to_l / 30.0) return estimate;
  return -two_to_l * std::log(1.0 - estimate / two_to_l);
}

// ---- sets: explicit hashes, dense registers, their unions ---------------------------------------

enum class HllAdd { kAdded, kPresent, kFull };

// Adds hash to the n explicit hashes at hashes (ascending, signed, without repeats; room for
// limit): kPresent if it is there, kFull if it is not and n is limit (nothing changed: the set
// must turn dense), else kAdded in its place.
inline HllAdd HllExplicitAdd(int64_t* hashes, uint64_t* n, uint64_t limit, int64_t hash) noexcept {
  uint64_t lo = 0, hi = *n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (hashes[mid] < hash)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < *n && hashes[lo] == hash) return HllAdd::kPresent;
  if (*n >= limit) return HllAdd::kFull;
  for (uint64_t i = *n; i > lo; i--) hashes[i] = hashes[i - 1];
  hashes[lo] = hash;
  ++*n;
  return HllAdd::kAdded;
}

// Offers hash to dense registers: true if a register grew (the estimate could change).
inline bool HllDenseAdd(uint8_t* registers, const HllShape& s, uint64_t hash) noexcept {
  HllSlot slot = HllSlotOf(hash, s);
  if (registers[slot.index] >= slot.value) return false;
  registers[slot.index] = slot.value;
  return true;
}

// The union of dense registers b into a (the registers' maximum); true if a changed.
inline bool HllDenseUnion(uint8_t* a, const uint8_t* b, const HllShape& s) noexcept {
  bool changed = false;
  for (uint64_t i = 0, m = HllRegisterCount(s); i < m; i++)
    if (b[i] > a[i]) {
      a[i] = b[i];
      changed = true;
    }
  return changed;
}

// ---- storage -----------------------------------------------------------------------------------

constexpr size_t kHllHeaderBytes = 3;

// The encoded expthresh of the header's third byte: 63 auto, 0 none, else log2(e) + 1.
inline uint8_t HllEncodeExpthresh(int64_t e) noexcept {
  if (e == -1) return 63;
  if (e == 0) return 0;
  return uint8_t(63 - __builtin_clzll(uint64_t(e)) + 1);
}
inline int64_t HllDecodeExpthresh(uint8_t code) noexcept {
  if (code == 63) return -1;
  if (code == 0) return 0;
  return int64_t(1) << (code - 1);
}

inline void HllWriteHeader(uint8_t* out, HllType type, const HllShape& s) noexcept {
  out[0] = uint8_t((1u << 4) | unsigned(type));
  out[1] = uint8_t(((s.regwidth - 1u) << 5) | s.log2m);
  out[2] = uint8_t((s.sparse ? 1u << 6 : 0u) | HllEncodeExpthresh(s.expthresh));
}

// Writes and reads bit-packed words from the top of the first byte (the format's order).
class HllBitWriter {
 public:
  explicit HllBitWriter(uint8_t* out) noexcept : out_(out) {}
  void Put(uint64_t value, unsigned bits) noexcept {
    for (unsigned b = bits; b-- > 0;) {
      if ((value >> b) & 1) out_[pos_ / 8] |= uint8_t(0x80u >> (pos_ % 8));
      pos_++;
    }
  }

 private:
  uint8_t* out_;
  uint64_t pos_ = 0;
};

class HllBitReader {
 public:
  explicit HllBitReader(const uint8_t* in) noexcept : in_(in) {}
  uint64_t Get(unsigned bits) noexcept {
    uint64_t value = 0;
    for (unsigned b = 0; b < bits; b++, pos_++)
      value = (value << 1) | ((in_[pos_ / 8] >> (7 - pos_ % 8)) & 1u);
    return value;
  }

 private:
  const uint8_t* in_;
  uint64_t pos_ = 0;
};

// The bytes of a dense sketch with `filled` nonzero registers as stored, and whether as SPARSE.
inline uint64_t HllDenseBytes(const HllShape& s, uint64_t filled, bool* sparse) noexcept {
  uint64_t sparse_bits = filled * (uint64_t(s.log2m) + s.regwidth);
  uint64_t full_bits = HllRegisterCount(s) * s.regwidth;
  *sparse = s.sparse && sparse_bits < full_bits;
  return kHllHeaderBytes + ((*sparse ? sparse_bits : full_bits) + 7) / 8;
}

// Stores dense registers (one byte each) into out, of HllDenseBytes(s, filled) bytes, zeroed.
inline void HllWriteDense(const uint8_t* registers, const HllShape& s, uint8_t* out) noexcept {
  uint64_t m = HllRegisterCount(s);
  uint64_t filled = 0;
  for (uint64_t i = 0; i < m; i++) filled += registers[i] != 0;
  bool sparse;
  (void)HllDenseBytes(s, filled, &sparse);
  HllWriteHeader(out, sparse ? HllType::kSparse : HllType::kFull, s);
  HllBitWriter w(out + kHllHeaderBytes);
  for (uint64_t i = 0; i < m; i++) {
    if (!sparse)
      w.Put(registers[i], s.regwidth);
    else if (registers[i] != 0)
      w.Put((i << s.regwidth) | registers[i], unsigned(s.log2m) + s.regwidth);
  }
}

// Stores n explicit hashes, in ascending signed order without repeats, into out (of
// kHllHeaderBytes + 8n bytes): EMPTY when n is 0.
inline void HllWriteExplicit(const int64_t* hashes, uint64_t n, const HllShape& s,
                             uint8_t* out) noexcept {
  HllWriteHeader(out, n == 0 ? HllType::kEmpty : HllType::kExplicit, s);
  for (uint64_t i = 0; i < n; i++) {
    SC_ASSERT(i == 0 || hashes[i - 1] < hashes[i]);
    for (int b = 0; b < 8; b++)
      out[kHllHeaderBytes + 8 * i + b] = uint8_t(uint64_t(hashes[i]) >> (56 - 8 * b));
  }
}

// A stored sketch read back. For EXPLICIT, the hashes are at `explicit_data` (8 big-endian bytes
// each, `explicit_count` of them: HllExplicitHash reads one); for SPARSE and FULL, registers (of
// HllRegisterCount(shape) bytes, which the caller gives) are filled.
struct HllRead {
  HllType type;
  HllShape shape;
  const uint8_t* explicit_data;
  uint64_t explicit_count;
};

inline int64_t HllExplicitHash(const HllRead& r, uint64_t i) noexcept {
  uint64_t v = 0;
  for (int b = 0; b < 8; b++) v = (v << 8) | r.explicit_data[8 * i + b];
  return int64_t(v);
}

// Reads the len bytes at in: false when they are no valid sketch of schema version 1 (a size that
// does not match its type, explicit hashes out of order, padding of 8 bits or more, registers past
// max_registers). registers: where a dense sketch's registers go (max_registers bytes).
inline bool HllReadStored(const uint8_t* in, uint64_t len, uint8_t* registers,
                          uint64_t max_registers, HllRead* out) noexcept {
  if (len < kHllHeaderBytes || (in[0] >> 4) != 1 || (in[2] & 0x80) != 0) return false;
  uint8_t type = in[0] & 0xf;
  if (type > uint8_t(HllType::kFull)) return false;
  uint8_t code = in[2] & 0x3f;
  if (code > 32 && code != 63) return false;
  HllShape s{uint8_t(in[1] & 0x1f), uint8_t((in[1] >> 5) + 1), HllDecodeExpthresh(code),
             (in[2] & 0x40) != 0};
  if (!HllShapeValid(s)) return false;
  *out = HllRead{HllType(type), s, nullptr, 0};
  uint64_t data = len - kHllHeaderBytes;
  const uint8_t* bytes = in + kHllHeaderBytes;
  switch (HllType(type)) {
    case HllType::kUndefined:
    case HllType::kEmpty:
      return data == 0;
    case HllType::kExplicit:
      if (data % 8 != 0) return false;
      out->explicit_data = bytes;
      out->explicit_count = data / 8;
      for (uint64_t i = 1; i < out->explicit_count; i++)
        if (HllExplicitHash(*out, i - 1) >= HllExplicitHash(*out, i)) return false;
      return true;
    case HllType::kSparse:
    case HllType::kFull:
      break;
  }
  uint64_t m = HllRegisterCount(s);
  if (m > max_registers) return false;
  for (uint64_t i = 0; i < m; i++) registers[i] = 0;
  HllBitReader r(bytes);
  if (HllType(type) == HllType::kFull) {
    if (data != HllFullDataBytes(s)) return false;
    for (uint64_t i = 0; i < m; i++) registers[i] = uint8_t(r.Get(s.regwidth));
    return true;
  }
  unsigned word = unsigned(s.log2m) + s.regwidth;
  uint64_t pairs = data * 8 / word;
  if (data * 8 - pairs * word >= 8) return false;
  for (uint64_t i = 0; i < pairs; i++) {
    uint64_t pair = r.Get(word);
    uint64_t index = pair >> s.regwidth;
    uint8_t value = uint8_t(pair & ((1u << s.regwidth) - 1));
    if (value > registers[index]) registers[index] = value;
  }
  return true;
}

}  // namespace sc
