// murmur3.hpp: MurmurHash3's x64 128-bit hash, the hash postgresql-hll gives the elements of its
// sketches (hll_hash_bigint, hll_hash_text: the first 64 bits, seed 0 unless given), so that a
// distinct counter's sketches (core/hll.hpp) union with a user's own hll columns.
//
// Pure C++ (no PostgreSQL header). The algorithm is Austin Appleby's (public domain), written from
// its description; blocks are read as little-endian words, as the x86 machines postgresql-hll runs
// on read them, so a bigint hashes as its eight bytes in little-endian order there.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sc {

struct Murmur3Hash {
  uint64_t h1;  // the half postgresql-hll keeps
  uint64_t h2;
};

// The hash's 64-bit finaliser: a bijection whose every output bit depends on every input bit
// (the counter table's hashes mix with it too: MixBits).
inline uint64_t Murmur3Finalize(uint64_t k) noexcept {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

namespace murmur3_detail {

inline uint64_t Rotl(uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }

// The little-endian word of the n bytes at p (n at most 8).
inline uint64_t Word(const uint8_t* p, size_t n) noexcept {
  uint64_t w = 0;
  for (size_t i = 0; i < n; i++) w |= uint64_t(p[i]) << (8 * i);
  return w;
}

constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;

inline uint64_t ScrambleK1(uint64_t k1) noexcept { return Rotl(k1 * kC1, 31) * kC2; }
inline uint64_t ScrambleK2(uint64_t k2) noexcept { return Rotl(k2 * kC2, 33) * kC1; }

}  // namespace murmur3_detail

// The hash of the len bytes at data with seed.
inline Murmur3Hash Murmur3X64(const void* data, size_t len, uint32_t seed = 0) noexcept {
  using namespace murmur3_detail;
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint64_t h1 = seed;
  uint64_t h2 = seed;
  size_t blocks = len / 16;
  for (size_t i = 0; i < blocks; i++) {
    h1 ^= ScrambleK1(Word(bytes + 16 * i, 8));
    h1 = Rotl(h1, 27) + h2;
    h1 = h1 * 5 + 0x52dce729;
    h2 ^= ScrambleK2(Word(bytes + 16 * i + 8, 8));
    h2 = Rotl(h2, 31) + h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  const uint8_t* tail = bytes + 16 * blocks;
  size_t rest = len & 15;
  if (rest > 8) h2 ^= ScrambleK2(Word(tail + 8, rest - 8));
  if (rest > 0) h1 ^= ScrambleK1(Word(tail, rest > 8 ? 8 : rest));
  h1 ^= uint64_t(len);
  h2 ^= uint64_t(len);
  h1 += h2;
  h2 += h1;
  h1 = Murmur3Finalize(h1);
  h2 = Murmur3Finalize(h2);
  h1 += h2;
  h2 += h1;
  return Murmur3Hash{h1, h2};
}

// postgresql-hll's hll_hash_bigint(value) and hll_hash_text(value) (hll_hash_varlena: the text's
// bytes), seed 0: the element's hash a sketch adds.
inline uint64_t HllHashBigint(int64_t value, uint32_t seed = 0) noexcept {
  uint8_t bytes[8];
  for (int i = 0; i < 8; i++) bytes[i] = uint8_t(uint64_t(value) >> (8 * i));
  return Murmur3X64(bytes, sizeof(bytes), seed).h1;
}
inline uint64_t HllHashBytes(const void* data, size_t len, uint32_t seed = 0) noexcept {
  return Murmur3X64(data, len, seed).h1;
}

}  // namespace sc
