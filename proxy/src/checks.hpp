// checks.hpp: what every routed call checks before it reaches a data node. Defined in
// slotted_counter_proxy.cpp; called by slotted_counter_proxy.cluster() for PL/Proxy's calls and by
// the router's own routing (routed.cpp) for its hot calls, so that both obey one rule.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace sc_proxy {

// The router's foreign server: its cluster for PL/Proxy, its node strings for routed.cpp.
inline constexpr const char* kServer = "slotted_counter_proxy";

// The router's foreign server, its options and its wrapper's checked; 55000 if it is missing.
Oid CheckedServer();

// 42501 unless the current role would reach the data nodes as itself (cached per role).
void CheckCaller();

// Moves with every change to roles, user mappings, foreign servers or wrappers: whatever a
// connection to a data node was made from.
uint64 CatalogGeneration();

// 25001 when the caller is inside a transaction block and has not set
// slotted_counter_proxy.allow_transaction_block: a transactional write of `counter` would commit
// on its node at once.
void CheckAutocommit(const char* counter);

}  // namespace sc_proxy
