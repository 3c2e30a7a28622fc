// slotted_counter_proxy: the checks of the router's C++ (the routing of every call is route.cpp's;
// its own routing of sc_incr and sc_sum routed.cpp, remote.cpp, connect.cpp and local.cpp; the
// PL/Proxy functions are sql/slotted_counter_proxy--1.0.sql; its catalog is catalog.cpp's). Four
// jobs that need the server's C API:
//
// 1. The refusal of a transactional write inside a transaction block. PL/Proxy sends each routed
//    call to its data node as a statement of its own, which the node commits at once: there is no
//    two-phase commit, so such a write would stay counted if the block rolled back. Whether the
//    caller is inside a block (BEGIN, or several statements in one simple query) is known only
//    here.
//
// 2. A role reaches the data nodes as itself, never as another. PL/Proxy connects as the current
//    role unless the user mapping in effect (the role's own, or PUBLIC's) names a `user`, or a node
//    string does. A role with USAGE on the server (PL/Proxy requires it, so every role has it) may
//    create a mapping for itself: the event trigger refuses any mapping on the router's server that
//    names another role, and sc_proxy_configure refuses to run while one exists. The rule that
//    counts is the one checked on every routed call, since mappings can also come from before the
//    extension, from a superuser with the trigger disabled, or go stale when a role is renamed
//    (no event trigger fires for roles): every PL/Proxy function of the router takes its cluster
//    name from slotted_counter_proxy.cluster() (or write_cluster()), or routes by a RUN ON
//    function of route.cpp, which PL/Proxy calls before it connects, and which refuses (42501)
//    unless the caller's mapping and the server's options would connect as the caller; the
//    router's own routing calls the same CheckCaller (checks.hpp) before it connects. Its verdict is cached per backend for one role and dropped by every change to
//    roles, user mappings, foreign servers or wrappers (syscache callbacks), so a call pays a
//    comparison.
//
// 3. Nothing comes back around. Every connection the router opens to a data node carries the
//    setting slotted_counter_proxy.hop (core/node_options.hpp), which no one may change after
//    the connection started: a router reached through such a session (a router installed in a
//    data node's database, on a path that leads back to it) refuses every call at once (55000),
//    instead of routing it again until the servers have no connection left.
//
// 4. A read-only transaction writes nothing through the router: a routed write runs on its node
//    in a session of its own, which is not read-only, so every routed write refuses (25006) before
//    any node is contacted, as PostgreSQL refuses nextval().
//
// This library is loaded only by the router's functions, never preloaded. Its state here is the
// settings and the cached verdict; remote.cpp keeps the session's connections (all of it
// backend-local: no shared memory, no locks).

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

// What differs between PostgreSQL versions: the extension's own header.
#include "compat.hpp"
#include "checks.hpp"
#include "nodes.hpp"
#include "remote.hpp"

extern "C" {
SC_MODULE_MAGIC("slotted_counter_proxy", SC_VERSION);

void _PG_init(void);
PG_FUNCTION_INFO_V1(sc_proxy_cluster);
PG_FUNCTION_INFO_V1(sc_proxy_write_cluster);
PG_FUNCTION_INFO_V1(sc_proxy_check_configuration);
PG_FUNCTION_INFO_V1(sc_proxy_check_user_mapping);
}

using sc_proxy::kServer;

namespace {

bool allow_transaction_block = false;
// slotted_counter_proxy.hop: this session was opened by a router.
bool from_router = false;

// The role whose routed calls passed every check, as of the last change to the catalogs the
// checks read; InvalidOid when none. catalog_generation moves with every such change, so that a
// change processed while a check runs (its own catalog look-ups can process invalidations) leaves
// the verdict uncached.
Oid verified_user = InvalidOid;
uint64 catalog_generation = 0;

void CatalogChanged(Datum arg, int cacheid, uint32 hashvalue) {
  verified_user = InvalidOid;
  catalog_generation++;
}

// A mapping's role as SQL names it (MappingUserName, foreign/foreign.h, as messages do).
const char* MappingUserSql(Oid role) {
  return OidIsValid(role) ? quote_identifier(GetUserNameFromId(role, false)) : "PUBLIC";
}

// Refuses (42501) a user mapping on the router's server that would let `acting` reach the data
// nodes as another role. mapped is the mapping's role (InvalidOid: PUBLIC); acting the role that
// would use it (InvalidOid: any role, which a PUBLIC mapping serves). PL/Proxy adds the options
// to the node strings: only "user" naming the acting role itself and "password" are allowed.
void CheckMappingOptions(Oid mapped, Oid acting, List* options) {
  const char* acting_name = OidIsValid(acting) ? GetUserNameFromId(acting, false) : nullptr;
  ListCell* cell;
  foreach (cell, options) {
    DefElem* def = lfirst_node(DefElem, cell);
    if (strcmp(def->defname, "password") == 0) continue;
    if (strcmp(def->defname, "user") != 0)
      ereport(ERROR,
              (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
               errmsg("user mapping for \"%s\" on server \"%s\" must not set option \"%s\"",
                      MappingUserName(mapped), kServer, def->defname),
               errdetail("PL/Proxy adds a user mapping's options to the data nodes' connection "
                         "strings: the router allows only \"user\" (the role's own name) and "
                         "\"password\".")));
    const char* user = defGetString(def);
    if (acting_name != nullptr && strcmp(user, acting_name) == 0) continue;
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("user mapping for \"%s\" on server \"%s\" connects as role \"%s\"",
                    MappingUserName(mapped), kServer, user),
             OidIsValid(acting) && acting != mapped
                 ? errdetail("Role \"%s\" uses that mapping; the router reaches the data nodes "
                             "only as the calling role.",
                             acting_name)
                 : errdetail("The router reaches the data nodes only as the calling role: a user "
                             "mapping on its server may name its own role and a password, "
                             "nothing else."),
             errhint("Drop the option (ALTER USER MAPPING FOR %s SERVER %s OPTIONS (DROP "
                     "user)): PL/Proxy then connects as the calling role.",
                     MappingUserSql(mapped), kServer)));
  }
}

// The options of the mapping of `role` (InvalidOid: PUBLIC) on `server` alone; *found false when
// there is none.
List* MappingOptions(Oid role, Oid server, bool* found) {
  HeapTuple tuple =
      SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(role), ObjectIdGetDatum(server));
  *found = HeapTupleIsValid(tuple);
  if (!*found) return NIL;
  bool isnull;
  Datum options =
      SysCacheGetAttr(USERMAPPINGUSERSERVER, tuple, Anum_pg_user_mapping_umoptions, &isnull);
  List* result = isnull ? NIL : untransformRelOptions(options);
  ReleaseSysCache(tuple);
  return result;
}

// A cluster option PL/Proxy would read (the wrapper's or the server's) that connects every role
// as one: default_user other than current_user, or a node string that names a user. PL/Proxy
// uses a node string containing "user=" as it is, without the caller's name, and cannot add one
// to a URI. A node string must also hold no password and end with the router's settings
// (nodes.cpp).
void CheckClusterOptions(List* options, const char* kind, const char* name) {
  ListCell* cell;
  foreach (cell, options) {
    DefElem* def = lfirst_node(DefElem, cell);
    const char* value = defGetString(def);
    if (pg_strcasecmp(def->defname, "default_user") == 0) {
      if (pg_strcasecmp(value, "current_user") != 0)
        ereport(ERROR,
                (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                 errmsg("%s \"%s\" sets default_user to \"%s\"", kind, name, value),
                 errdetail("PL/Proxy would connect to the data nodes as that role, not as the "
                           "calling role.")));
    } else if (strstr(value, "user=") != nullptr || strncmp(value, "postgresql://", 13) == 0 ||
               strncmp(value, "postgres://", 11) == 0) {
      ereport(ERROR,
              (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
               errmsg("option \"%s\" of %s \"%s\" names a user", def->defname, kind, name),
               errdetail("PL/Proxy uses a node string that contains \"user=\" (or is a URI) as it "
                         "is, so every role would reach that node as one user."),
               errhint("Give the node strings in key=value form without a user: PL/Proxy adds "
                       "the calling role's name.")));
    } else if (strcmp(kind, "server") == 0 && def->defname[0] == 'p' && def->defname[1] >= '0' &&
               def->defname[1] <= '9') {
      sc_proxy::CheckNodeString(def->defname, value);
    }
  }
}

}  // namespace

// The router's foreign server, its options and its wrapper's checked; 55000 if it is missing
// (PL/Proxy would then look for a cluster of that name in the schema "plproxy").
Oid sc_proxy::CheckedServer() {
  ForeignServer* server = GetForeignServerByName(kServer, true);
  if (server == nullptr)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the router has no data nodes"),
                    errhint("A superuser calls sc_proxy_configure(nodes) first.")));
  ForeignDataWrapper* wrapper = GetForeignDataWrapper(server->fdwid);
  CheckClusterOptions(wrapper->options, "foreign-data wrapper", wrapper->fdwname);
  CheckClusterOptions(server->options, "server", kServer);
  return server->serverid;
}

// The check of every routed call: the current role would reach the data nodes as itself.
void sc_proxy::CheckCaller() {
  CheckNotFromRouter();
  Oid user = GetUserId();
  if (user == verified_user) return;
  uint64 generation = catalog_generation;
  Oid server = sc_proxy::CheckedServer();
  bool found;
  Oid mapped = user;
  List* options = MappingOptions(user, server, &found);
  if (!found) {
    mapped = InvalidOid;
    options = MappingOptions(InvalidOid, server, &found);
  }
  if (!found)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("user mapping not found for \"%s\"", GetUserNameFromId(user, false)),
                    errhint("sc_proxy_configure creates one for PUBLIC.")));
  CheckMappingOptions(mapped, user, options);
  if (generation == catalog_generation) verified_user = user;
}

uint64 sc_proxy::CatalogGeneration() { return catalog_generation; }

void sc_proxy::CheckNotFromRouter() {
  if (!from_router) return;
  ereport(ERROR,
          (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
           errmsg("a routed call cannot come from a router's connection"),
           errdetail("This session was opened by a router on a data node "
                     "(slotted_counter_proxy.hop is on): routing the call again could lead back "
                     "to a router, and again, until the servers have no connection left."),
           errhint("A router's node strings name databases of slotted_counter; call "
                   "slotted_counter's own functions there.")));
}

void sc_proxy::CheckWritable(const char* function) { PreventCommandIfReadOnly(function); }

void sc_proxy::CheckNotInBlock(const char* action) {
  if (!IsTransactionBlock()) return;
  ereport(ERROR,
          (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
           errmsg("%s cannot run inside a transaction block through the router", action),
           errdetail("The data nodes commit the change at once, while the router's record of the "
                     "counter would roll back with this transaction."),
           errhint("Call it on its own, outside BEGIN ... COMMIT.")));
}

void sc_proxy::CheckAutocommit(const char* counter) {
  if (!IsTransactionBlock() || allow_transaction_block) return;
  ereport(ERROR,
          (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
           errmsg("transactional counter \"%s\" cannot be written through the router inside a "
                  "transaction block",
                  counter),
           errdetail("The router sends the write to its data node, which commits it at once: a "
                     "later rollback of this transaction would not undo it."),
           errhint("Write it outside a transaction block, or SET LOCAL "
                   "slotted_counter_proxy.allow_transaction_block = on to accept that.")));
}

void _PG_init(void) {
  DefineCustomBoolVariable(
      "slotted_counter_proxy.allow_transaction_block",
      "Lets the router write transactional counters inside a transaction block.",
      "Each such write commits on its data node at once, whatever the block does later.",
      &allow_transaction_block, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  // Set by a router on each connection it opens (in its options), and fixed from then on: code
  // that runs in such a session cannot turn it off before it calls a router.
  DefineCustomBoolVariable("slotted_counter_proxy.hop",
                           "Marks a session a router opened on a data node.",
                           "A router refuses every call in such a session.", &from_router, false,
                           PGC_BACKEND, GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  sc_proxy::DefineConnectionSettings();
  MarkGUCPrefixReserved("slotted_counter_proxy");
  // What the verdict of CheckCaller depends on: role names, user mappings, the server's and the
  // wrapper's options.
  CacheRegisterSyscacheCallback(AUTHOID, CatalogChanged, (Datum)0);
  CacheRegisterSyscacheCallback(USERMAPPINGOID, CatalogChanged, (Datum)0);
  CacheRegisterSyscacheCallback(FOREIGNSERVEROID, CatalogChanged, (Datum)0);
  CacheRegisterSyscacheCallback(FOREIGNDATAWRAPPEROID, CatalogChanged, (Datum)0);
}

// slotted_counter_proxy.cluster() RETURNS text: the CLUSTER of every PL/Proxy function of the
// router, which PL/Proxy evaluates before it connects. Raises 42501 unless the current role would
// reach the data nodes as itself; returns the server's name.
extern "C" Datum sc_proxy_cluster(PG_FUNCTION_ARGS) {
  sc_proxy::CheckCaller();
  PG_RETURN_TEXT_P(cstring_to_text(kServer));
}

// slotted_counter_proxy.write_cluster(function text) RETURNS text: cluster() for a routed write,
// which also raises 25006 in a read-only transaction, naming the user's function ("sc_set()").
extern "C" Datum sc_proxy_write_cluster(PG_FUNCTION_ARGS) {
  sc_proxy::CheckCaller();
  sc_proxy::CheckWritable(PG_ARGISNULL(0) ? "a routed write" : text_to_cstring(PG_GETARG_TEXT_PP(0)));
  PG_RETURN_TEXT_P(cstring_to_text(kServer));
}

// slotted_counter_proxy.check_configuration(): raises 42501 if the server's or the wrapper's
// options, or any user mapping on the server, would let a role reach the data nodes as another.
extern "C" Datum sc_proxy_check_configuration(PG_FUNCTION_ARGS) {
  Oid server = sc_proxy::CheckedServer();
  Relation mappings = table_open(UserMappingRelationId, AccessShareLock);
  SysScanDesc scan = systable_beginscan(mappings, InvalidOid, false, nullptr, 0, nullptr);
  HeapTuple tuple;
  while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
    auto* mapping = reinterpret_cast<Form_pg_user_mapping>(GETSTRUCT(tuple));
    if (mapping->umserver != server) continue;
    bool isnull;
    Datum options = heap_getattr(tuple, Anum_pg_user_mapping_umoptions,
                                 RelationGetDescr(mappings), &isnull);
    CheckMappingOptions(mapping->umuser, mapping->umuser,
                        isnull ? NIL : untransformRelOptions(options));
  }
  systable_endscan(scan);
  table_close(mappings, AccessShareLock);
  PG_RETURN_VOID();
}

// The event trigger on CREATE and ALTER USER MAPPING: a mapping on the router's server may name
// its own role only (a PUBLIC mapping no user at all), and no option but user and password.
extern "C" Datum sc_proxy_check_user_mapping(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_EVENT_TRIGGER(fcinfo)) elog(ERROR, "not fired by event trigger manager");
  Node* statement = reinterpret_cast<EventTriggerData*>(fcinfo->context)->parsetree;
  RoleSpec* role;
  const char* server_name;
  if (IsA(statement, CreateUserMappingStmt)) {
    role = castNode(CreateUserMappingStmt, statement)->user;
    server_name = castNode(CreateUserMappingStmt, statement)->servername;
  } else if (IsA(statement, AlterUserMappingStmt)) {
    role = castNode(AlterUserMappingStmt, statement)->user;
    server_name = castNode(AlterUserMappingStmt, statement)->servername;
  } else {
    PG_RETURN_NULL();
  }
  if (strcmp(server_name, kServer) != 0) PG_RETURN_NULL();
  Oid mapped = role->roletype == ROLESPEC_PUBLIC ? InvalidOid : get_rolespec_oid(role, false);
  bool found;
  List* options = MappingOptions(mapped, GetForeignServerByName(kServer, false)->serverid, &found);
  CheckMappingOptions(mapped, mapped, options);
  PG_RETURN_NULL();
}
