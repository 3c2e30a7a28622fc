// catalog.cpp: the router's catalog (slotted_counter_proxy.counters) and the three calls that
// change it, sc_create, sc_drop and sc_alter_owner.
//
// A row says how the router routes a counter: whether it is spread over the nodes, and its key
// type. A role that could write another's row could split that counter's keys over the nodes,
// take a name before its owner creates it, or make a second router read shares of a counter as
// its own. So a row is written only here, as the table's owner (under
// SECURITY_RESTRICTED_OPERATION, search_path pinned), and only after every data node answered
// that the caller owns the counter there. That question goes over the router's own connections
// (remote.cpp, AskEveryNode) as the caller, with the router's settings (search_path pinned to
// pg_catalog, slotted_counter's schema and pg_temp) and every operator, function and table in it
// qualified: nothing of the caller's own session on a node (its default search_path, operators,
// functions or types of its schemas, temporary objects) takes part in the answer. No SQL
// function writes the catalog, and no role may write the table.
//
// The changes themselves reach the nodes through PL/Proxy as the caller (node_create,
// node_drop, node_alter_owner), and each node checks that the caller may make them. The nodes
// commit at once and the router's row with the caller's transaction, so the three refuse a
// transaction block (checks.hpp).

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include "compat.hpp"
#include "catalog.hpp"
#include "checks.hpp"
#include "nodes.hpp"
#include "remote.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_proxy_create);
PG_FUNCTION_INFO_V1(sc_proxy_drop);
PG_FUNCTION_INFO_V1(sc_proxy_alter_owner);
}

namespace {

using sc_proxy::kServer;


// What every node is asked, as the caller: whether it defines the counter $1, whether the caller
// (the session's user, the role the router connected as) has its owner's privileges there (as a
// superuser has), its durability, key type and owner (its guard's, slotted_counters.<name>), and
// whether it is defined as asked ($2 durability, $3 bucket, $4 retention, $5 key type, a rate
// limiter's $6 rate, $7 per and $8 burst, $9 kind and a distinct counter's $10 log2m). What was
// asked is compared as the node reads it: a NULL burst is the rate, a NULL kind what the rate
// makes, a NULL log2m 14, and a limiter's retention is the one its node computes from the limit
// (a retention given with a rate fails on the node), so the limit alone decides. A node shows a
// counter's row only to the roles that may read it, so "not defined" is also what a role that
// may not read it sees.
constexpr const char* kOwnerQuestion =
    "SELECT c.name IS NOT NULL, "
    "c.name IS NOT NULL AND coalesce(pg_catalog.pg_has_role(SESSION_USER, g.relowner, 'USAGE'), "
    "(SELECT r.rolsuper FROM pg_catalog.pg_roles AS r "
    "WHERE r.rolname OPERATOR(pg_catalog.=) SESSION_USER)), "
    "c.durability, c.key_type, pg_catalog.pg_get_userbyid(g.relowner), "
    "c.durability OPERATOR(pg_catalog.=) $2 AND c.key_type OPERATOR(pg_catalog.=) $5 "
    "AND coalesce(c.bucket OPERATOR(pg_catalog.=) $3, c.bucket IS NULL AND $3 IS NULL) "
    "AND ($6 IS NOT NULL "
    "OR coalesce(c.retain OPERATOR(pg_catalog.=) $4, c.retain IS NULL AND $4 IS NULL)) "
    "AND coalesce(c.rate OPERATOR(pg_catalog.=) $6, c.rate IS NULL AND $6 IS NULL) "
    "AND coalesce(c.per OPERATOR(pg_catalog.=) $7, c.per IS NULL AND $7 IS NULL) "
    "AND coalesce(c.burst OPERATOR(pg_catalog.=) coalesce($8, $6), "
    "c.burst IS NULL AND $8 IS NULL AND $6 IS NULL) "
    "AND c.kind OPERATOR(pg_catalog.=) coalesce($9, CASE WHEN $6 IS NULL THEN 'count' "
    "ELSE 'limiter' END) "
    "AND coalesce(c.log2m OPERATOR(pg_catalog.=) coalesce($10, 14), c.log2m IS NULL AND "
    "coalesce($9, '') OPERATOR(pg_catalog.<>) 'distinct') "
    "FROM (SELECT) AS one "
    "LEFT JOIN slotted_counter.counters AS c ON c.name OPERATOR(pg_catalog.=) $1 "
    "LEFT JOIN pg_catalog.pg_class AS g "
    "ON g.relnamespace OPERATOR(pg_catalog.=) 'slotted_counters'::pg_catalog.regnamespace "
    "AND g.relname OPERATOR(pg_catalog.=) c.name AND g.relkind OPERATOR(pg_catalog.=) 'S'";
constexpr int kOwnerFields = 6;

// What the nodes answered, added up.
struct NodesSay {
  int nodes;
  int defined;
  int owned;
  int as_asked;
  bool alike;              // every node the same durability, key type and owner
  const char* durability;  // node 0's
  const char* key_type;
  const char* owner;
};

// What a counter's definition was asked to be (sc_create), for the question's $2 to $10.
struct Asked {
  const char* durability;
  Datum bucket;  // interval, (Datum)0 for NULL
  Datum retain;
  const char* key_type;
  const char* rate;  // a bigint as text, nullptr for NULL
  Datum per;         // interval, (Datum)0 for NULL
  const char* burst;
  const char* kind;   // nullptr for NULL
  const char* log2m;  // an integer as text, nullptr for NULL
};

bool True(const char* field) { return field != nullptr && strcmp(field, "t") == 0; }

bool SameText(const char* a, const char* b) {
  return a == nullptr ? b == nullptr : b != nullptr && strcmp(a, b) == 0;
}

// An interval parameter in binary (interval_send), or NULL.
void IntervalParam(Datum value, const char** param, int* length) {
  if (value == (Datum)0) return;
  bytea* sent = DatumGetByteaPP(DirectFunctionCall1(interval_send, value));
  *param = VARDATA_ANY(sent);
  *length = VARSIZE_ANY_EXHDR(sent);
}

NodesSay AskOwner(text* counter, const Asked& asked) {
  Oid types[10] = {TEXTOID, TEXTOID,     INTERVALOID, INTERVALOID, TEXTOID,
                   INT8OID, INTERVALOID, INT8OID,     TEXTOID,     INT4OID};
  const char* values[10] = {text_to_cstring(counter), asked.durability, nullptr, nullptr,
                            asked.key_type, asked.rate, nullptr, asked.burst, asked.kind,
                            asked.log2m};
  int lengths[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int formats[10] = {0, 0, 1, 1, 0, 0, 1, 0, 0, 0};
  IntervalParam(asked.bucket, &values[2], &lengths[2]);
  IntervalParam(asked.retain, &values[3], &lengths[3]);
  IntervalParam(asked.per, &values[6], &lengths[6]);
  sc_proxy::Question question = {kOwnerQuestion, 10, types, values, lengths, formats,
                                 kOwnerFields};
  char*** answers = sc_proxy::AskEveryNode(question);
  NodesSay say = {};
  say.nodes = sc_proxy::NodeCount();
  say.alike = true;
  say.durability = answers[0][2];
  say.key_type = answers[0][3];
  say.owner = answers[0][4];
  for (int node = 0; node < say.nodes; node++) {
    char** a = answers[node];
    say.defined += True(a[0]);
    say.owned += True(a[1]);
    say.as_asked += True(a[5]);
    say.alike = say.alike && SameText(a[2], say.durability) && SameText(a[3], say.key_type) &&
                SameText(a[4], say.owner);
  }
  return say;
}

[[noreturn]] void NotOwner(const char* counter) {
  ereport(ERROR,
          (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
           errmsg("must be owner of counter \"%s\" on every data node", counter),
           errdetail("The router records a counter only for a role that owns it on the data "
                     "nodes.")));
}

[[noreturn]] void DefinedDifferently(const char* counter) {
  ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                  errmsg("counter \"%s\" is defined differently on the data nodes", counter),
                  errhint("It was created on a node directly; drop it there or here.")));
}

// 42501 unless the caller owns the counter on every node, which define it alike (42710) and name
// its owner.
void RequireOwnedEverywhere(const NodesSay& say, const char* counter) {
  if (say.owned != say.nodes) NotOwner(counter);
  if (!say.alike) DefinedDifferently(counter);
  if (say.owner == nullptr)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("counter \"%s\" has no owner on the data nodes", counter),
                    errdetail("Its guard, the sequence slotted_counters.%s, is missing.", counter)));
}

Oid CountersTable() {
  return get_relname_relid("counters", get_namespace_oid(kServer, false));
}

// The owner the router records for counter, or InvalidOid when it does not route it.
Oid RecordedOwner(text* counter) {
  sc_proxy::CounterRow row;
  return sc_proxy::ReadCounterRow(counter, &row) ? row.owner : InvalidOid;
}

// Runs sql (a statement of this file's, every name qualified) as the owner of the router's
// catalog, under SECURITY_RESTRICTED_OPERATION; returns the rows it changed. Inside SPI.
uint64 WriteCatalog(const char* sql, int nargs, Oid* types, Datum* values) {
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(CountersTable()));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "cache lookup failed for slotted_counter_proxy.counters");
  Oid catalog_owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  Oid user;
  int security_context;
  GetUserIdAndSecContext(&user, &security_context);
  SetUserIdAndSecContext(catalog_owner, security_context | SECURITY_LOCAL_USERID_CHANGE |
                                            SECURITY_RESTRICTED_OPERATION);
  if (SPI_execute_with_args(sql, nargs, types, values, nullptr, false, 0) < 0)
    elog(ERROR, "writing slotted_counter_proxy.counters failed");
  uint64 written = SPI_processed;
  SetUserIdAndSecContext(user, security_context);
  return written;
}

// Runs sql (a call of a PL/Proxy function of the router) as the caller. Inside SPI.
void CallNodes(const char* sql, int nargs, Oid* types, Datum* values, const char* nulls) {
  if (SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0) != SPI_OK_SELECT)
    elog(ERROR, "calling the data nodes failed: %s", sql);
}

// What every call here starts with, in the order of every routed call: 55000 in a router's
// session, 42501 unless the caller acts as itself, 25006 in a read-only transaction, 25001 in a
// transaction block. Then SPI, with search_path pinned (its GUC nest level is returned).
int Begin(const char* function, const char* action) {
  sc_proxy::CheckCaller();
  sc_proxy::CheckWritable(function);
  sc_proxy::CheckNotInBlock(action);
  int nest_level = NewGUCNestLevel();
  sc::RestrictSearchPathToCatalog();
  SPI_connect();
  return nest_level;
}

void End(int nest_level) {
  SPI_finish();
  AtEOXact_GUC(true, nest_level);
}

text* NotNull(FunctionCallInfo fcinfo, int n, const char* name) {
  if (PG_ARGISNULL(n))
    ereport(ERROR,
            (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", name)));
  return PG_GETARG_TEXT_PP(n);
}

// Argument n, or (Datum)0 for NULL.
Datum ArgOrZero(FunctionCallInfo fcinfo, int n) {
  return PG_ARGISNULL(n) ? (Datum)0 : PG_GETARG_DATUM(n);
}

// Bigint argument n as text, or nullptr for NULL.
const char* BigintText(FunctionCallInfo fcinfo, int n) {
  return PG_ARGISNULL(n) ? nullptr : psprintf(INT64_FORMAT, PG_GETARG_INT64(n));
}

}  // namespace

// sc_create(name text, durability text, bucket interval, retain interval, if_not_exists boolean,
// spread boolean, key_type text, rate bigint, per interval, burst bigint, kind text, log2m
// integer) RETURNS text: creates the counter on every node (if it is not there already), and
// records it, with spread and the nodes' definition, for its owner. A rate limiter (a rate given)
// is not spread (0A000): each node would admit a burst of its own for every key; nor is a
// distinct counter: a key's sketch is kept by its home node, which answers sc_add.
extern "C" Datum sc_proxy_create(PG_FUNCTION_ARGS) {
  constexpr int kRate = 7, kPer = 8, kBurst = 9, kKind = 10, kLog2m = 11;
  int nest_level = Begin("sc_create()", "sc_create");
  text* name = NotNull(fcinfo, 0, "name");
  if (PG_ARGISNULL(4) || PG_ARGISNULL(5))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                    errmsg("%s must not be null", PG_ARGISNULL(5) ? "spread" : "if_not_exists")));
  const char* counter = text_to_cstring(name);
  if (PG_GETARG_BOOL(5) && !PG_ARGISNULL(kRate))
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("rate limiter \"%s\" cannot be spread over the data nodes", counter),
             errdetail("Each node would admit a burst of its own for every key."),
             errhint("Create it without spread: each key's limit is kept on the key's node.")));
  if (PG_GETARG_BOOL(5) && !PG_ARGISNULL(kKind) &&
      strcmp(text_to_cstring(PG_GETARG_TEXT_PP(kKind)), "distinct") == 0)
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("distinct counter \"%s\" cannot be spread over the data nodes", counter),
             errdetail("Each node would answer sc_add() from its own part of a key's sketch."),
             errhint("Create it without spread: each key's sketch is kept on the key's node.")));
  if (OidIsValid(RecordedOwner(name))) {
    if (!PG_GETARG_BOOL(4))
      ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                      errmsg("counter \"%s\" already exists", counter)));
    ereport(NOTICE, (errmsg("counter \"%s\" already exists, skipping", counter)));
    End(nest_level);
    PG_RETURN_TEXT_P(name);
  }
  // Every node validates and creates it (an earlier attempt cut short may have created it on
  // some); then every node must show it to the caller as the caller's, defined alike and as asked.
  constexpr int kPassed[10] = {0, 1, 2, 3, 6, kRate, kPer, kBurst, kKind, kLog2m};
  Oid create_types[10] = {TEXTOID, TEXTOID,     INTERVALOID, INTERVALOID, TEXTOID,
                          INT8OID, INTERVALOID, INT8OID,     TEXTOID,     INT4OID};
  Datum create_args[10];
  char create_nulls[11] = {};
  for (int i = 0; i < 10; i++) {
    create_args[i] = ArgOrZero(fcinfo, kPassed[i]);
    create_nulls[i] = PG_ARGISNULL(kPassed[i]) ? 'n' : ' ';
  }
  create_args[0] = PointerGetDatum(name);
  CallNodes("SELECT pg_catalog.count(*) "
            "FROM slotted_counter_proxy.node_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            10, create_types, create_args, create_nulls);
  Asked asked = {PG_ARGISNULL(1) ? "transactional" : text_to_cstring(PG_GETARG_TEXT_PP(1)),
                 ArgOrZero(fcinfo, 2),
                 ArgOrZero(fcinfo, 3),
                 PG_ARGISNULL(6) ? "bigint" : text_to_cstring(PG_GETARG_TEXT_PP(6)),
                 BigintText(fcinfo, kRate),
                 ArgOrZero(fcinfo, kPer),
                 BigintText(fcinfo, kBurst),
                 PG_ARGISNULL(kKind) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(kKind)),
                 PG_ARGISNULL(kLog2m) ? nullptr : psprintf("%d", PG_GETARG_INT32(kLog2m))};
  NodesSay say = AskOwner(name, asked);
  RequireOwnedEverywhere(say, counter);
  if (say.as_asked != say.nodes) {
    if (say.as_asked > 0) DefinedDifferently(counter);
    ereport(ERROR,
            (errcode(ERRCODE_DUPLICATE_OBJECT),
             errmsg("counter \"%s\" already exists on the data nodes with another definition",
                    counter)));
  }
  Oid types[5] = {TEXTOID, TEXTOID, BOOLOID, OIDOID, TEXTOID};
  Datum values[5] = {PointerGetDatum(name), CStringGetTextDatum(say.durability),
                     PG_GETARG_DATUM(5), ObjectIdGetDatum(get_role_oid(say.owner, false)),
                     CStringGetTextDatum(say.key_type)};
  uint64 written = WriteCatalog(
      "INSERT INTO slotted_counter_proxy.counters (name, durability, spread, owner, key_type) "
      "VALUES ($1, $2, $3, $4::pg_catalog.regrole, $5) ON CONFLICT (name) DO NOTHING",
      5, types, values);
  if (written == 0)
    ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                    errmsg("counter \"%s\" already exists", counter)));
  End(nest_level);
  PG_RETURN_TEXT_P(name);
}

// sc_drop(counter text, if_exists boolean) RETURNS void: removes the router's row, then drops the
// counter on every node. Wherever the caller sees the counter it must have its owner's
// privileges, and either it sees it on every node or the router's row is the caller's (a counter
// already dropped from the nodes, through another router, looks like one it may not read).
extern "C" Datum sc_proxy_drop(PG_FUNCTION_ARGS) {
  int nest_level = Begin("sc_drop()", "sc_drop");
  text* name = NotNull(fcinfo, 0, "counter");
  const char* counter = text_to_cstring(name);
  Oid recorded = RecordedOwner(name);
  if (!OidIsValid(recorded)) {
    if (PG_ARGISNULL(1) || !PG_GETARG_BOOL(1))
      ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                      errmsg("counter \"%s\" does not exist", counter)));
    ereport(NOTICE, (errmsg("counter \"%s\" does not exist, skipping", counter)));
    End(nest_level);
    PG_RETURN_VOID();
  }
  bool mine = has_privs_of_role(GetUserId(), recorded);
  NodesSay say = AskOwner(name, Asked{});
  if (say.owned != say.defined || (say.owned != say.nodes && !mine)) NotOwner(counter);
  // The row goes in this transaction, the nodes' counter next: a drop cut short by a node that is
  // down keeps the row, and can be repeated.
  Oid types[1] = {TEXTOID};
  Datum values[1] = {PointerGetDatum(name)};
  if (WriteCatalog("DELETE FROM slotted_counter_proxy.counters "
                   "WHERE name OPERATOR(pg_catalog.=) $1",
                   1, types, values) == 0)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter \"%s\" does not exist", counter)));
  CallNodes("SELECT pg_catalog.count(*) FROM slotted_counter_proxy.node_drop($1)", 1, types,
            values, nullptr);
  End(nest_level);
  PG_RETURN_VOID();
}

// sc_alter_owner(counter text, role text) RETURNS void: gives the counter away on every node (each
// checks the giver may, and to whom), then records the owner the nodes name. If the recording
// fails, calling it again records it.
extern "C" Datum sc_proxy_alter_owner(PG_FUNCTION_ARGS) {
  int nest_level = Begin("sc_alter_owner()", "sc_alter_owner");
  text* name = NotNull(fcinfo, 0, "counter");
  const char* counter = text_to_cstring(name);
  if (!OidIsValid(RecordedOwner(name)))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter \"%s\" does not exist", counter)));
  Oid call_types[2] = {TEXTOID, TEXTOID};
  Datum call_args[2] = {PointerGetDatum(name), PG_ARGISNULL(1) ? (Datum)0 : PG_GETARG_DATUM(1)};
  CallNodes("SELECT pg_catalog.count(*) FROM slotted_counter_proxy.node_alter_owner($1, $2)", 2,
            call_types, call_args, PG_ARGISNULL(1) ? " n" : nullptr);
  const char* role = text_to_cstring(NotNull(fcinfo, 1, "role"));
  NodesSay say = AskOwner(name, Asked{});
  RequireOwnedEverywhere(say, counter);
  // The owner the nodes name: the caller's role only confirms it.
  if (!SameText(say.owner, role))
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("counter \"%s\" is owned by \"%s\" on the data nodes, not by \"%s\"",
                           counter, say.owner != nullptr ? say.owner : "", role)));
  Oid types[2] = {TEXTOID, OIDOID};
  Datum values[2] = {PointerGetDatum(name), ObjectIdGetDatum(get_role_oid(say.owner, false))};
  if (WriteCatalog("UPDATE slotted_counter_proxy.counters SET owner = $2::pg_catalog.regrole "
                   "WHERE name OPERATOR(pg_catalog.=) $1",
                   2, types, values) == 0)
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter \"%s\" does not exist", counter)));
  End(nest_level);
  PG_RETURN_VOID();
}

namespace sc_proxy {

namespace {

// slotted_counter_proxy.counters' columns, as the install script creates them.
constexpr AttrNumber kNameColumn = 1;
constexpr AttrNumber kDurabilityColumn = 2;
constexpr AttrNumber kSpreadColumn = 3;
constexpr AttrNumber kOwnerColumn = 4;
constexpr AttrNumber kKeyTypeColumn = 6;

bool TextEquals(const text* value, const char* literal) {
  size_t length = strlen(literal);
  return VARSIZE_ANY_EXHDR(value) == length && memcmp(VARDATA_ANY(value), literal, length) == 0;
}

}  // namespace

bool ReadCounterRow(const text* name, CounterRow* row) {
  Oid schema = get_namespace_oid(kServer, false);
  Relation table = table_open(CountersTable(), AccessShareLock);
  TupleDesc desc = RelationGetDescr(table);
  Assert(desc->natts >= kKeyTypeColumn);
  ScanKeyData key;
  ScanKeyEntryInitialize(&key, 0, kNameColumn, BTEqualStrategyNumber, InvalidOid,
                         TupleDescAttr(desc, kNameColumn - 1)->attcollation, F_TEXTEQ,
                         PointerGetDatum(name));
  SysScanDesc scan =
      systable_beginscan(table, get_relname_relid("counters_pkey", schema), true,
                         ActiveSnapshotSet() ? GetActiveSnapshot() : nullptr, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  bool found = HeapTupleIsValid(tuple);
  if (found) {
    bool isnull;
    row->transactional = TextEquals(
        DatumGetTextPP(heap_getattr(tuple, kDurabilityColumn, desc, &isnull)), "transactional");
    row->spread = DatumGetBool(heap_getattr(tuple, kSpreadColumn, desc, &isnull));
    row->text_keys =
        TextEquals(DatumGetTextPP(heap_getattr(tuple, kKeyTypeColumn, desc, &isnull)), "text");
    row->owner = DatumGetObjectId(heap_getattr(tuple, kOwnerColumn, desc, &isnull));
  }
  systable_endscan(scan);
  table_close(table, AccessShareLock);
  return found;
}

}  // namespace sc_proxy
