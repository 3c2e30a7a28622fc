// Tests of the ids that backends give new text keys (src/core/text_ids.hpp): a range gives its
// ids once each, only to its own database under its own epoch, asks for more when empty or at a
// quarter, and is refilled only when asked; the key writes say "quiet" only with no write open,
// and any write after a reading is seen.
#include <gtest/gtest.h>

#include <mutex>

#include "core/text_ids.hpp"

namespace {

using sc::kMaxTextIdRange;
using sc::kMinTextIdRange;

class TextIdsTest : public ::testing::Test {
 protected:
  TextIdsTest() { sc::EmptyTextIds(range_, mutex_); }
  int64_t Take(uint32_t db, uint64_t epoch, bool* low) {
    return sc::TakeTextId(range_, mutex_, db, epoch, low);
  }
  int64_t Wanted(uint32_t db = 5, uint64_t epoch = 1, bool after_requests = true) {
    return sc::TextIdsWanted(range_, mutex_, db, epoch, after_requests);
  }
  sc::TextIdRange range_;
  std::mutex mutex_;
};

TEST_F(TextIdsTest, AnEmptyRangeGivesNothingAndIsRefilledOnlyWhenAsked) {
  EXPECT_EQ(Wanted(), 0) << "no backend asked";
  bool low = false;
  EXPECT_EQ(Take(5, 1, &low), 0);
  EXPECT_TRUE(low) << "the taker asks the flusher";
  EXPECT_EQ(Wanted(5, 1, false), 0) << "empty: refilled only after the flusher served requests";
  EXPECT_EQ(Wanted(), kMinTextIdRange);
}

TEST_F(TextIdsTest, ARangeGivesEachIdOnceToItsDatabaseAndEpoch) {
  sc::RefillTextIds(range_, mutex_, 5, 1000, 8, 1);
  bool low;
  EXPECT_EQ(Take(6, 1, &low), 0) << "another database";
  EXPECT_EQ(Take(5, 2, &low), 0) << "another epoch: a dropped extension's sequence";
  EXPECT_EQ(Wanted(5, 2), kMinTextIdRange) << "asked, under a new epoch";
  sc::RefillTextIds(range_, mutex_, 5, 1000, 8, 1);
  int lows = 0;
  for (int64_t expected = 1000; expected < 1008; expected++) {
    EXPECT_EQ(Take(5, 1, &low), expected);
    lows += low;
  }
  EXPECT_EQ(lows, 1) << "a quarter left is said once";
  EXPECT_EQ(Take(5, 1, &low), 0);
  EXPECT_TRUE(low);
}

TEST_F(TextIdsTest, ARangeIsRefilledAtAQuarterWithTwiceWhatWasTaken) {
  sc::RefillTextIds(range_, mutex_, 5, 1, 4000, 1);
  bool low;
  for (int i = 0; i < 2999; i++) Take(5, 1, &low);
  EXPECT_EQ(Wanted(), 0) << "more than a quarter left";
  EXPECT_EQ(Take(5, 1, &low), 3000);
  EXPECT_TRUE(low);
  EXPECT_EQ(Wanted(5, 1, false), 6000) << "a quarter left: refilled whenever the flusher looks";
  EXPECT_EQ(Wanted(), 6000);
  sc::RefillTextIds(range_, mutex_, 5, 5000, 6000, 1);
  EXPECT_EQ(Wanted(), 0) << "refilled, not asked again";
  EXPECT_EQ(Take(5, 1, &low), 5000) << "what was left of the old range is skipped";
}

TEST_F(TextIdsTest, TheSizeStaysWithinItsBounds) {
  sc::RefillTextIds(range_, mutex_, 5, 1, 4, 1);
  bool low;
  for (int i = 0; i < 5; i++) Take(5, 1, &low);
  EXPECT_EQ(Wanted(), kMinTextIdRange);
  range_.taken = kMaxTextIdRange;
  EXPECT_EQ(Wanted(), kMaxTextIdRange);
}

TEST(KeyWrites, QuietOnlyWithNoWriteOpenAndAnyWriteOfTheGroupSeen) {
  sc::KeyWrites writes;
  sc::InitKeyWrites(writes);
  sc::KeyWritesSeen seen = sc::ReadKeyWrites(writes, 3);
  sc::KeyWritesSeen other = sc::ReadKeyWrites(writes, 4);
  EXPECT_TRUE(seen.Quiet());
  EXPECT_TRUE(sc::KeyWritesUnchanged(writes, 3, seen));
  sc::BeginKeyWrite(writes, 3);
  EXPECT_FALSE(sc::KeyWritesUnchanged(writes, 3, seen));
  EXPECT_TRUE(sc::KeyWritesUnchanged(writes, 4, other)) << "another group's write is not seen";
  EXPECT_TRUE(sc::ReadKeyWrites(writes, 4).Quiet());
  sc::KeyWritesSeen during = sc::ReadKeyWrites(writes, 3);
  EXPECT_FALSE(during.Quiet());
  sc::EndKeyWrite(writes, 3);
  EXPECT_FALSE(sc::KeyWritesUnchanged(writes, 3, during));
  sc::KeyWritesSeen after = sc::ReadKeyWrites(writes, 3);
  EXPECT_TRUE(after.Quiet());
  sc::NoteKeysWritten(writes, 3);
  EXPECT_FALSE(sc::KeyWritesUnchanged(writes, 3, after));
  EXPECT_TRUE(sc::ReadKeyWrites(writes, 3).Quiet());
}

TEST(KeyWrites, AGroupIsTheLockOfTheTextsSet) {
  // Whatever the number of sets (a multiple of the locks), a text's set is under the lock of
  // its group; a hash of 0 is kept as 1.
  EXPECT_EQ(sc::KeyWriteGroup(0), 1u);
  EXPECT_EQ(sc::KeyWriteGroup(1), 1u);
  EXPECT_EQ(sc::KeyWriteGroup(uint64_t(5) << 40 | 0x23), 3u);
  for (uint32_t sets : {16u, 64u, 1024u})
    for (uint64_t hash : {7ull, 0x1234567ull, 0xFFFFFFFFFFull})
      EXPECT_EQ((uint32_t(hash) & (sets - 1)) % sc::kKeyCacheLocks, sc::KeyWriteGroup(hash));
}

}  // namespace
