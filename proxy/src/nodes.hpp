// nodes.hpp: the router's data nodes (nodes.cpp): their strings as the router's foreign server
// holds them (each ending with the settings of core/node_options.hpp), what this backend knows of
// each (is it this very database?), and the checks of a node string.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace sc_proxy {

// The number of data nodes: the partitions p0 .. pN-1 of the router's foreign server, which
// PL/Proxy routes over too. 55000 without a server.
int NodeCount();

// Node `node`'s string as the router connects with it: the one sc_proxy_configure was given,
// then the router's settings (no user: the connection adds the current role's).
const char* NodeString(int node);

// Whether a node is this database, found out at the first connection to it (remote.cpp); every
// node is unknown again when the node strings change.
enum class Locality : char { kUnknown, kRemote, kLocal };
Locality NodeLocality(int node);
void SetNodeLocality(int node, Locality locality);

// What a node answers about itself, four binary columns: its cluster's system identifier, its
// database's OID, its postmaster's start time, whether it is in recovery.
extern const char* const kIdentityQuery;

// Whether those four answer this database of this very server: a clone (pg_basebackup) shares
// the first two, and a standby the first two, but not the postmaster's start time.
bool IsThisDatabase(char* const* values, const int* lengths);

// The checks of a node string held by the router's foreign server as option `option`: 22023 for
// a password (every role reads the strings), 55000 unless it ends with the router's settings.
void CheckNodeString(const char* option, const char* connstr);

}  // namespace sc_proxy
