// Tests of the filter of stored keys and request ids (src/core/stored_filter.hpp): it never answers
// "never stored" for a key added since its last rebuild began, nor while it is not valid, nor for
// another table; an invalidation during a rebuild keeps it invalid; one rebuilder at a time; a
// reader that a rebuild overtook answers "maybe".
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/stored_filter.hpp"

namespace {

constexpr uint32_t kDb = 5;
constexpr uint32_t kTable = 16384;
constexpr int32_t kFlusher = 101;

class StoredFilterTest : public ::testing::Test {
 protected:
  explicit StoredFilterTest(uint64_t words = 1024) : words_(words) {
    sc::InitStoredFilter(f_, words_.data(), words);
  }
  static uint64_t H(int64_t key, int32_t counter = 1, int64_t bucket = sc::kNoBucket) {
    return sc::StoredKeyHash(counter, key, bucket);
  }
  // A rebuild from `keys`, as the flusher's scan makes one.
  bool Rebuild(const std::vector<int64_t>& keys, uint32_t table = kTable) {
    uint64_t token;
    if (!sc::BeginRebuild(f_, kFlusher, &token)) return false;
    for (int64_t k : keys) sc::AddStored(f_, H(k));
    return sc::FinishRebuild(f_, kFlusher, token, kDb, table);
  }
  bool May(int64_t key, uint32_t table = kTable, uint32_t db = kDb) {
    return sc::MayBeStored(f_, H(key), db, table);
  }
  int NeverStored(int from, int to) {
    int n = 0;
    for (int k = from; k < to; k++) n += May(k) ? 0 : 1;
    return n;
  }
  std::vector<std::atomic<uint64_t>> words_;
  sc::StoredFilter f_;
};

TEST(StoredFilterWords, APowerOfTwoThatFits) {
  EXPECT_EQ(sc::StoredFilterWords(0), 0u);
  EXPECT_EQ(sc::StoredFilterWords(7), 0u);
  EXPECT_EQ(sc::StoredFilterWords(8), 1u);
  EXPECT_EQ(sc::StoredFilterWords(2048 * 1024), 262144u);
  EXPECT_EQ(sc::StoredFilterWords(3000 * 1024), 262144u);
}

TEST_F(StoredFilterTest, AnswersNothingUntilRebuilt) {
  for (int k = 0; k < 100; k++) EXPECT_TRUE(May(k)) << "never rebuilt: every key may be stored";
  EXPECT_FALSE(sc::StoredFilterValid(f_));
  ASSERT_TRUE(Rebuild({}));
  EXPECT_TRUE(sc::StoredFilterValid(f_));
  EXPECT_EQ(NeverStored(0, 100), 100) << "an empty table holds no key";
}

TEST_F(StoredFilterTest, AKeyAddedOrScannedMayBeStored) {
  ASSERT_TRUE(Rebuild({1, 2, 3}));
  for (int k = 1; k <= 3; k++) EXPECT_TRUE(May(k));
  sc::AddStored(f_, H(5000));
  EXPECT_TRUE(May(5000)) << "a key an insert trigger added";
  EXPECT_GT(NeverStored(10, 1010), 950) << "few false maybes with 64 Kbit for four keys";
}

TEST_F(StoredFilterTest, CounterAndBucketAreOfTheKey) {
  ASSERT_TRUE(Rebuild({}));
  sc::AddStored(f_, H(7, 2));
  sc::AddStored(f_, H(8, 1, 1000));
  EXPECT_TRUE(sc::MayBeStored(f_, H(7, 2), kDb, kTable));
  EXPECT_TRUE(sc::MayBeStored(f_, H(8, 1, 1000), kDb, kTable));
  EXPECT_NE(H(7, 2), H(7, 1));
  EXPECT_NE(H(8, 1, 1000), H(8, 1));
  EXPECT_NE(H(8, 1, 1000), H(8, 1, 2000));
}

TEST_F(StoredFilterTest, ARequestIdIsNotAKeyOfTheSameHash) {
  ASSERT_TRUE(Rebuild({}));
  uint64_t id_hash = 12345;
  sc::AddStored(f_, sc::StoredRequestHash(1, id_hash));
  EXPECT_TRUE(sc::MayBeStored(f_, sc::StoredRequestHash(1, id_hash), kDb, kTable));
  EXPECT_NE(sc::StoredRequestHash(1, id_hash), H(int64_t(id_hash)));
  EXPECT_NE(sc::StoredRequestHash(1, id_hash), sc::StoredRequestHash(2, id_hash));
}

TEST_F(StoredFilterTest, AnotherDatabaseOrTableIsNeverAnswered) {
  ASSERT_TRUE(Rebuild({}));
  EXPECT_FALSE(May(42));
  EXPECT_TRUE(May(42, kTable + 1)) << "a re-created extension's table";
  EXPECT_TRUE(May(42, kTable, kDb + 1)) << "another database's table of the same oid";
}

TEST_F(StoredFilterTest, AnInvalidationForgetsUntilTheNextRebuild) {
  ASSERT_TRUE(Rebuild({}));
  sc::InvalidateStored(f_);
  EXPECT_FALSE(sc::StoredFilterValid(f_));
  EXPECT_TRUE(May(42));
  ASSERT_TRUE(Rebuild({}));
  EXPECT_FALSE(May(42));
}

TEST_F(StoredFilterTest, AnInvalidationDuringARebuildKeepsItInvalid) {
  uint64_t token;
  ASSERT_TRUE(sc::BeginRebuild(f_, kFlusher, &token));
  sc::InvalidateStored(f_);  // sc_rebuild_counter_totals, a TRUNCATE, meanwhile
  EXPECT_FALSE(sc::FinishRebuild(f_, kFlusher, token, kDb, kTable));
  EXPECT_FALSE(sc::StoredFilterValid(f_));
  EXPECT_TRUE(May(42));
  EXPECT_TRUE(Rebuild({})) << "the rebuild was given back: the next one may run";
}

TEST_F(StoredFilterTest, ARebuildClearsAndOneRebuilderAtATime) {
  ASSERT_TRUE(Rebuild({1}));
  EXPECT_TRUE(May(1));
  uint64_t token, other;
  ASSERT_TRUE(sc::BeginRebuild(f_, kFlusher, &token));
  EXPECT_FALSE(sc::BeginRebuild(f_, kFlusher + 1, &other)) << "a second clear would wipe a scan";
  EXPECT_TRUE(May(1)) << "invalid while rebuilt";
  EXPECT_TRUE(sc::FinishRebuild(f_, kFlusher, token, kDb, kTable));
  EXPECT_FALSE(May(1)) << "the row is gone: the scan did not see it";
  ASSERT_TRUE(sc::BeginRebuild(f_, kFlusher, &token));
  sc::AbandonRebuild(f_, kFlusher + 1);
  EXPECT_FALSE(sc::BeginRebuild(f_, kFlusher + 1, &other)) << "only its rebuilder gives it up";
  sc::AbandonRebuild(f_, kFlusher);
  EXPECT_TRUE(sc::BeginRebuild(f_, kFlusher + 1, &other));
}

TEST_F(StoredFilterTest, AReaderOvertakenByARebuildSaysMaybe) {
  ASSERT_TRUE(Rebuild({1}));
  // What a reader between its two reads of the state would see: the rebuild moved it.
  uint64_t before = f_.state.load();
  uint64_t token;
  ASSERT_TRUE(sc::BeginRebuild(f_, kFlusher, &token));
  EXPECT_NE(f_.state.load(), before);
  EXPECT_EQ(f_.words[(H(1) >> 32) & f_.word_mask].load(), 0u) << "the word was cleared";
  EXPECT_TRUE(May(1));
  sc::AbandonRebuild(f_, kFlusher);
}

class OneWordFilterTest : public StoredFilterTest {
 protected:
  OneWordFilterTest() : StoredFilterTest(1) {}
};

TEST_F(OneWordFilterTest, AKeyWhoseBitsOthersSetInPartIsAddedWhole) {
  ASSERT_TRUE(Rebuild({}));
  for (int k = 0; k < 12; k++) {
    sc::AddStored(f_, H(k));
    EXPECT_TRUE(May(k)) << "key " << k;
  }
}

class NoStoredFilterTest : public StoredFilterTest {
 protected:
  NoStoredFilterTest() : StoredFilterTest(0) {}
};

TEST_F(NoStoredFilterTest, WithoutWordsEveryKeyMayBeStored) {
  EXPECT_FALSE(Rebuild({}));
  sc::AddStored(f_, H(1));
  EXPECT_TRUE(May(2));
}

}  // namespace
