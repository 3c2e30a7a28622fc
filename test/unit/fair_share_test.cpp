// fair_share_test.cpp: the one rule by which parties share a pool (src/core/fair_share.hpp),
// driven through the situations of each pool that uses it.
#include <gtest/gtest.h>

#include <vector>

#include "core/fair_share.hpp"

using sc::Holding;
using sc::ShareView;

namespace {

using Kind = sc::PoolKind;

ShareView View(const std::vector<Holding>& h, uint64_t asker, uint64_t capacity,
               Kind kind = Kind::kTakesBack) {
  return sc::ViewOf(h.data(), h.size(), asker, capacity, kind);
}

}  // namespace

TEST(FairShare, CapacityLessReserveOverParties) {
  EXPECT_EQ(sc::FairShare(32, 0, 1), 32u);
  EXPECT_EQ(sc::FairShare(32, 0, 3), 10u);
  EXPECT_EQ(sc::FairShare(128, 8, 2), 60u);
  EXPECT_EQ(sc::FairShare(4, 8, 2), 0u) << "a reserve beyond the capacity leaves no share";
  EXPECT_EQ(sc::FairShare(10, 0, 0), 10u) << "no party counts as one";
  EXPECT_EQ(sc::ReserveOf(128, Kind::kHeldUntilDone), 8u);
  EXPECT_EQ(sc::ReserveOf(128, Kind::kTakesBack), 0u);
  EXPECT_EQ(sc::ReserveOf(15, Kind::kHeldUntilDone), 0u) << "a sixteenth, rounded down";
}

TEST(FairShare, ViewCountsTheAskerAmongTheParties) {
  // A newcomer (holding nothing) counts itself in: 3 parties.
  ShareView v = View({{1, 20}, {2, 4}}, 3, 30);
  EXPECT_EQ(v.share, 10u);
  EXPECT_EQ(v.held, 0u);
  EXPECT_EQ(v.free, 6u);
  EXPECT_EQ(v.lacking, 6u) << "party 2 lacks 6 of its 10";
  // A holder is counted once; a party holding 0 is no party.
  v = View({{1, 20}, {2, 4}, {3, 0}}, 2, 30);
  EXPECT_EQ(v.share, 15u);
  EXPECT_EQ(v.held, 4u);
  EXPECT_EQ(v.lacking, 0u) << "party 1 is above its share, and the asker is not counted";
  // Holdings beyond the capacity (a smaller limit after a reload) leave nothing free.
  v = View({{1, 40}}, 2, 30);
  EXPECT_EQ(v.free, 0u);
}

TEST(FairShare, AboveShareIsStrictlyMore) {
  EXPECT_FALSE(sc::AboveShare(16, 16));
  EXPECT_TRUE(sc::AboveShare(17, 16));
}

// Rank slots: one database holds all 32; another asks.
TEST(FairShare, ANewcomerTakesBackFromAHolderAboveItsShare) {
  ShareView v = View({{1, 32}}, 2, 32);
  EXPECT_EQ(v.share, 16u);
  EXPECT_FALSE(sc::MayTakeFree(v, 1)) << "nothing is free";
  EXPECT_TRUE(sc::MayTakeBack(v, 1));
  EXPECT_TRUE(sc::AboveShare(32, v.share)) << "the holder of all gives one back";
  // The holder, asking again with 31 beside the newcomer's 1, is above its share: it takes
  // none back.
  ShareView h = View({{1, 31}, {2, 1}}, 1, 32);
  EXPECT_FALSE(sc::MayTakeBack(h, 1));
  // A free unit goes to anyone: whoever lacks takes it back when it needs it.
  h = View({{1, 30}, {2, 1}}, 1, 32);
  EXPECT_TRUE(sc::MayTakeFree(h, 1));
  // A party alone takes everything.
  EXPECT_TRUE(sc::MayTakeFree(View({{1, 31}}, 1, 32), 1));
  EXPECT_FALSE(sc::MayTakeBack(View({{1, 32}}, 1, 32), 1)) << "and has nobody to take from";
}

// Memory (bytes): an index of `want` bytes, taken back within the asker's share or refused.
TEST(FairShare, AWantOfManyUnits) {
  // 1,000 bytes, two databases: one holds 700, the other asks for 400.
  ShareView v = View({{1, 700}}, 2, 1000);
  EXPECT_FALSE(sc::MayTakeFree(v, 400)) << "300 free";
  EXPECT_TRUE(sc::MayTakeBack(v, 400)) << "within its 500";
  EXPECT_FALSE(sc::MayTakeBack(v, 600)) << "beyond its 500: refused, nothing taken back";
  EXPECT_TRUE(sc::MayTakeFree(v, 300)) << "what is free, anyone takes";
  // The holder asking for 200 more beside a small one: free, so taken.
  v = View({{1, 700}, {2, 10}}, 1, 1000);
  EXPECT_TRUE(sc::MayTakeFree(v, 200));
  EXPECT_FALSE(sc::MayTakeBack(v, 300)) << "above its share, it takes nothing back";
}

// Request ids: the flood takes all it may; a newcomer finds the reserve; once a party, the
// flood takes none of what it lacks.
TEST(FairShare, TheReserveKeepsUnitsForANewcomer) {
  const uint64_t capacity = 128;
  const Kind held = Kind::kHeldUntilDone;
  // Alone, the flood may hold all but the reserve.
  ShareView flood = View({{1, 119}}, 1, capacity, held);
  EXPECT_EQ(flood.share, 120u);
  EXPECT_TRUE(sc::MayTakeFree(flood, 1));
  flood = View({{1, 120}}, 1, capacity, held);
  EXPECT_FALSE(sc::MayTakeFree(flood, 1)) << "the last 8 are the reserve";
  EXPECT_FALSE(sc::MayTakeBack(flood, 1)) << "ids are never taken back";
  // A newcomer takes the reserve at once.
  ShareView quiet = View({{1, 120}}, 2, capacity, held);
  EXPECT_EQ(quiet.share, 60u);
  EXPECT_TRUE(sc::MayTakeFree(quiet, 1));
  EXPECT_TRUE(sc::MayTakeFree(quiet, 8));
  EXPECT_FALSE(sc::MayTakeFree(quiet, 9)) << "more than is free";
  // Units the flood gives back (its flush) go to the newcomer: the flood, above its share,
  // takes none while the newcomer lacks its share.
  flood = View({{1, 100}, {2, 8}}, 1, capacity, held);
  EXPECT_EQ(flood.free, 20u);
  EXPECT_EQ(flood.lacking, 52u);
  EXPECT_FALSE(sc::MayTakeFree(flood, 1));
  quiet = View({{1, 100}, {2, 8}}, 2, capacity, held);
  EXPECT_TRUE(sc::MayTakeFree(quiet, 20));
  // Each takes within its share, and nobody the reserve.
  flood = View({{1, 59}, {2, 60}}, 1, capacity, held);
  EXPECT_TRUE(sc::MayTakeFree(flood, 1));
  flood = View({{1, 60}, {2, 60}}, 1, capacity, held);
  EXPECT_FALSE(sc::MayTakeFree(flood, 1));
  // Beyond its share, a party takes what nobody below lacks: three parties of 40 usable units
  // (48 less the reserve of 3, shares of 15), one lacking 3.
  ShareView v = View({{1, 16}, {2, 12}, {3, 15}}, 1, 48, held);
  EXPECT_EQ(v.share, 15u);
  EXPECT_EQ(v.free, 5u);
  EXPECT_EQ(v.lacking, 3u);
  EXPECT_FALSE(sc::MayTakeFree(v, 1)) << "4 would stay free, 3 lacked and 3 reserved";
  v = View({{1, 16}, {2, 12}}, 1, 48, held);
  EXPECT_EQ(v.share, 22u);
  EXPECT_TRUE(sc::MayTakeFree(v, 6)) << "within its share";
  EXPECT_TRUE(sc::MayTakeFree(v, 7)) << "one beyond it: 13 stay free, 10 lacked, 3 reserved";
  EXPECT_FALSE(sc::MayTakeFree(v, 8));
}
