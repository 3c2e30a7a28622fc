// Tests of a backend's cache of text keys' ids (src/core/key_cache.hpp): a text is found only
// for its own counter and exact bytes, whatever its hash shares with others, and the cache says
// it is full before a probe could run without end.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/key_cache.hpp"

namespace {

using sc::CachedKey;
using sc::KeyCache;

class KeyCacheTest : public ::testing::Test {
 protected:
  // The texts' vector never grows past its reserve: the cache keeps pointers into it.
  KeyCacheTest() : slots_(16) {
    texts_.reserve(64);
    cache_.Reset(slots_.data(), 16);
  }

  int64_t Find(int32_t counter, uint64_t hash, const std::string& text) {
    return cache_.Find(counter, hash, text.data(), uint32_t(text.size()));
  }
  void Insert(int32_t counter, uint64_t hash, const std::string& text, int64_t id) {
    texts_.push_back(text);
    cache_.Insert(counter, hash, texts_.back().data(), uint32_t(texts_.back().size()), id);
  }

  std::vector<CachedKey> slots_;
  std::vector<std::string> texts_;
  KeyCache cache_;
};

TEST_F(KeyCacheTest, AnEmptyCacheFindsNothing) {
  EXPECT_TRUE(cache_.Ready());
  EXPECT_EQ(Find(1, 42, "/home"), 0);
  EXPECT_EQ(cache_.size(), 0u);
}

TEST_F(KeyCacheTest, ATextIsFoundForItsCounterAndBytesOnly) {
  Insert(1, 42, "/home", 7);
  EXPECT_EQ(Find(1, 42, "/home"), 7);
  EXPECT_EQ(Find(2, 42, "/home"), 0) << "another counter's key of the same text";
  EXPECT_EQ(Find(1, 42, "/home "), 0) << "a trailing space is another key";
  EXPECT_EQ(Find(1, 42, "/Home"), 0);
  EXPECT_EQ(Find(1, 42, "/hom"), 0) << "a prefix is another key";
}

TEST_F(KeyCacheTest, TextsThatShareAHashAreTold) {
  Insert(1, 5, "a", 1);
  Insert(1, 5, "b", 2);
  Insert(2, 5, "a", 3);
  Insert(1, 5 + 16, "c", 4);  // the same first slot, another hash
  EXPECT_EQ(Find(1, 5, "a"), 1);
  EXPECT_EQ(Find(1, 5, "b"), 2);
  EXPECT_EQ(Find(2, 5, "a"), 3);
  EXPECT_EQ(Find(1, 21, "c"), 4);
  EXPECT_EQ(Find(1, 5, "c"), 0);
}

TEST_F(KeyCacheTest, AHashOfZeroIsAKeyLikeAnother) {
  Insert(1, 0, "", 9);
  EXPECT_EQ(Find(1, 0, ""), 9) << "the empty text is a key, and 0 a hash";
  EXPECT_EQ(Find(1, 1, "x"), 0);
}

TEST_F(KeyCacheTest, ItIsFullAtThreeQuartersSoAProbeAlwaysEnds) {
  int inserted = 0;
  while (!cache_.Full()) {
    Insert(1, 3, std::to_string(inserted), inserted + 1);  // every one in the same chain
    inserted++;
  }
  EXPECT_EQ(inserted, 12);
  EXPECT_EQ(cache_.size(), 12u);
  EXPECT_EQ(Find(1, 3, "absent"), 0) << "the chain ends at a free slot";
  for (int i = 0; i < inserted; i++) EXPECT_EQ(Find(1, 3, std::to_string(i)), i + 1);
}

TEST_F(KeyCacheTest, AResetEmptiesIt) {
  Insert(1, 42, "/home", 7);
  cache_.Reset(slots_.data(), 16);
  EXPECT_EQ(Find(1, 42, "/home"), 0);
  EXPECT_EQ(cache_.size(), 0u);
}

}  // namespace
