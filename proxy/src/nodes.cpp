// nodes.cpp: the router's data nodes as its connections see them.
//
// A node string is written twice. slotted_counter_proxy.nodes keeps it as sc_proxy_configure was
// given it (what sc_proxy_node_of returns, and every role may read: so it may not hold a
// password). The router's foreign server keeps it followed by the router's settings
// (core/node_options.hpp: a pinned search_path and the hop), which node_string() appends and
// CheckNodeString() requires of every partition before any connection is made with it: PL/Proxy
// connects with those strings as they are, and the router's own connections (remote.cpp) too.
//
// Per backend: the strings of the current catalog generation and, for each node, whether it is
// this very database (local.cpp then calls it in-process). No shared memory, no locks.

extern "C" {
#include "postgres.h"

#include "access/xlog.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include "compat.hpp"
#include "checks.hpp"
#include "core/node_options.hpp"
#include "nodes.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_proxy_node_string);
}

namespace sc_proxy {

const char* const kIdentityQuery =
    "SELECT s.system_identifier, d.oid, pg_catalog.pg_postmaster_start_time(), "
    "pg_catalog.pg_is_in_recovery() "
    "FROM pg_catalog.pg_control_system() AS s, pg_catalog.pg_database AS d "
    "WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";

namespace {

// The node strings, as of catalog generation `generation`, and what is known of each node.
struct NodeStrings {
  bool loaded;
  uint64 generation;
  int count;
  char** strings;
  Locality* locality;
  MemoryContext context;
};
NodeStrings node_strings;

bool IsPartition(const char* name) { return name[0] == 'p' && name[1] >= '0' && name[1] <= '9'; }

void LoadNodeStrings() {
  uint64 generation = CatalogGeneration();
  ForeignServer* server = GetForeignServer(CheckedServer());
  if (node_strings.context == nullptr)
    node_strings.context =
        AllocSetContextCreate(TopMemoryContext, "slotted_counter_proxy nodes",
                              ALLOCSET_SMALL_SIZES);
  MemoryContextReset(node_strings.context);
  node_strings.loaded = false;
  int count = 0;
  ListCell* cell;
  foreach (cell, server->options) {
    if (IsPartition(lfirst_node(DefElem, cell)->defname)) count++;
  }
  if (count == 0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the router has no data nodes"),
                    errhint("A superuser calls sc_proxy_configure(nodes) first.")));
  char** strings =
      static_cast<char**>(MemoryContextAllocZero(node_strings.context, sizeof(char*) * count));
  auto* locality = static_cast<Locality*>(
      MemoryContextAllocZero(node_strings.context, sizeof(Locality) * count));
  static_assert(static_cast<int>(Locality::kUnknown) == 0, "zeroed means unknown");
  foreach (cell, server->options) {
    DefElem* def = lfirst_node(DefElem, cell);
    if (!IsPartition(def->defname)) continue;
    char* end;
    long node = strtol(def->defname + 1, &end, 10);
    if (*end != '\0' || node < 0 || node >= count || strings[node] != nullptr)
      ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                      errmsg("server \"%s\" has partitions that are not p0 to p%d", kServer,
                             count - 1),
                      errhint("A superuser calls sc_proxy_configure(nodes) again.")));
    strings[node] = MemoryContextStrdup(node_strings.context, defGetString(def));
  }
  node_strings.strings = strings;
  node_strings.locality = locality;
  node_strings.count = count;
  node_strings.generation = generation;
  node_strings.loaded = true;
}

void EnsureNodeStrings() {
  if (!node_strings.loaded || node_strings.generation != CatalogGeneration()) LoadNodeStrings();
}

// The parsed keywords of connstr; 22023 if libpq cannot read it. Freed with PQconninfoFree.
PQconninfoOption* ParseNodeString(const char* connstr, const char* which) {
  char* message = nullptr;
  PQconninfoOption* options = PQconninfoParse(connstr, &message);
  if (options != nullptr) return options;
  char* detail = pstrdup(message != nullptr ? message : "out of memory");
  PQfreemem(message);
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                  errmsg("%s is not a valid connection string", which),
                  errdetail_internal("%s", detail)));
}

// 22023 if the parsed string gives a password: every role reads the node strings.
void RefusePassword(PQconninfoOption* options, const char* which) {
  for (PQconninfoOption* o = options; o->keyword != nullptr; o++) {
    if (o->val == nullptr ||
        (strcmp(o->keyword, "password") != 0 && strcmp(o->keyword, "sslpassword") != 0))
      continue;
    const char* keyword = o->keyword;
    PQconninfoFree(options);
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("%s contains a password", which),
             errdetail("Every role reads the node strings in slotted_counter_proxy.nodes; this "
                       "one sets \"%s\".",
                       keyword),
             errhint("Give each role's password in its user mapping: CREATE USER MAPPING FOR "
                     "role SERVER %s OPTIONS (password '...'), or in the nodes' authentication.",
                     kServer)));
  }
}

const char* OptionsOf(PQconninfoOption* options) {
  for (PQconninfoOption* o = options; o->keyword != nullptr; o++) {
    if (strcmp(o->keyword, "options") == 0) return o->val;
  }
  return nullptr;
}

}  // namespace

int NodeCount() {
  EnsureNodeStrings();
  return node_strings.count;
}

const char* NodeString(int node) {
  EnsureNodeStrings();
  Assert(node >= 0 && node < node_strings.count);
  return node_strings.strings[node];
}

Locality NodeLocality(int node) {
  EnsureNodeStrings();
  Assert(node >= 0 && node < node_strings.count);
  return node_strings.locality[node];
}

void SetNodeLocality(int node, Locality locality) {
  Assert(node_strings.loaded && node >= 0 && node < node_strings.count);
  node_strings.locality[node] = locality;
}

bool IsThisDatabase(char* const* values, const int* lengths) {
  static_assert(sizeof(TimestampTz) == 8, "a timestamptz is sent as 8 bytes");
  for (int i = 0; i < 4; i++) {
    if (values[i] == nullptr) return false;
  }
  if (lengths[0] != 8 || lengths[1] != 4 || lengths[2] != 8 || lengths[3] != 1) return false;
  uint64 system_identifier;
  uint32 database;
  uint64 started;
  memcpy(&system_identifier, values[0], 8);
  memcpy(&database, values[1], 4);
  memcpy(&started, values[2], 8);
  bool recovery = values[3][0] != 0;
  return pg_ntoh64(system_identifier) == GetSystemIdentifier() &&
         pg_ntoh32(database) == MyDatabaseId &&
         static_cast<TimestampTz>(pg_ntoh64(started)) == PgStartTime &&
         recovery == RecoveryInProgress();
}

void CheckNodeString(const char* option, const char* connstr) {
  const char* which = psprintf("option \"%s\" of server \"%s\"", option, kServer);
  PQconninfoOption* options = ParseNodeString(connstr, which);
  RefusePassword(options, which);
  bool pinned = EndsWithRouterSettings(OptionsOf(options));
  PQconninfoFree(options);
  if (!pinned)
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("%s does not end with the router's settings", which),
             errdetail("Every connection to a data node pins its search_path and marks itself "
                       "as the router's (slotted_counter_proxy.hop); the node strings of the "
                       "server were changed by other means than sc_proxy_configure."),
             errhint("A superuser calls sc_proxy_configure(nodes) again.")));
}

}  // namespace sc_proxy

// slotted_counter_proxy.node_string(node integer, connstr text, schema text) RETURNS text:
// node string `node` as the router's foreign server holds it: connstr, then an `options` that is
// connstr's own followed by the router's settings (search_path pinned to pg_catalog, schema (none
// when NULL) and pg_temp; the hop). 22023 for a string libpq cannot read or one with a password.
extern "C" Datum sc_proxy_node_string(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("nodes must not be null")));
  const char* which = psprintf("node string %d", PG_GETARG_INT32(0));
  const char* connstr = text_to_cstring(PG_GETARG_TEXT_PP(1));
  const char* schema = PG_ARGISNULL(2) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(2));
  PQconninfoOption* options = sc_proxy::ParseNodeString(connstr, which);
  sc_proxy::RefusePassword(options, which);
  const char* own = sc_proxy::OptionsOf(options);
  StringInfoData merged;
  initStringInfo(&merged);
  if (own != nullptr && own[0] != '\0') appendStringInfo(&merged, "%s ", own);
  PQconninfoFree(options);
  size_t length = sc_proxy::RouterSettings(schema, nullptr, 0);
  enlargeStringInfo(&merged, static_cast<int>(length) + 1);
  sc_proxy::RouterSettings(schema, merged.data + merged.len, length + 1);
  merged.len += static_cast<int>(length);
  length = sc_proxy::ConninfoValue(merged.data, nullptr, 0);
  char* quoted = static_cast<char*>(palloc(length + 1));
  sc_proxy::ConninfoValue(merged.data, quoted, length + 1);
  char* result = psprintf("%s options=%s", connstr, quoted);
  PG_RETURN_TEXT_P(cstring_to_text(result));
}
