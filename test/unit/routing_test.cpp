// The router's node of a hash (proxy/src/core/routing.hpp) must be PL/Proxy's, with
// modular_mapping: abs(hash % nodes) (plproxy's src/execute.c, tag_part), which is also what the
// documentation gives users as the formula (docs/router.md, "Routing"). The two routings of the
// router (its own for sc_incr and sc_sum, PL/Proxy's for the rest) must agree on every key.
#include <cstdint>
#include <cstdlib>
#include <limits>

#include <gtest/gtest.h>

#include "core/routing.hpp"

namespace {

// PL/Proxy's computation, as it is written there: the int4 hash widened to int64.
int PlProxyNode(int32_t hash, int nodes) {
  int64_t h = hash;
  return static_cast<int>(h < 0 ? -(h % nodes) : h % nodes);
}

TEST(Routing, MatchesPlProxyOverEdgeHashes) {
  const int32_t hashes[] = {0, 1, -1, 2, -2, 41, -41, 1000003, -1000003,
                            std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::min() + 1};
  for (int nodes = 1; nodes <= 17; nodes++) {
    for (int32_t hash : hashes) {
      EXPECT_EQ(sc_proxy::NodeOfHash(hash, nodes), PlProxyNode(hash, nodes))
          << "hash " << hash << " over " << nodes << " nodes";
    }
  }
}

TEST(Routing, StaysWithinTheNodesAndIsTheAbsoluteRemainder) {
  uint32_t state = 12345;
  for (int i = 0; i < 100000; i++) {
    state = state * 1103515245u + 12345u;
    int32_t hash = static_cast<int32_t>(state);
    int nodes = 1 + static_cast<int>(state % 64);
    int node = sc_proxy::NodeOfHash(hash, nodes);
    ASSERT_GE(node, 0);
    ASSERT_LT(node, nodes);
    ASSERT_EQ(node, std::llabs(static_cast<int64_t>(hash) % nodes));
  }
}

TEST(Routing, OneNodeTakesEveryKey) {
  EXPECT_EQ(sc_proxy::NodeOfHash(std::numeric_limits<int32_t>::min(), 1), 0);
  EXPECT_EQ(sc_proxy::NodeOfHash(-7, 1), 0);
  EXPECT_EQ(sc_proxy::NodeOfHash(7, 1), 0);
}

}  // namespace
