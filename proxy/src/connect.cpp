// connect.cpp: how the router opens its own connections to a data node (remote.cpp keeps them).
// Two settings bound what a connection may cost, as Citus's connection manager bounds its own:
//
// - slotted_counter_proxy.connect_timeout: how long opening one may take, from the first packet to
//   the node's "ready". libpq enforces a node string's connect_timeout only when it connects
//   blocking, and the router connects without blocking (it waits on its latch too, so a cancel
//   ends the wait): a node that accepts the TCP connection and never answers (a stopped process,
//   a full backlog, a firewall that drops the replies) would hold the call until the operating
//   system gives up, minutes later. Past the setting the call fails with 08001.
//
// - slotted_counter_proxy.max_connections_per_node: how many connections one router session keeps
//   to one node. A session keeps one per node and role (remote.cpp): a session that acts as many
//   roles (SET ROLE, SECURITY DEFINER functions) would otherwise hold as many connections to
//   every node, each a backend there. The connection past the cap is refused (53300) before
//   anything is sent.
//
// Waiting is interruptible, as for a statement: a cancel or termination closes the half-open
// connection, and every statement the call has in flight on other nodes (remote.cpp), then lets
// PostgreSQL raise the interrupt. PostgreSQL's own libpq/libpq-be-fe-helpers.h (16 and later;
// 15 has none) waits alike for libpqsrv_connect_params, an external FD reserved, on the latch and
// the socket, but with no deadline, and it raises an interrupt where it finds it, leaving the
// call's other statements running on their nodes: so the loop below is the helper's, with a
// deadline and remote.cpp's handling of an interrupt.

#include <climits>

extern "C" {
#include "postgres.h"

#include "commands/defrem.h"
#include "common/string.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/wait_event.h"
}

#include "checks.hpp"
#include "nodes.hpp"
#include "remote.hpp"

namespace sc_proxy {
namespace {

int connect_timeout_ms = 10000;
int max_connections_per_node = 16;

// The password of `role`'s user mapping (or PUBLIC's) on the router's server; nullptr for none.
const char* MappingPassword(Oid role) {
  ListCell* cell;
  foreach (cell, GetUserMapping(role, CheckedServer())->options) {
    DefElem* def = lfirst_node(DefElem, cell);
    if (strcmp(def->defname, "password") == 0) return defGetString(def);
  }
  return nullptr;
}

void Abandon(PGconn* conn) {
  PQfinish(conn);
  ReleaseExternalFD();
}

}  // namespace

void DefineConnectionSettings() {
  DefineCustomIntVariable(
      "slotted_counter_proxy.connect_timeout",
      "How long the router waits for a data node to accept one of its own connections.",
      "Past it the call fails with 08001. 0 waits as long as the operating system does.",
      &connect_timeout_ms, 10000, 0, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "slotted_counter_proxy.max_connections_per_node",
      "How many connections one router session keeps to one data node (one per role).",
      "The connection past it is refused with 53300.", &max_connections_per_node, 16, 1, 1000,
      PGC_USERSET, 0, nullptr, nullptr, nullptr);
}

PGconn* ConnectNode(int node, Oid role, int open_to_node) {
  if (open_to_node >= max_connections_per_node)
    ereport(ERROR,
            (errcode(ERRCODE_TOO_MANY_CONNECTIONS),
             errmsg_plural("this session already has %d connection to data node %d",
                           "this session already has %d connections to data node %d",
                           open_to_node, open_to_node, node),
             errdetail("The router keeps one connection per data node and role; role \"%s\" "
                       "would need one more, past slotted_counter_proxy.max_connections_per_node.",
                       GetUserNameFromId(role, false)),
             errhint("Act as fewer roles in one session, or raise "
                     "slotted_counter_proxy.max_connections_per_node.")));
  const char* password = MappingPassword(role);
  // The node string is expanded first; the keywords after it override what it says.
  const char* keywords[] = {"dbname", "user", "client_encoding", "fallback_application_name",
                            password != nullptr ? "password" : nullptr, nullptr};
  const char* values[] = {NodeString(node), GetUserNameFromId(role, false),
                          GetDatabaseEncodingName(), "slotted_counter_proxy", password, nullptr};
  if (!AcquireExternalFD())
    ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
                    errmsg("could not connect to data node %d", node),
                    errdetail("There are too many open files on the local server."),
                    errhint("Raise max_files_per_process or the limit of open files.")));
  PGconn* conn = PQconnectStartParams(keywords, values, 1);
  if (conn == nullptr) {
    ReleaseExternalFD();
    ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
  }
  instr_time start;
  INSTR_TIME_SET_CURRENT(start);
  PostgresPollingStatusType status =
      PQstatus(conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK && status != PGRES_POLLING_FAILED) {
    long timeout = -1L;
    if (connect_timeout_ms > 0) {
      instr_time now;
      INSTR_TIME_SET_CURRENT(now);
      INSTR_TIME_SUBTRACT(now, start);
      timeout = connect_timeout_ms - static_cast<long>(INSTR_TIME_GET_MILLISEC(now));
      if (timeout <= 0) {
        Abandon(conn);
        ereport(ERROR,
                (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
                 errmsg("could not connect to data node %d: no answer within %d ms", node,
                        connect_timeout_ms),
                 errhint("The node accepted no connection in "
                         "slotted_counter_proxy.connect_timeout: is it up and reachable?")));
      }
    }
    int io = status == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
    int events = WaitLatchOrSocket(MyLatch,
                                   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | io |
                                       (timeout >= 0 ? WL_TIMEOUT : 0),
                                   PQsocket(conn), timeout, PG_WAIT_EXTENSION);
    if (events & WL_LATCH_SET) {
      ResetLatch(MyLatch);
      if (CancelOrDiePending()) Abandon(conn);
      ServeInterrupts();
    }
    if (events & io) status = PQconnectPoll(conn);
  }
  if (status == PGRES_POLLING_FAILED) {
    char* message = pstrdup(PQerrorMessage(conn));
    Abandon(conn);
    ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
                    errmsg("could not connect to data node %d", node),
                    errdetail_internal("%s", pg_strip_crlf(message) > 0 ? message : "")));
  }
  return conn;
}

}  // namespace sc_proxy
