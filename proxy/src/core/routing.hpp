// routing.hpp: the data node a hash goes to, as PL/Proxy picks it for a cluster with
// modular_mapping (its src/execute.c, tag_part): abs(hash % nodes), in 64-bit arithmetic. The
// router's own routing (routed.cpp) and PL/Proxy's must agree to the key, or one key's calls
// would land on two nodes. Pure: no PostgreSQL header; test/unit/routing_test.cpp drives it.
#pragma once

#include <cstdint>

namespace sc_proxy {

// hash: a RUN ON value (hashint8, hashtext: int4); nodes: the cluster's partitions, > 0.
inline int NodeOfHash(int32_t hash, int nodes) {
  int64_t wide = hash;
  int64_t node = wide % nodes;
  return static_cast<int>(node < 0 ? -node : node);
}

}  // namespace sc_proxy
