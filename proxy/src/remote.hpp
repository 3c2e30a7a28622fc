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
};

// One call's parameters as libpq takes them (a NULL value is SQL's NULL).
struct Params {
  int count;
  const char* values[4];
  int lengths[4];
  int formats[4];
};

// The number of data nodes: the partitions p0 .. pN-1 of the router's foreign server, which
// PL/Proxy routes over too. 55000 without a server.
int NodeCount();

// Node `node`'s string, as sc_proxy_configure was given it (without a user).
const char* NodeString(int node);

// Sends `statement` to each of nodes[0 .. count) at once, as the current role, and waits for
// every answer: results[i] and nulls[i] are node nodes[i]'s bigint. A node's error is raised,
// with its SQLSTATE, once every node has answered. `write`: the call changes a count, so a
// connection lost after it was sent may have applied it (the error says so; it is not retried).
void RunOnNodes(Statement statement, const Params& params, const int* nodes, int count,
                bool write, int64* results, bool* nulls);

}  // namespace sc_proxy
