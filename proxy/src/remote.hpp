// remote.hpp: the router's own connections to its data nodes (remote.cpp), for the calls it
// routes without PL/Proxy (routed.cpp) and the questions its catalog asks (catalog.cpp).
#pragma once

extern "C" {
#include "postgres.h"

#include "libpq-fe.h"
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

// A statement for every node, with its parameters as libpq's PQsendQueryParams takes them, and
// the number of fields of the one row it answers.
struct Question {
  const char* sql;
  int nparams;
  const Oid* types;
  const char* const* values;
  const int* lengths;
  const int* formats;
  int nfields;
};

// What `question` answers on every node (answers[node][field]: text, nullptr for NULL), asked
// over the router's own connections as the current role, with the router's settings: over a
// connection for a node that is this database too, never in-process, so that every answer is a
// node session's that nothing of the role's own steers. A node's error is raised with its
// SQLSTATE once every node has answered.
char*** AskEveryNode(const Question& question);

// The local node's slotted_counter function for `call`, called in this transaction as the current
// role (local.cpp).
Datum CallLocal(const Call& call, bool* isnull);

// A cancel or termination PostgreSQL would act on now.
bool CancelOrDiePending();

// After the latch was set: a cancel or termination abandons every statement in flight (asks its
// node to cancel, closes the connection) first, then PostgreSQL raises it.
void ServeInterrupts();

// The settings slotted_counter_proxy.connect_timeout and max_connections_per_node (connect.cpp),
// defined when the library loads.
void DefineConnectionSettings();

// A new connection to node `node` as role `role` (the node string, the role's name, its user
// mapping's password), of which this session has `open_to_node` already: 53300 past
// max_connections_per_node, 08001 when the node refuses or does not answer within
// connect_timeout; interruptible.
PGconn* ConnectNode(int node, Oid role, int open_to_node);

}  // namespace sc_proxy
