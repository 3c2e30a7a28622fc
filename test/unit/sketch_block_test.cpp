// Unit tests for a resident sketch (src/core/sketch_block.hpp): its explicit form exact until its
// limit, the promotion to registers, what an add answers, copies, unions with stored sketches, and
// `changes` for the flush. Its concurrent adds: sketch_block_threads_test.cpp.
#include "core/sketch_block.hpp"
#include "core/murmur3.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace {

using sc::HllShape;
using sc::SketchBlock;

constexpr HllShape kShape{14, 5, -1, true};  // the distinct counters' default

struct Block {
  std::unique_ptr<SketchBlock> b = std::make_unique<SketchBlock>();
  std::mutex mutex;
  explicit Block(const HllShape& s = kShape) { EXPECT_TRUE(sc::InitSketchBlock(*b, s)); }
  bool Add(int64_t element) { return sc::SketchAdd(*b, mutex, sc::HllHashBigint(element)); }
};

// Room for a copy's hashes, and for its registers.
std::vector<int64_t> Hashes() { return std::vector<int64_t>(sc::HllExplicitLimit(kShape)); }
std::vector<uint8_t> Registers() { return std::vector<uint8_t>(sc::HllRegisterCount(kShape)); }

std::vector<uint8_t> Registers(const HllShape& s, int64_t from, int64_t to) {
  std::vector<uint8_t> registers(sc::HllRegisterCount(s), 0);
  for (int64_t v = from; v <= to; v++)
    (void)sc::HllDenseAdd(registers.data(), s, sc::HllHashBigint(v));
  return registers;
}

TEST(SketchBlock, SmallSetsAreExactThenTurnToRegisters) {
  Block k;
  uint64_t limit = sc::HllExplicitLimit(kShape);
  EXPECT_EQ(limit, 1280u) << "10 KiB of registers hold 1,280 hashes";
  for (int64_t v = 1; v <= int64_t(limit); v++) EXPECT_TRUE(k.Add(v));
  EXPECT_FALSE(k.Add(7)) << "an element again changes nothing";
  EXPECT_EQ(k.b->form.load(), sc::kSketchExplicit);
  EXPECT_EQ(k.b->count, limit);
  EXPECT_TRUE(k.Add(int64_t(limit) + 1)) << "one past the limit: the form changes";
  EXPECT_EQ(k.b->form.load(), sc::kSketchDense);
  std::vector<uint8_t> copy(sc::HllRegisterCount(kShape));
  bool dense = false;
  uint64_t count = 1;
  (void)sc::SketchCopy(*k.b, k.mutex, &dense, Hashes().data(), &count, copy.data());
  EXPECT_TRUE(dense);
  EXPECT_EQ(copy, Registers(kShape, 1, int64_t(limit) + 1)) << "every hash in its register";
}

TEST(SketchBlock, AnExplicitCopyIsTheSortedHashesAndChangesCountTheAdds) {
  Block k;
  uint64_t before = k.b->changes.load();
  EXPECT_TRUE(k.Add(3));
  EXPECT_TRUE(k.Add(1));
  EXPECT_FALSE(k.Add(3));
  std::vector<int64_t> hashes(sc::HllExplicitLimit(kShape));
  bool dense = true;
  uint64_t count = 0;
  uint64_t changes =
      sc::SketchCopy(*k.b, k.mutex, &dense, hashes.data(), &count, Registers().data());
  EXPECT_FALSE(dense);
  ASSERT_EQ(count, 2u);
  std::vector<int64_t> want{int64_t(sc::HllHashBigint(1)), int64_t(sc::HllHashBigint(3))};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(std::vector<int64_t>(hashes.begin(), hashes.begin() + 2), want);
  EXPECT_EQ(changes, before + 2) << "two adds changed the set, the repeat did not";
}

TEST(SketchBlock, AUnionWithAStoredSketchIsTheRegistersMaximum) {
  Block k;
  for (int64_t v = 1; v <= 100; v++) (void)k.Add(v);
  // A stored dense sketch of 2,001..40,000, read back as the flush reads a row.
  std::vector<uint8_t> stored_registers = Registers(kShape, 2001, 40000);
  uint64_t filled = 0;
  for (uint8_t r : stored_registers) filled += r != 0;
  bool sparse;
  std::vector<uint8_t> row(sc::HllDenseBytes(kShape, filled, &sparse), 0);
  sc::HllWriteDense(stored_registers.data(), kShape, row.data());
  std::vector<uint8_t> read_registers(sc::HllRegisterCount(kShape));
  sc::HllRead read{};
  ASSERT_TRUE(sc::HllReadStored(row.data(), row.size(), read_registers.data(),
                                read_registers.size(), &read));
  EXPECT_TRUE(sc::SketchUnion(*k.b, k.mutex, read, read_registers.data()));
  EXPECT_FALSE(sc::SketchUnion(*k.b, k.mutex, read, read_registers.data())) << "idempotent";
  std::vector<uint8_t> copy(sc::HllRegisterCount(kShape));
  bool dense;
  uint64_t count;
  (void)sc::SketchCopy(*k.b, k.mutex, &dense, Hashes().data(), &count, copy.data());
  std::vector<uint8_t> want = Registers(kShape, 1, 100);
  EXPECT_TRUE(sc::HllDenseUnion(want.data(), stored_registers.data(), kShape));
  EXPECT_EQ(copy, want);
}

TEST(SketchBlock, AShapeABlockCannotHoldIsRefused) {
  auto b = std::make_unique<SketchBlock>();
  EXPECT_FALSE(sc::InitSketchBlock(*b, HllShape{15, 5, -1, true})) << "32 KiB of registers";
  EXPECT_FALSE(sc::InitSketchBlock(*b, HllShape{14, 5, 4096, true})) << "32 KiB of hashes";
  EXPECT_FALSE(sc::InitSketchBlock(*b, HllShape{3, 5, -1, true}));
  EXPECT_TRUE(sc::InitSketchBlock(*b, HllShape{11, 5, -1, true}));
}

}  // namespace
