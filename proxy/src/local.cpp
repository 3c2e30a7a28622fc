// local.cpp: a routed call whose node is this very database, called in-process. A router may be
// installed beside slotted_counter, in a schema of its own (docs/router.md, "A router in a data
// node"): that node's keys then cost no hop, as a distributed function call costs none on the
// node that holds its shard. The call is slotted_counter's own function (of its extension's
// schema, never found by search_path), with USAGE on that schema and EXECUTE on the function
// checked for the current role as a query naming it would be, in the caller's transaction. Per
// backend: one resolved function per statement, looked up again when it no longer exists (the
// extension dropped and created again).

extern "C" {
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

#include "compat.hpp"
#include "remote.hpp"

namespace sc_proxy {
namespace {

// A function's arguments after its first, the counter (of slotted_counter's type "slotted_counter",
// made from the name as the node's implicit cast from text makes it).
struct LocalFunction {
  const char* name;
  int nargs;
  Oid types[4];
};

// Indexed by Statement, as remote.cpp's statements; types[0] is filled in by Resolve.
constexpr LocalFunction kFunctions[] = {
    {"sc_incr", 3, {InvalidOid, INT8OID, INT8OID}},
    {"sc_incr", 4, {InvalidOid, INT8OID, INT8OID, TIMESTAMPTZOID}},
    {"sc_incr", 3, {InvalidOid, TEXTOID, INT8OID}},
    {"sc_incr", 4, {InvalidOid, TEXTOID, INT8OID, TIMESTAMPTZOID}},
    {"sc_sum", 2, {InvalidOid, INT8OID}},
    {"sc_sum", 2, {InvalidOid, TEXTOID}},
};
constexpr int kFunctionCount = sizeof(kFunctions) / sizeof(kFunctions[0]);
static_assert(kFunctionCount == static_cast<int>(Statement::kCount), "a function per Statement");

// Resolved functions (fn_oid InvalidOid: not yet), and the input function of the counter type
// each was resolved with, in TopMemoryContext.
FmgrInfo resolved[kFunctionCount];
FmgrInfo counter_input[kFunctionCount];
Oid counter_ioparam[kFunctionCount];

Oid Resolve(int index) {
  const LocalFunction& function = kFunctions[index];
  Oid extension = get_extension_oid("slotted_counter", true);
  if (!OidIsValid(extension))
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("a data node of the router is this database, which has no slotted_counter"),
             errhint("Run CREATE EXTENSION slotted_counter here, or configure the router with "
                     "other nodes.")));
  Oid schema = sc::ExtensionSchema(extension);
  Oid counter_type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
                                     CStringGetDatum("slotted_counter"), ObjectIdGetDatum(schema));
  if (!OidIsValid(counter_type))
    elog(ERROR, "type slotted_counter of extension slotted_counter not found");
  Oid input;
  getTypeInputInfo(counter_type, &input, &counter_ioparam[index]);
  fmgr_info_cxt(input, &counter_input[index], TopMemoryContext);
  Oid types[4];
  memcpy(types, function.types, sizeof(types));
  types[0] = counter_type;
  List* name = list_make2(makeString(get_namespace_name(schema)),
                          makeString(pstrdup(function.name)));
  return LookupFuncName(name, function.nargs, types, false);
}

}  // namespace

Datum CallLocal(const Call& call, bool* isnull) {
  int index = static_cast<int>(call.statement);
  Assert(index >= 0 && index < kFunctionCount);
  Assert(call.nargs == kFunctions[index].nargs);
  FmgrInfo* flinfo = &resolved[index];
  if (!OidIsValid(flinfo->fn_oid) ||
      !SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(flinfo->fn_oid))) {
    flinfo->fn_oid = InvalidOid;
    fmgr_info_cxt(Resolve(index), flinfo, TopMemoryContext);
  }
  // As a query naming the function checks it: USAGE on its schema, EXECUTE on it.
  Oid schema = get_func_namespace(flinfo->fn_oid);
  AclResult acl = sc::ObjectAclCheck(NamespaceRelationId, schema, GetUserId(), ACL_USAGE);
  if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_SCHEMA, get_namespace_name(schema));
  acl = sc::ObjectAclCheck(ProcedureRelationId, flinfo->fn_oid, GetUserId(), ACL_EXECUTE);
  if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_FUNCTION, get_func_name(flinfo->fn_oid));
  InvokeFunctionExecuteHook(flinfo->fn_oid);
  LOCAL_FCINFO(fcinfo, 4);
  InitFunctionCallInfoData(*fcinfo, flinfo, call.nargs, InvalidOid, nullptr, nullptr);
  Assert(!call.nulls[0]);
  fcinfo->args[0].value = InputFunctionCall(&counter_input[index],
                                            text_to_cstring(DatumGetTextPP(call.args[0])),
                                            counter_ioparam[index], -1);
  fcinfo->args[0].isnull = false;
  for (int i = 1; i < call.nargs; i++) {
    fcinfo->args[i].value = call.args[i];
    fcinfo->args[i].isnull = call.nulls[i];
    if (call.nulls[i] && flinfo->fn_strict) {
      *isnull = true;
      return (Datum)0;
    }
  }
  Datum result = FunctionCallInvoke(fcinfo);
  *isnull = fcinfo->isnull;
  return result;
}

}  // namespace sc_proxy
