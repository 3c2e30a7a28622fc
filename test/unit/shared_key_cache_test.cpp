// Tests of the ids of text keys that the backends share (src/core/shared_key_cache.hpp): a slot
// answers only for its own database, counter, exact text and catalog epoch, whatever its hash
// shares with others; a full set forgets (a stale slot first), never answers wrongly; a purge
// forgets a counter's or a database's keys and nothing else.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/shared_key_cache.hpp"
#include "test_support.hpp"

namespace {

using sc_test::StdLocks;

using sc::kKeySetWays;
using sc::kSharedKeyText;
using sc::SharedKeySlot;

constexpr uint32_t kSets = 16;  // the fewest: one set per lock

class SharedKeyCacheTest : public ::testing::Test {
 protected:
  SharedKeyCacheTest() : slots_(kSets * kKeySetWays), cache_(slots_.data(), kSets, StdLocks()) {}

  int64_t Find(uint32_t db, int32_t counter, uint64_t hash, const std::string& text,
               uint64_t epoch = 1) {
    return cache_.Find(db, counter, hash, text.data(), uint32_t(text.size()), epoch);
  }
  void Insert(uint32_t db, int32_t counter, uint64_t hash, const std::string& text, int64_t id,
              uint64_t epoch = 1) {
    cache_.Insert(db, counter, hash, text.data(), uint32_t(text.size()), epoch, id);
  }

  std::vector<SharedKeySlot> slots_;
  sc::SharedKeyCache<StdLocks> cache_;
};

TEST_F(SharedKeyCacheTest, AnEmptyCacheFindsNothing) {
  EXPECT_EQ(Find(5, 1, 42, "/home"), 0);
  EXPECT_EQ(Find(5, 1, 0, ""), 0);
}

TEST_F(SharedKeyCacheTest, AKeyIsFoundOnlyAsItWasShared) {
  Insert(5, 1, 42, "/home", 7);
  EXPECT_EQ(Find(5, 1, 42, "/home"), 7);
  EXPECT_EQ(Find(6, 1, 42, "/home"), 0) << "another database";
  EXPECT_EQ(Find(5, 2, 42, "/home"), 0) << "another counter";
  EXPECT_EQ(Find(5, 1, 42, "/homE"), 0) << "another text of the same hash";
  EXPECT_EQ(Find(5, 1, 42, "/home/"), 0) << "a longer text of the same hash";
  EXPECT_EQ(Find(5, 1, 42, "/home", 2), 0) << "after a drop moved the epoch";
}

TEST_F(SharedKeyCacheTest, AHashOfZeroIsAKeyLikeAnother) {
  Insert(5, 1, 0, "/zero", 3);
  EXPECT_EQ(Find(5, 1, 0, "/zero"), 3);
  Insert(5, 1, 1, "/one", 4);  // 0 is stored as 1: both live in one set
  EXPECT_EQ(Find(5, 1, 0, "/zero"), 3);
  EXPECT_EQ(Find(5, 1, 1, "/one"), 4);
}

TEST_F(SharedKeyCacheTest, ALongTextIsNotShared) {
  std::string longest(kSharedKeyText, 'x'), longer(kSharedKeyText + 1, 'x');
  Insert(5, 1, 9, longest, 11);
  Insert(5, 1, 10, longer, 12);
  EXPECT_EQ(Find(5, 1, 9, longest), 11);
  EXPECT_EQ(Find(5, 1, 10, longer), 0);
}

TEST_F(SharedKeyCacheTest, SharingAKeyTwiceTakesOneSlot) {
  // Nine keys of one set (the same low bits), the first shared twice: the eight distinct ones fit.
  for (int i = 0; i < int(kKeySetWays); i++) {
    Insert(5, 1, uint64_t(i) << 32 | 3, "/k" + std::to_string(i), i + 1);
    if (i == 0) Insert(5, 1, 3, "/k0", 1);
  }
  for (int i = 0; i < int(kKeySetWays); i++)
    EXPECT_EQ(Find(5, 1, uint64_t(i) << 32 | 3, "/k" + std::to_string(i)), i + 1) << i;
}

TEST_F(SharedKeyCacheTest, AFullSetForgetsAStaleSlotFirstAndNeverAnswersWrongly) {
  for (int i = 0; i < int(kKeySetWays); i++)
    Insert(5, 1, uint64_t(i) << 32 | 3, "/k" + std::to_string(i), i + 1, i == 4 ? 1 : 2);
  // Slot 4 was filled under epoch 1: a new key of epoch 2 takes it.
  Insert(5, 1, uint64_t(100) << 32 | 3, "/new", 100, 2);
  EXPECT_EQ(Find(5, 1, uint64_t(100) << 32 | 3, "/new", 2), 100);
  for (int i = 0; i < int(kKeySetWays); i++) {
    if (i == 4) continue;
    EXPECT_EQ(Find(5, 1, uint64_t(i) << 32 | 3, "/k" + std::to_string(i), 2), i + 1);
  }
  // With no stale slot, another key replaces one; every key still found has its own id.
  Insert(5, 1, uint64_t(200) << 32 | 3, "/newer", 200, 2);
  EXPECT_EQ(Find(5, 1, uint64_t(200) << 32 | 3, "/newer", 2), 200);
  int found = 0;
  for (int i = 0; i < int(kKeySetWays); i++) {
    int64_t id = Find(5, 1, uint64_t(i) << 32 | 3, "/k" + std::to_string(i), 2);
    if (id != 0) {
      EXPECT_EQ(id, i + 1);
      found++;
    }
  }
  EXPECT_EQ(found + (Find(5, 1, uint64_t(100) << 32 | 3, "/new", 2) != 0 ? 1 : 0),
            int(kKeySetWays) - 1);
}

TEST_F(SharedKeyCacheTest, APurgeForgetsItsCounterOrDatabaseOnly) {
  Insert(5, 1, 40, "/a", 1);
  Insert(5, 2, 41, "/a", 2);
  Insert(6, 1, 42, "/a", 3);
  cache_.Purge(5, 1);
  EXPECT_EQ(Find(5, 1, 40, "/a"), 0);
  EXPECT_EQ(Find(5, 2, 41, "/a"), 2);
  EXPECT_EQ(Find(6, 1, 42, "/a"), 3);
  cache_.Purge(6, 0);
  EXPECT_EQ(Find(6, 1, 42, "/a"), 0);
  EXPECT_EQ(Find(5, 2, 41, "/a"), 2);
}

TEST(SharedKeySets, APowerOfTwoWithRoomForTheKeys) {
  EXPECT_EQ(sc::SharedKeySets(0), sc::kKeyCacheLocks);
  EXPECT_EQ(sc::SharedKeySets(65536), 65536 / kKeySetWays);
  EXPECT_EQ(sc::SharedKeySets(65537), 2 * 65536 / kKeySetWays);
}

}  // namespace
