// routed.cpp: the calls the router routes itself, without PL/Proxy: sc_incr and sc_sum (bigint
// and text keys), the hot path of a routed application, and sc_proxy_node_of, which names a
// key's node so that an application can skip the router. Every other call goes through PL/Proxy
// (sql/slotted_counter_proxy--1.0.sql); both check a call and pick its node with the same code
// (route.hpp, core/routing.hpp).
//
// A call, in order (the order of route.cpp, so errors are the same): the session
// is not a router's own (55000), the caller reaches the nodes as itself (42501), a write is not in
// a read-only transaction (25006), the counter is in the router's catalog (22004, 42704), the
// key is given (22004) and of the counter's kind (42804, or 22P02/22003 for a text that is not a
// bigint), a transactional write is outside a transaction block (25001); then the key's home node,
// or a node at random for a spread counter's write, or every node for its read, gets one prepared
// statement (remote.cpp). The catalog is read by an index scan per call, so a counter created or
// dropped is routed by the next call; no state is kept here.

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "compat.hpp"
#include "checks.hpp"
#include "core/routing.hpp"
#include "nodes.hpp"
#include "catalog.hpp"
#include "remote.hpp"
#include "route.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_proxy_incr);
PG_FUNCTION_INFO_V1(sc_proxy_incr_text);
PG_FUNCTION_INFO_V1(sc_proxy_sum);
PG_FUNCTION_INFO_V1(sc_proxy_sum_text);
PG_FUNCTION_INFO_V1(sc_proxy_node_of);
PG_FUNCTION_INFO_V1(sc_proxy_node_of_text);
}

namespace {

using sc_proxy::kServer;

// slotted_counter_proxy.nodes' columns, as the install script creates them.
constexpr AttrNumber kNodeColumn = 1;
constexpr AttrNumber kConnstrColumn = 2;

using Route = sc_proxy::CounterRow;
using sc_proxy::Key;

// Node `node`'s string as sc_proxy_configure was given it (slotted_counter_proxy.nodes): without
// the router's settings, which are for the router's own connections.
Datum GivenNodeString(int node) {
  Oid schema = get_namespace_oid(kServer, false);
  Relation table = table_open(get_relname_relid("nodes", schema), AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, kNodeColumn, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(node));
  SysScanDesc scan =
      systable_beginscan(table, get_relname_relid("nodes_pkey", schema), true,
                         ActiveSnapshotSet() ? GetActiveSnapshot() : nullptr, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  Datum connstr = (Datum)0;
  if (HeapTupleIsValid(tuple)) {
    bool isnull;
    connstr = PointerGetDatum(DatumGetTextPCopy(
        heap_getattr(tuple, kConnstrColumn, RelationGetDescr(table), &isnull)));
  }
  systable_endscan(scan);
  table_close(table, AccessShareLock);
  if (connstr == (Datum)0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("data node %d is not in slotted_counter_proxy.nodes", node),
                    errhint("A superuser calls sc_proxy_configure(nodes) again.")));
  return connstr;
}

// Argument n of the SQL call as argument `to` of the routed one.
void Pass(sc_proxy::Call* call, FunctionCallInfo fcinfo, int n) {
  int to = call->nargs++;
  call->nulls[to] = PG_ARGISNULL(n);
  call->args[to] = call->nulls[to] ? (Datum)0 : PG_GETARG_DATUM(n);
}

// The routed call: the counter (argument 0, detoasted) and the key.
sc_proxy::Call Begin(FunctionCallInfo fcinfo, const Key& key) {
  sc_proxy::Call call = {};
  call.nargs = 2;
  call.args[0] = PointerGetDatum(PG_GETARG_TEXT_PP(0));
  call.args[1] = key.value;
  return call;
}

// sc_incr(counter, key, delta [, at]) on the router.
Datum Increment(FunctionCallInfo fcinfo, bool text_arg) {
  sc_proxy::CheckCaller();
  sc_proxy::CheckWritable("sc_incr()");
  Route route = sc_proxy::LookupCounter(fcinfo, 0);
  const char* counter = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Key key = sc_proxy::ReadKey(fcinfo, 1, text_arg, route, counter);
  if (route.transactional) sc_proxy::CheckAutocommit(counter);
  int nodes = sc_proxy::NodeCount();
  int node = route.spread ? sc_proxy::RandomNode() : sc_proxy::NodeOfHash(key.hash, nodes);
  bool at = PG_NARGS() == 4;
  sc_proxy::Call call = Begin(fcinfo, key);
  Pass(&call, fcinfo, 2);
  if (at) Pass(&call, fcinfo, 3);
  call.statement =
      key.text_form ? (at ? sc_proxy::Statement::kIncrTextAt : sc_proxy::Statement::kIncrText)
                    : (at ? sc_proxy::Statement::kIncrAt : sc_proxy::Statement::kIncr);
  int64 result;
  bool isnull;
  sc_proxy::RunOnNodes(call, &node, 1, true, &result, &isnull);
  if (isnull) PG_RETURN_NULL();
  PG_RETURN_INT64(result);
}

// sc_sum(counter, key) on the router: the home node's value, or every node's for a spread
// counter, added (22003 past a bigint, as sum(bigint)::bigint).
Datum Sum(FunctionCallInfo fcinfo, bool text_arg) {
  sc_proxy::CheckCaller();
  Route route = sc_proxy::LookupCounter(fcinfo, 0);
  const char* counter = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Key key = sc_proxy::ReadKey(fcinfo, 1, text_arg, route, counter);
  int count = route.spread ? sc_proxy::NodeCount() : 1;
  int* nodes = static_cast<int*>(palloc(sizeof(int) * count));
  if (route.spread) {
    for (int i = 0; i < count; i++) nodes[i] = i;
  } else {
    nodes[0] = sc_proxy::NodeOfHash(key.hash, sc_proxy::NodeCount());
  }
  sc_proxy::Call call = Begin(fcinfo, key);
  call.statement = key.text_form ? sc_proxy::Statement::kSumText : sc_proxy::Statement::kSum;
  int64* results = static_cast<int64*>(palloc(sizeof(int64) * count));
  bool* nulls = static_cast<bool*>(palloc(sizeof(bool) * count));
  sc_proxy::RunOnNodes(call, nodes, count, false, results, nulls);
  int64 total = 0;
  bool any = false;
  for (int i = 0; i < count; i++) {
    if (nulls[i]) continue;
    any = true;
    if (pg_add_s64_overflow(total, results[i], &total))
      ereport(ERROR,
              (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
  }
  if (!any) PG_RETURN_NULL();
  PG_RETURN_INT64(total);
}

// sc_proxy_node_of(counter, key) -> (node, connstr): where the key lives.
Datum NodeOf(FunctionCallInfo fcinfo, bool text_arg) {
  Route route = sc_proxy::LookupCounter(fcinfo, 0);
  const char* counter = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Key key = sc_proxy::ReadKey(fcinfo, 1, text_arg, route, counter);
  if (route.spread)
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("counter \"%s\" is spread over the data nodes: its keys have no home node",
                    counter),
             errdetail("Each write goes to a node at random and each read adds every node's "
                       "share."),
             errhint("Write it on any node, and read it as the sum of sc_sum on every node, or "
                     "through the router.")));
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "return type must be a row type");
  int node = sc_proxy::NodeOfHash(key.hash, sc_proxy::NodeCount());
  Datum values[2] = {Int32GetDatum(node), GivenNodeString(node)};
  bool nulls[2] = {false, false};
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

}  // namespace

// sc_incr(counter text, key bigint DEFAULT 0, delta bigint DEFAULT 1 [, at timestamptz])
extern "C" Datum sc_proxy_incr(PG_FUNCTION_ARGS) { return Increment(fcinfo, false); }

// sc_incr(counter text, key text, delta bigint DEFAULT 1 [, at timestamptz])
extern "C" Datum sc_proxy_incr_text(PG_FUNCTION_ARGS) { return Increment(fcinfo, true); }

// sc_sum(counter text, key bigint DEFAULT 0)
extern "C" Datum sc_proxy_sum(PG_FUNCTION_ARGS) { return Sum(fcinfo, false); }

// sc_sum(counter text, key text)
extern "C" Datum sc_proxy_sum_text(PG_FUNCTION_ARGS) { return Sum(fcinfo, true); }

// sc_proxy_node_of(counter text, key bigint, OUT node integer, OUT connstr text)
extern "C" Datum sc_proxy_node_of(PG_FUNCTION_ARGS) { return NodeOf(fcinfo, false); }

// sc_proxy_node_of(counter text, key text, OUT node integer, OUT connstr text)
extern "C" Datum sc_proxy_node_of_text(PG_FUNCTION_ARGS) { return NodeOf(fcinfo, true); }
