// remote.hpp: the router's own connections to its data nodes (remote.cpp), for the calls it
// routes without PL/Proxy (routed.cpp).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace sc_proxy {

// What the router sends itself, each prepared once per connection. Keys and counter names go as
// text, bigints and timestamps in binary; the one bigint each returns comes back in binary.
enum class Statement : int {
  kIncr,        // sc_incr(counter, key bigint, delta)
  kIncrAt,      // sc_incr(counter, key bigint, delta, at)
  kIncrText,    // sc_incr(counter, key text, delta)
  kIncrTextAt,  // sc_incr(counter, key text, delta, at)
  kSum,         // sc_sum(counter, key bigint)
  kSumText,     // sc_sum(counter, key text)
  kCount,       // how many there are (remote.cpp's statements and local.cpp's functions)
};

// One call: its statement and arguments (a counter name and a text key are text; a bigint key,
// a delta and a time are int8 and timestamptz Datums).
struct Call {
  Statement statement;
  int nargs;
  Datum args[4];
  bool nulls[4];
};

// The number of data nodes: the partitions p0 .. pN-1 of the router's foreign server, which
// PL/Proxy routes over too. 55000 without a server.
int NodeCount();

// Node `node`'s string, as sc_proxy_configure was given it (without a user).
const char* NodeString(int node);

// Runs `call` on each of nodes[0 .. count) as the current role: a node that is this very database
// (a router installed beside slotted_counter, see local.cpp) is called in-process first, then the
// call is sent to every remote node at once, then every answer read. results[i] and nulls[i] are
// node nodes[i]'s bigint. A remote node's error is raised, with its SQLSTATE, once every node has
// answered. `write`: the call changes a count, so a connection lost after it was sent may have
// applied it (the error says so; it is not retried).
void RunOnNodes(const Call& call, const int* nodes, int count, bool write, int64* results,
                bool* nulls);

// Whether node `node` is this database itself (asked once per backend and configuration).
bool NodeIsLocal(int node);

// The local node's slotted_counter function for `call`, called in this transaction as the current
// role (local.cpp).
Datum CallLocal(const Call& call, bool* isnull);

}  // namespace sc_proxy
