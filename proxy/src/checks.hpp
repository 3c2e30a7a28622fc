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

// The check at the entry of every routed call: 55000 in a session a router opened
// (CheckNotFromRouter), then 42501 unless the current role would reach the data nodes as itself
// (cached per role).
void CheckCaller();

// 55000 when this session was opened by a router (slotted_counter_proxy.hop): a call routed from
// it could come back to a router, and again.
void CheckNotFromRouter();

// 25006 in a read-only transaction: a routed write runs on its node in a session of its own, which
// is not read-only. `function` names the user's call, "sc_incr()".
void CheckWritable(const char* function);

// 25001 inside a transaction block, for `action` (sc_create, sc_drop, sc_alter_owner): they change
// the data nodes, which commit at once, and the router's catalog, which commits with the caller.
void CheckNotInBlock(const char* action);

// Moves with every change to roles, user mappings, foreign servers or wrappers: whatever a
// connection to a data node was made from.
uint64 CatalogGeneration();

// 25001 when the caller is inside a transaction block and has not set
// slotted_counter_proxy.allow_transaction_block: a transactional write of `counter` would commit
// on its node at once.
void CheckAutocommit(const char* counter);

}  // namespace sc_proxy
