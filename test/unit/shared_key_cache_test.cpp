// Tests of the ids of text keys that the backends share (src/core/shared_key_cache.hpp): a slot
// answers only for its own database, counter, exact text and catalog epoch, whatever its hash
// shares with others; a full set forgets (a stale slot first), never answers wrongly; a purge
// forgets a counter's or a database's keys and nothing else. An id a backend gives a new text
// (Give) is unwritten until marked written: found under any epoch, never forgotten for another
// key, read back by id; a second giver gets the first one's id.
#include <gtest/gtest.h>

#include <algorithm>
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

  sc::Given Give(uint32_t db, int32_t counter, uint64_t hash, const std::string& text, int64_t id,
                 uint64_t epoch = 1, bool valid = true) {
    return cache_.Give(db, counter, hash, text.data(), uint32_t(text.size()), epoch, id,
                       [valid] { return valid; });
  }
  // The text of an unwritten id, as a reader finds it among the unwritten slots.
  std::string TextOf(uint32_t db, int32_t counter, int64_t id) {
    std::string text = "<none>";
    cache_.ForEachUnwritten(db, [&](const SharedKeySlot& s) {
      if (s.counter == counter && s.id == id) text.assign(s.text, s.len);
    });
    return text;
  }
  int Unwritten(uint32_t db) {
    int n = 0;
    cache_.ForEachUnwritten(db, [&](const SharedKeySlot&) { n++; });
    return n;
  }

  std::vector<SharedKeySlot> slots_;
  sc::SharedKeyCache<StdLocks> cache_;
};

using sc::GiveResult;

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

TEST_F(SharedKeyCacheTest, TheFirstGiverWinsAndItsIdIsFoundUnderAnyEpoch) {
  sc::Given first = Give(5, 1, 42, "/new", 10);
  EXPECT_EQ(first.result, GiveResult::kGiven);
  EXPECT_EQ(first.id, 10);
  sc::Given second = Give(5, 1, 42, "/new", 11, 2);
  EXPECT_EQ(second.result, GiveResult::kFound);
  EXPECT_EQ(second.id, 10) << "a second giver takes the first one's id";
  EXPECT_EQ(Find(5, 1, 42, "/new", 1), 10);
  EXPECT_EQ(Find(5, 1, 42, "/new", 7), 10) << "an unwritten id matches under any epoch";
  EXPECT_EQ(Find(5, 2, 42, "/new"), 0) << "another counter";
  EXPECT_EQ(Find(6, 1, 42, "/new"), 0) << "another database";
  Insert(5, 1, 42, "/new", 12);
  EXPECT_EQ(Find(5, 1, 42, "/new"), 10) << "a share of the text leaves the given id";
}

TEST_F(SharedKeyCacheTest, AGiftNeedsTheCheckButAFoundIdDoesNot) {
  sc::Given refused = Give(5, 1, 42, "/a", 10, 1, false);
  EXPECT_EQ(refused.result, GiveResult::kChanged);
  EXPECT_EQ(Find(5, 1, 42, "/a"), 0) << "nothing filled";
  EXPECT_EQ(Give(5, 1, 42, "/a", 11).result, GiveResult::kGiven);
  sc::Given found = Give(5, 1, 42, "/a", 12, 1, false);
  EXPECT_EQ(found.result, GiveResult::kFound);
  EXPECT_EQ(found.id, 11);
  std::string longer(kSharedKeyText + 1, 'x');
  EXPECT_EQ(Give(5, 1, 43, longer, 13).result, GiveResult::kNoRoom) << "too long to share";
}

TEST_F(SharedKeyCacheTest, AnUnwrittenSlotIsNeverForgottenUntilMarkedWritten) {
  // A set full of given ids: a share is not kept, another gift finds no room, each stays.
  for (int i = 0; i < int(kKeySetWays); i++)
    EXPECT_EQ(Give(5, 1, uint64_t(i) << 32 | 3, "/g" + std::to_string(i), i + 1).result,
              GiveResult::kGiven);
  Insert(5, 1, uint64_t(50) << 32 | 3, "/shared", 50, 9);
  EXPECT_EQ(Find(5, 1, uint64_t(50) << 32 | 3, "/shared", 9), 0);
  EXPECT_EQ(Give(5, 1, uint64_t(51) << 32 | 3, "/more", 51, 9).result, GiveResult::kNoRoom);
  for (int i = 0; i < int(kKeySetWays); i++)
    EXPECT_EQ(Find(5, 1, uint64_t(i) << 32 | 3, "/g" + std::to_string(i), 9), i + 1) << i;
  EXPECT_EQ(Unwritten(5), int(kKeySetWays));
  // Written: it matches only its own epoch, and a new key may take its slot.
  cache_.MarkWritten(5, 1, uint64_t(2) << 32 | 3, 3);
  EXPECT_EQ(Unwritten(5), int(kKeySetWays) - 1);
  EXPECT_EQ(Find(5, 1, uint64_t(2) << 32 | 3, "/g2", 1), 3);
  EXPECT_EQ(Find(5, 1, uint64_t(2) << 32 | 3, "/g2", 9), 0);
  EXPECT_EQ(Give(5, 1, uint64_t(51) << 32 | 3, "/more", 51, 9).result, GiveResult::kGiven);
  EXPECT_EQ(Find(5, 1, uint64_t(2) << 32 | 3, "/g2", 1), 0) << "the written slot was the victim";
  for (int i = 0; i < int(kKeySetWays); i++) {
    if (i == 2) continue;
    EXPECT_EQ(Find(5, 1, uint64_t(i) << 32 | 3, "/g" + std::to_string(i), 9), i + 1) << i;
  }
}

TEST_F(SharedKeyCacheTest, UnwrittenIdsAreListedAndReadByIdUntilWritten) {
  Give(5, 1, 40, "/a", 1);
  Give(5, 2, 41, "/b", 2);
  Give(6, 1, 0, "/c", 3);  // a hash of 0, as the caches keep it
  Insert(5, 1, 43, "/d", 4);
  std::vector<int64_t> ids;
  cache_.ForEachUnwritten(5, [&](const SharedKeySlot& s) { ids.push_back(s.id); });
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2})) << "the database's given ids, not a shared one";
  EXPECT_EQ(TextOf(5, 1, 1), "/a");
  EXPECT_EQ(TextOf(5, 2, 2), "/b");
  EXPECT_EQ(TextOf(5, 2, 1), "<none>") << "another counter's id";
  EXPECT_EQ(TextOf(5, 1, 4), "<none>") << "a written id is read from the table";
  EXPECT_EQ(TextOf(6, 1, 3), "/c");
  cache_.MarkWritten(6, 1, 0, 3);
  EXPECT_EQ(TextOf(6, 1, 3), "<none>");
  EXPECT_EQ(Unwritten(6), 0);
  cache_.MarkWritten(5, 1, 40, 99);  // another id: nothing
  EXPECT_EQ(TextOf(5, 1, 1), "/a");
}

TEST_F(SharedKeyCacheTest, APurgeForgetsUnwrittenIdsToo) {
  Give(5, 1, 40, "/a", 1);
  Give(5, 2, 41, "/b", 2);
  cache_.Purge(5, 1);
  EXPECT_EQ(Find(5, 1, 40, "/a", 3), 0);
  EXPECT_EQ(Find(5, 2, 41, "/b", 3), 2);
  cache_.Purge(5, 0);
  EXPECT_EQ(Unwritten(5), 0);
}

TEST(SharedKeySets, APowerOfTwoWithRoomForTheKeys) {
  EXPECT_EQ(sc::SharedKeySets(0), sc::kKeyCacheLocks);
  EXPECT_EQ(sc::SharedKeySets(65536), 65536 / kKeySetWays);
  EXPECT_EQ(sc::SharedKeySets(65537), 2 * 65536 / kKeySetWays);
}

}  // namespace
