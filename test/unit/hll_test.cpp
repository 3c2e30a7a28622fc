// Unit tests for the sketches of distinct counters (src/core/hll.hpp, src/core/murmur3.hpp): the
// hashes, sketches and estimates are postgresql-hll's own, as its 2.18 (Debian's
// postgresql-15-hll) printed them for the same elements: hll_hash_bigint, hll_hash_text,
// hll_add_agg and hll_cardinality.
#include "core/hll.hpp"
#include "core/murmur3.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sc::HllShape;

std::string Hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

// hll_add_agg's default shape (log2m 11, regwidth 5, expthresh auto, sparse on).
constexpr HllShape kDefault{11, 5, -1, true};

std::vector<uint8_t> Registers(const HllShape& s, int64_t from, int64_t to) {
  std::vector<uint8_t> registers(sc::HllRegisterCount(s), 0);
  for (int64_t v = from; v <= to; v++) {
    sc::HllSlot slot = sc::HllSlotOf(sc::HllHashBigint(v), s);
    registers[slot.index] = std::max(registers[slot.index], slot.value);
  }
  return registers;
}

TEST(Murmur3, HashesAsPostgresqlHll) {
  EXPECT_EQ(int64_t(sc::HllHashBigint(0)), 2945182322382062539LL);
  EXPECT_EQ(int64_t(sc::HllHashBigint(1)), 19144387141682250LL);
  EXPECT_EQ(int64_t(sc::HllHashBigint(-1)), -6853156495446839949LL);
  EXPECT_EQ(int64_t(sc::HllHashBigint(INT64_MAX)), 7815693464130447828LL);
  auto text = [](const char* s) { return int64_t(sc::HllHashBytes(s, strlen(s))); };
  EXPECT_EQ(text(""), 0);
  EXPECT_EQ(text("a"), -8839064797231613815LL);
  EXPECT_EQ(text("/p/1"), 9217438978643420462LL);
  EXPECT_EQ(text("The quick brown fox jumps over the lazy dog"), -2068352364225029268LL)
      << "43 bytes: two blocks and a tail of both halves";
}

TEST(Hll, ThreeElementsAreExplicitAsPostgresqlHllStoresThem) {
  std::vector<int64_t> hashes;
  for (int64_t v = 1; v <= 3; v++) hashes.push_back(int64_t(sc::HllHashBigint(v)));
  std::sort(hashes.begin(), hashes.end());
  std::vector<uint8_t> out(sc::kHllHeaderBytes + 8 * hashes.size(), 0);
  sc::HllWriteExplicit(hashes.data(), hashes.size(), kDefault, out.data());
  EXPECT_EQ(Hex(out), "128b7fde0820a06c76c0a8004403b7fb05c44a5b3d5839b2488b0c");
  std::vector<uint8_t> empty(sc::kHllHeaderBytes, 0);
  sc::HllWriteExplicit(nullptr, 0, kDefault, empty.data());
  EXPECT_EQ(Hex(empty), "118b7f") << "hll_empty()";
  sc::HllWriteExplicit(nullptr, 0, HllShape{14, 5, -1, true}, empty.data());
  EXPECT_EQ(Hex(empty), "118e7f") << "hll_empty(14, 5)";
  sc::HllRead read{};
  ASSERT_TRUE(sc::HllReadStored(out.data(), out.size(), nullptr, 0, &read));
  EXPECT_EQ(read.type, sc::HllType::kExplicit);
  ASSERT_EQ(read.explicit_count, 3u);
  for (uint64_t i = 0; i < 3; i++) EXPECT_EQ(sc::HllExplicitHash(read, i), hashes[i]);
}

// hll_add_agg(hll_hash_bigint(g)) of g from 1 to 300: SPARSE, 273 pairs of 16 bits.
const char* const kThreeHundred =
    "138b7f006100e1016401820301032103e1052206a106e20704076109410aa10c610d210fa1104111"
    "c1126212e314e315041521154115e21724186218e11903196219821aa21b621c241c421ca11ce11f"
    "e2216322612281234224c1262126c126e12701274128e229632ac12b612c012c212d622d812f042f"
    "a3310331a23241336233c5358137043783382338613a023ba13bc13ec1402140a441024121420442"
    "4442e2446244a14601470149c34b814be14c034e414ee2506452845442546155e256a256c3580258"
    "4258a159025a415be45c615d045e415e865ea35f045fc2608161016181640164826502674267a267"
    "c167e16b026ce16da16e426ec16f837182720273a574e475c1774578467b437ba27c427ca37e017e"
    "62808280a1836283a6844484a2854485c1866186a189448a218b848c248c618e638ee18f0190a192"
    "2195c19705978197a1984199019921994399619a839aa29de2a0e3a141a181a1c1a1e3a267a324a4"
    "42a542a682a6e1a721a7a3aaa1ad82ada1ae21b0e1b261b322b3c1b644b6c6b80db9c2ba84bba3bc"
    "44bf01c041c081c0c2c241c284c421c4a1c524c561c7a5ca63cbc1cdc3ce41cec3d001d0c5d103d2"
    "43d2c3d3c3d4c1d4e1d581d642d6c3d822d841d961da63daa1dac1db41dba4dd62de82dec2e003e0"
    "61e101e181e263e281e362e563e6e4e781e802e921ea42eaa2eb81eca1ed41ee07ee83ef21ef61ef"
    "82f121f1c1f361f441f4a2f641f6e3f741f822fb42fbc2fcc2fd41ff02";

TEST(Hll, ThreeHundredElementsAreSparseWithPostgresqlHllsEstimate) {
  EXPECT_EQ(sc::HllExplicitLimit(kDefault), 160u) << "auto: 1,280 bytes of registers";
  std::vector<uint8_t> registers = Registers(kDefault, 1, 300);
  uint64_t filled = 0;
  for (uint8_t r : registers) filled += r != 0;
  bool sparse = false;
  std::vector<uint8_t> out(sc::HllDenseBytes(kDefault, filled, &sparse), 0);
  EXPECT_TRUE(sparse);
  sc::HllWriteDense(registers.data(), kDefault, out.data());
  EXPECT_EQ(Hex(out), kThreeHundred) << "the pairs, and the padding";
  EXPECT_DOUBLE_EQ(sc::HllEstimate(registers.data(), kDefault), 292.99360614375894);
  std::vector<uint8_t> back(sc::HllRegisterCount(kDefault), 7);
  sc::HllRead read{};
  ASSERT_TRUE(sc::HllReadStored(out.data(), out.size(), back.data(), back.size(), &read));
  EXPECT_EQ(read.type, sc::HllType::kSparse);
  EXPECT_EQ(back, registers) << "read back, every other register 0";
}

// Between the ranges: 3,000 elements (linear counting, a register still 0 and the raw estimate
// below 5m/2) and 6,000 (the raw estimate), on 2,048 registers.
TEST(Hll, EstimatesOnEitherSideOfLinearCountingAsPostgresqlHll) {
  EXPECT_DOUBLE_EQ(sc::HllEstimate(Registers(kDefault, 1, 3000).data(), kDefault),
                   2924.9021099312695);
  EXPECT_DOUBLE_EQ(sc::HllEstimate(Registers(kDefault, 1, 6000).data(), kDefault),
                   6065.81548692816);
}

TEST(Hll, AMillionElementsEstimateAsPostgresqlHll) {
  HllShape s{14, 5, -1, true};
  std::vector<uint8_t> registers = Registers(s, 1, 1000000);
  EXPECT_NEAR(sc::HllEstimate(registers.data(), s), 1003244.8331364138, 1e-6);
  std::vector<uint8_t> out(sc::kHllHeaderBytes + sc::HllFullDataBytes(s), 0);
  bool sparse = true;
  EXPECT_EQ(sc::HllDenseBytes(s, 16384, &sparse), out.size());
  EXPECT_FALSE(sparse) << "every register set: FULL is the smaller";
  sc::HllWriteDense(registers.data(), s, out.data());
  std::vector<uint8_t> back(sc::HllRegisterCount(s), 0);
  sc::HllRead read{};
  ASSERT_TRUE(sc::HllReadStored(out.data(), out.size(), back.data(), back.size(), &read));
  EXPECT_EQ(read.type, sc::HllType::kFull);
  EXPECT_EQ(back, registers);
}

TEST(Hll, AUnionIsTheRegistersMaximumAndAddingAgainChangesNothing) {
  HllShape s{14, 5, -1, true};
  std::vector<uint8_t> a = Registers(s, 1, 60000), b = Registers(s, 40001, 100000);
  std::vector<uint8_t> both = Registers(s, 1, 100000), merged(a.size());
  for (size_t i = 0; i < a.size(); i++) merged[i] = std::max(a[i], b[i]);
  EXPECT_EQ(merged, both);
  EXPECT_EQ(Registers(s, 1, 60000), a) << "the same elements again";
  double union_estimate = sc::HllEstimate(merged.data(), s);
  EXPECT_NEAR(union_estimate, 100000, 2000) << "a union, not a sum (120,000)";
}

TEST(Hll, ExplicitHashesStaySortedAndTurnDenseAtTheirLimit) {
  int64_t hashes[4];
  uint64_t n = 0;
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 5), sc::HllAdd::kAdded);
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, -7), sc::HllAdd::kAdded);
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 9), sc::HllAdd::kAdded);
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 5), sc::HllAdd::kPresent);
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 0), sc::HllAdd::kAdded);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(std::vector<int64_t>(hashes, hashes + n), (std::vector<int64_t>{-7, 0, 5, 9}))
      << "signed order, as postgresql-hll stores them";
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 9), sc::HllAdd::kPresent) << "present when full";
  EXPECT_EQ(sc::HllExplicitAdd(hashes, &n, 4, 1), sc::HllAdd::kFull);
  EXPECT_EQ(n, 4u) << "a full set is left as it was";
}

TEST(Hll, ADenseAddSaysWhetherARegisterGrew) {
  HllShape s{11, 5, -1, true};
  std::vector<uint8_t> registers(sc::HllRegisterCount(s), 0);
  uint64_t hash = sc::HllHashBigint(42);
  EXPECT_TRUE(sc::HllDenseAdd(registers.data(), s, hash));
  EXPECT_FALSE(sc::HllDenseAdd(registers.data(), s, hash)) << "the same element again";
  std::vector<uint8_t> other(registers.size(), 0);
  EXPECT_TRUE(sc::HllDenseUnion(other.data(), registers.data(), s));
  EXPECT_FALSE(sc::HllDenseUnion(other.data(), registers.data(), s)) << "a union twice";
  EXPECT_EQ(other, registers);
}

TEST(Hll, StoredBytesThatAreNoSketchAreRefused) {
  uint8_t registers[2048];
  sc::HllRead read{};
  const uint8_t version2[] = {0x21, 0x8b, 0x7f};
  const uint8_t short_explicit[] = {0x12, 0x8b, 0x7f, 1, 2, 3};
  const uint8_t descending[] = {0x12, 0x8b, 0x7f, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t full_too_short[] = {0x14, 0x8b, 0x7f, 0};
  const uint8_t bad_type[] = {0x15, 0x8b, 0x7f};
  const uint8_t small_log2m[] = {0x11, 0x83, 0x7f};
  EXPECT_FALSE(sc::HllReadStored(version2, 3, registers, 2048, &read));
  EXPECT_FALSE(sc::HllReadStored(short_explicit, 6, registers, 2048, &read));
  EXPECT_FALSE(sc::HllReadStored(descending, sizeof(descending), registers, 2048, &read));
  EXPECT_FALSE(sc::HllReadStored(full_too_short, 4, registers, 2048, &read));
  EXPECT_FALSE(sc::HllReadStored(bad_type, 3, registers, 2048, &read));
  EXPECT_FALSE(sc::HllReadStored(small_log2m, 3, registers, 2048, &read));
  const uint8_t big[] = {0x14, 0x8e, 0x7f};
  EXPECT_FALSE(sc::HllReadStored(big, 3, registers, 2048, &read)) << "16,384 registers > 2,048";
}

TEST(Hll, ASlotIsTheLowBitsAndTheTrailingZerosOfTheRest) {
  HllShape s{4, 3, -1, true};
  EXPECT_EQ(sc::HllSlotOf(0x35, s).index, 5u);
  EXPECT_EQ(sc::HllSlotOf(0x35, s).value, 1) << "rest 0b11: no trailing zero";
  EXPECT_EQ(sc::HllSlotOf(0x85, s).value, 4) << "rest 0b1000";
  EXPECT_EQ(sc::HllSlotOf(0x05, s).value, 0) << "rest all zero";
  EXPECT_EQ(sc::HllSlotOf(uint64_t(1) << 63, s).value, 7) << "capped at 2^regwidth - 1";
}

}  // namespace
