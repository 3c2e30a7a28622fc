// remote.cpp: the router's own connections to its data nodes, for the calls it routes without
// PL/Proxy (routed.cpp: sc_incr and sc_sum, the hot ones). PL/Proxy sends each call as a new
// unprepared statement, which costs the node a parse and a plan per call and the router most of a
// call's CPU; here a backend keeps one connection per (data node, role) for the session and sends
// statements prepared once per connection, with binary bigints.
//
// A role reaches a node as itself, as through PL/Proxy: the connection is opened as the current
// role (user=<its name>), with the node string of the router's foreign server and the password of
// the role's user mapping (or PUBLIC's), after checks.hpp's CheckCaller has accepted them. The
// node string ends with the router's settings (nodes.cpp: search_path pinned, the hop), and every
// statement sent names its operators, functions and types so that they resolve to pg_catalog's
// and slotted_counter's only: nothing of the role's own on the node (its default search_path, its
// schemas, its temporary objects) takes part, and nothing leads back to a router. A connection is
// dropped at its next use when a role, a user mapping, the server or its wrapper changed
// (CatalogGeneration), when the node closed it (a poll of the idle socket), or when an error left
// it in the middle of a statement.
//
// Waiting is interruptible: a backend waits on the node's socket and its own latch. On a cancel
// or termination it asks the node to cancel (PQcancel), closes the connection, then lets
// PostgreSQL raise the interrupt, so no connection is ever left with a statement in flight. A
// node's error is raised here with its SQLSTATE, message, detail and hint, after every node of the
// call has answered. No shared memory, no locks: every structure is this backend's.

#include <poll.h>

extern "C" {
#include "postgres.h"

#include "common/string.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "port/pg_bswap.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"
}

#include "compat.hpp"
#include "checks.hpp"
#include "nodes.hpp"
#include "remote.hpp"

namespace sc_proxy {
namespace {

// How an argument goes to a node: text as its bytes, a bigint or timestamptz as 8 bytes in network
// order (the binary forms of both).
enum class Arg { kText, kInt64 };

struct StatementText {
  const char* name;
  const char* sql;
  int params;
  Arg args[4];
};

// Indexed by Statement. sc_incr and sc_sum resolve on the node's pinned search_path
// (pg_catalog, slotted_counter's schema, pg_temp), and the counter is cast to slotted_counter's
// own type, so that each call is slotted_counter's function of exactly those argument types.
constexpr Arg T = Arg::kText;
constexpr Arg I = Arg::kInt64;
#define SC_COUNTER "$1::pg_catalog.text::slotted_counter"
constexpr StatementText kStatements[] = {
    {"sc_proxy_incr", "SELECT sc_incr(" SC_COUNTER ", $2::pg_catalog.int8, $3::pg_catalog.int8)",
     3, {T, I, I}},
    {"sc_proxy_incr_at",
     "SELECT sc_incr(" SC_COUNTER ", $2::pg_catalog.int8, $3::pg_catalog.int8, "
     "$4::pg_catalog.timestamptz)",
     4, {T, I, I, I}},
    {"sc_proxy_incr_text",
     "SELECT sc_incr(" SC_COUNTER ", $2::pg_catalog.text, $3::pg_catalog.int8)", 3, {T, T, I}},
    {"sc_proxy_incr_text_at",
     "SELECT sc_incr(" SC_COUNTER ", $2::pg_catalog.text, $3::pg_catalog.int8, "
     "$4::pg_catalog.timestamptz)",
     4, {T, T, I, I}},
    {"sc_proxy_sum", "SELECT sc_sum(" SC_COUNTER ", $2::pg_catalog.int8)", 2, {T, I}},
    {"sc_proxy_sum_text", "SELECT sc_sum(" SC_COUNTER ", $2::pg_catalog.text)", 2, {T, T}},
};
#undef SC_COUNTER

// A call's arguments as libpq takes them (a NULL value is SQL's NULL); bigints in network order
// live in `int64s`.
struct Params {
  const char* values[4];
  int lengths[4];
  int formats[4];
  uint64 int64s[4];
};
constexpr int kStatementCount = sizeof(kStatements) / sizeof(kStatements[0]);
static_assert(kStatementCount == static_cast<int>(Statement::kCount), "a statement per Statement");
static_assert(kStatementCount <= 32, "Connection::prepared has a bit per statement");

struct Connection {
  int node;
  Oid role;
  uint64 generation;  // CatalogGeneration() when it was opened
  PGconn* conn;       // nullptr: closed (the slot is reused)
  WaitEventSet* wait; // this backend's latch, postmaster death, the node's socket
  uint32 prepared;    // a bit per Statement prepared on it
  bool in_flight;     // a statement was sent and its answer not yet read to the end
};
Connection* connections;
int connection_count;
int connection_capacity;


void Close(Connection* c) {
  if (c->conn == nullptr) return;
  if (c->wait != nullptr) FreeWaitEventSet(c->wait);
  PQfinish(c->conn);
  ReleaseExternalFD();
  c->conn = nullptr;
  c->wait = nullptr;
  c->prepared = 0;
  c->in_flight = false;
}

// Every connection with a statement in flight: asked to cancel, and closed.
void AbandonInFlight() {
  for (int i = 0; i < connection_count; i++) {
    Connection* c = &connections[i];
    if (c->conn == nullptr || !c->in_flight) continue;
    PGcancel* cancel = PQgetCancel(c->conn);
    if (cancel != nullptr) {
      char message[256];
      (void)PQcancel(cancel, message, sizeof(message));
      PQfreeCancel(cancel);
    }
    Close(c);
  }
}

}  // namespace

bool CancelOrDiePending() {
  return (QueryCancelPending || ProcDiePending) && INTERRUPTS_CAN_BE_PROCESSED();
}

void ServeInterrupts() {
  if (CancelOrDiePending()) {
    AbandonInFlight();
    CHECK_FOR_INTERRUPTS();
    ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                    errmsg("canceling statement: the router closed its connections to the data "
                           "nodes")));
  }
  CHECK_FOR_INTERRUPTS();
}

namespace {

// A usable idle connection: opened under the current catalogs, not broken, not mid-statement,
// and with nothing to read. An idle connection is sent nothing but a node's goodbye (the FATAL
// of a shutdown, then the end of the stream), which libpq would only buffer and hand to the next
// statement as its error: such a connection is opened again before anything is sent.
bool Usable(Connection* c) {
  if (c->conn == nullptr || c->wait == nullptr) return false;
  if (c->generation != CatalogGeneration() || PQstatus(c->conn) != CONNECTION_OK ||
      PQtransactionStatus(c->conn) != PQTRANS_IDLE || c->in_flight)
    return false;
  struct pollfd socket = {PQsocket(c->conn), POLLIN, 0};
  return poll(&socket, 1, 0) == 0;
}

// The next result of c's statement in flight (nullptr: the statement is done), waiting
// interruptibly.
PGresult* NextResult(Connection* c) {
  while (PQisBusy(c->conn)) {
    WaitEvent event;
    if (WaitEventSetWait(c->wait, -1L, &event, 1, PG_WAIT_EXTENSION) != 1) continue;
    if (event.events & WL_LATCH_SET) {
      ResetLatch(MyLatch);
      ServeInterrupts();
    }
    if ((event.events & WL_SOCKET_READABLE) && PQconsumeInput(c->conn) == 0) break;
  }
  return PQgetResult(c->conn);
}

void FindLocality(Connection* c);

// Opens node `node` as role `role` into c (whose conn is nullptr): connect.cpp, with the number
// of this session's connections to that node.
void Open(Connection* c, int node, Oid role) {
  int open_to_node = 0;
  for (int i = 0; i < connection_count; i++) {
    Connection* other = &connections[i];
    if (other->conn == nullptr || other->node != node) continue;
    // One opened under catalogs since changed is never used again: it makes room.
    if (other->generation != CatalogGeneration() && !other->in_flight) {
      Close(other);
      continue;
    }
    open_to_node++;
  }
  PGconn* conn = ConnectNode(node, role, open_to_node);
  c->node = node;
  c->role = role;
  c->generation = CatalogGeneration();
  c->conn = conn;
  c->wait = nullptr;
  c->prepared = 0;
  c->in_flight = false;
  c->wait = sc::CreateSessionWaitEventSet(3);
  AddWaitEventToSet(c->wait, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, nullptr);
  AddWaitEventToSet(c->wait, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, nullptr, nullptr);
  AddWaitEventToSet(c->wait, WL_SOCKET_READABLE, PQsocket(conn), nullptr, nullptr);
  if (NodeLocality(node) == Locality::kUnknown) FindLocality(c);
}

// What a node answered when it did not give a bigint: its error, or the connection's.
struct Failure {
  bool failed;
  int node;
  const char* database;
  char* sqlstate;  // nullptr: the connection failed (no SQLSTATE from the node)
  char* message;
  char* detail;
  char* hint;
};

char* CopyField(const PGresult* result, int field) {
  const char* value = PQresultErrorField(result, field);
  return value != nullptr ? pstrdup(value) : nullptr;
}

// What Collect keeps of a statement's one row: its bigint (nfields 0: a hot statement's one
// binary int8), or its nfields fields (copies in the current memory context, nullptr for a NULL,
// with their lengths; fields stays nullptr when no such row came).
struct Reply {
  int64 value;
  bool isnull;
  int nfields;
  char** fields;
  int* lengths;
};

// Reads c's statement to its end into *reply; a node's error or a lost connection goes into
// *failure (the first failure of a call is kept).
void Collect(Connection* c, Reply* reply, Failure* failure) {
  reply->value = 0;
  reply->isnull = true;
  bool got = false;
  Failure mine = {};
  PGresult* res;
  while ((res = NextResult(c)) != nullptr) {
    ExecStatusType status = PQresultStatus(res);
    if (status == PGRES_TUPLES_OK && !got && PQntuples(res) == 1 && reply->nfields == 0 &&
        PQnfields(res) == 1) {
      got = true;
      if (!PQgetisnull(res, 0, 0) && PQgetlength(res, 0, 0) == 8) {
        uint64 network;
        memcpy(&network, PQgetvalue(res, 0, 0), sizeof(network));
        reply->value = static_cast<int64>(pg_ntoh64(network));
        reply->isnull = false;
      }
    } else if (status == PGRES_TUPLES_OK && !got && PQntuples(res) == 1 && reply->nfields > 0 &&
               PQnfields(res) == reply->nfields) {
      got = true;
      reply->fields = static_cast<char**>(palloc0(sizeof(char*) * reply->nfields));
      reply->lengths = static_cast<int*>(palloc0(sizeof(int) * reply->nfields));
      for (int i = 0; i < reply->nfields; i++) {
        if (PQgetisnull(res, 0, i)) continue;
        reply->lengths[i] = PQgetlength(res, 0, i);
        reply->fields[i] = static_cast<char*>(palloc(reply->lengths[i] + 1));
        memcpy(reply->fields[i], PQgetvalue(res, 0, i), reply->lengths[i] + 1);
      }
  } else if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && !mine.failed) {
      mine.failed = true;
      mine.sqlstate = CopyField(res, PG_DIAG_SQLSTATE);
      mine.message = CopyField(res, PG_DIAG_MESSAGE_PRIMARY);
      mine.detail = CopyField(res, PG_DIAG_MESSAGE_DETAIL);
      mine.hint = CopyField(res, PG_DIAG_MESSAGE_HINT);
    }
    PQclear(res);
    if (PQstatus(c->conn) == CONNECTION_BAD) break;
  }
  c->in_flight = false;
  if (PQstatus(c->conn) == CONNECTION_BAD && !mine.failed) mine.failed = true;
  if (mine.failed && (mine.sqlstate == nullptr || mine.message == nullptr)) {
    mine.sqlstate = nullptr;
    mine.message = pstrdup(PQerrorMessage(c->conn));
    (void)pg_strip_crlf(mine.message);
  }
  if (mine.failed && !failure->failed) {
    *failure = mine;
    failure->node = c->node;
    failure->database = pstrdup(PQdb(c->conn));
  }
  if (PQstatus(c->conn) != CONNECTION_OK) Close(c);
}

[[noreturn]] void Raise(const Failure& failure, bool write) {
  if (failure.sqlstate == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_CONNECTION_FAILURE),
             errmsg("lost the connection to data node %d (database %s)", failure.node,
                    failure.database),
             errdetail_internal("%s", failure.message),
             write ? errhint("The node may have applied the call before the connection was lost.")
                   : 0));
  const char* s = failure.sqlstate;
  ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
                  errmsg_internal("%s", failure.message),
                  failure.detail != nullptr ? errdetail_internal("%s", failure.detail) : 0,
                  failure.hint != nullptr ? errhint("%s", failure.hint) : 0,
                  errcontext("data node %d (database %s)", failure.node, failure.database)));
}

// Whether c's node is this database: the node's backend is one of this server's processes, in
// this database, and the node's identity (nodes.hpp: cluster, database, postmaster start time,
// recovery) is this one's. The PID alone is no proof (a pooler picks what it sends; a clone in
// another PID namespace may run a backend of the same PID): it only saves the question for a node
// that is plainly elsewhere. An answer that cannot be had (the query refused, say) leaves the
// node unknown, which routes as remote: always correct, only slower.
void FindLocality(Connection* c) {
  PGPROC* proc = BackendPidGetProc(PQbackendPID(c->conn));
  if (proc == nullptr || proc->databaseId != MyDatabaseId) {
    SetNodeLocality(c->node, Locality::kRemote);
    return;
  }
  if (PQsendQueryParams(c->conn, kIdentityQuery, 0, nullptr, nullptr, nullptr, nullptr, 1) != 1)
    return;
  c->in_flight = true;
  Reply reply = {};
  reply.nfields = 4;
  Failure failure = {};
  Collect(c, &reply, &failure);
  if (failure.failed || reply.fields == nullptr) return;
  SetNodeLocality(c->node,
                  IsThisDatabase(reply.fields, reply.lengths) ? Locality::kLocal : Locality::kRemote);
}

// The usable connection to `node` as the current role, opened if need be.
Connection* Acquire(int node) {
  Oid role = GetUserId();
  Connection* free_slot = nullptr;
  for (int i = 0; i < connection_count; i++) {
    Connection* c = &connections[i];
    if (c->conn == nullptr) {
      if (free_slot == nullptr) free_slot = c;
      continue;
    }
    if (c->node != node || c->role != role) continue;
    if (Usable(c)) return c;
    Close(c);
    free_slot = c;
    break;
  }
  if (free_slot == nullptr) {
    if (connection_count == connection_capacity) {
      int capacity = connection_capacity == 0 ? 4 : connection_capacity * 2;
      connections = static_cast<Connection*>(
          connections == nullptr
              ? MemoryContextAllocZero(TopMemoryContext, sizeof(Connection) * capacity)
              : repalloc(connections, sizeof(Connection) * capacity));
      connection_capacity = capacity;
    }
    free_slot = &connections[connection_count++];
    free_slot->conn = nullptr;
  }
  Open(free_slot, node, role);
  return free_slot;
}

// Prepares `statement` on c unless it is; a node's error (no sc_incr there, say) is raised.
void Prepare(Connection* c, Statement statement) {
  uint32 bit = 1u << static_cast<int>(statement);
  if (c->prepared & bit) return;
  const StatementText& text = kStatements[static_cast<int>(statement)];
  if (PQsendPrepare(c->conn, text.name, text.sql, text.params, nullptr) != 1) {
    Close(c);
    return;
  }
  c->in_flight = true;
  Failure failure = {};
  Reply ignored = {};
  Collect(c, &ignored, &failure);
  if (failure.failed) Raise(failure, false);
  c->prepared |= bit;
}

// The call's arguments in the forms kStatements gives.
void ToParams(const Call& call, Params* params) {
  const StatementText& statement = kStatements[static_cast<int>(call.statement)];
  Assert(call.nargs == statement.params);
  for (int i = 0; i < call.nargs; i++) {
    params->formats[i] = 1;
    if (call.nulls[i]) {
      params->values[i] = nullptr;
      params->lengths[i] = 0;
    } else if (statement.args[i] == Arg::kText) {
      const text* value = DatumGetTextPP(call.args[i]);
      params->values[i] = VARDATA_ANY(value);
      params->lengths[i] = VARSIZE_ANY_EXHDR(value);
    } else {
      params->int64s[i] = pg_hton64(static_cast<uint64>(DatumGetInt64(call.args[i])));
      params->values[i] = reinterpret_cast<const char*>(&params->int64s[i]);
      params->lengths[i] = 8;
    }
  }
}

// Sends the call on a connection to `node` and returns the connection's index (connections
// moves when it grows); a connection found broken when sending (nothing reached the node) is
// opened again, once.
int Send(int node, const Call& call, const Params& params) {
  const StatementText& text = kStatements[static_cast<int>(call.statement)];
  for (int attempt = 0; attempt < 2; attempt++) {
    Connection* c = Acquire(node);
    Prepare(c, call.statement);
    if (c->conn != nullptr &&
        PQsendQueryPrepared(c->conn, text.name, call.nargs, params.values, params.lengths,
                            params.formats, 1) == 1) {
      c->in_flight = true;
      return static_cast<int>(c - connections);
    }
    Close(c);
  }
  ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
                  errmsg("could not send a call to data node %d", node)));
}

// Sends `question` to `node` and returns the connection's index, as Send.
int SendQuestion(int node, const Question& question) {
  for (int attempt = 0; attempt < 2; attempt++) {
    Connection* c = Acquire(node);
    if (c->conn != nullptr &&
        PQsendQueryParams(c->conn, question.sql, question.nparams, question.types,
                          question.values, question.lengths, question.formats, 0) == 1) {
      c->in_flight = true;
      return static_cast<int>(c - connections);
    }
    Close(c);
  }
  ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
                  errmsg("could not send a question to data node %d", node)));
}

}  // namespace

char*** AskEveryNode(const Question& question) {
  int count = NodeCount();
  int* sent = static_cast<int*>(palloc(sizeof(int) * count));
  for (int node = 0; node < count; node++) sent[node] = SendQuestion(node, question);
  Failure failure = {};
  char*** answers = static_cast<char***>(palloc0(sizeof(char**) * count));
  for (int node = 0; node < count; node++) {
    Connection* c = &connections[sent[node]];
    Reply reply = {};
    reply.nfields = question.nfields;
    Collect(c, &reply, &failure);
    answers[node] = reply.fields;
    // No connection of a backend to its own database is kept (its calls are in-process).
    if (NodeLocality(node) == Locality::kLocal) Close(c);
  }
  pfree(sent);
  if (failure.failed) Raise(failure, false);
  for (int node = 0; node < count; node++) {
    if (answers[node] == nullptr) elog(ERROR, "data node %d answered no row of %d fields", node,
                                       question.nfields);
  }
  return answers;
}

bool NodeIsLocal(int node) {
  if (NodeLocality(node) == Locality::kUnknown) {
    Connection* c = Acquire(node);  // finds it out
    if (NodeLocality(node) == Locality::kLocal) Close(c);
  }
  return NodeLocality(node) == Locality::kLocal;
}

void RunOnNodes(const Call& call, const int* nodes, int count, bool write, int64* results,
                bool* nulls) {
  Assert(count > 0);
  bool* local = static_cast<bool*>(palloc(sizeof(bool) * count));
  for (int i = 0; i < count; i++) {
    local[i] = NodeIsLocal(nodes[i]);
    if (local[i]) results[i] = DatumGetInt64(CallLocal(call, &nulls[i]));
  }
  // Sent to every remote node first, then read: a call over n nodes waits for the slowest, not
  // the sum.
  Params params;
  ToParams(call, &params);
  int* sent = static_cast<int*>(palloc(sizeof(int) * count));
  for (int i = 0; i < count; i++) {
    // An error while sending to a later node leaves the earlier ones mid-statement: Usable()
    // closes them at their next use.
    if (!local[i]) sent[i] = Send(nodes[i], call, params);
  }
  Failure failure = {};
  for (int i = 0; i < count; i++) {
    if (local[i]) continue;
    Reply reply = {};
    Collect(&connections[sent[i]], &reply, &failure);
    results[i] = reply.value;
    nulls[i] = reply.isnull;
  }
  pfree(sent);
  pfree(local);
  if (failure.failed) Raise(failure, write);
}

}  // namespace sc_proxy
