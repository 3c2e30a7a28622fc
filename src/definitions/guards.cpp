// guards.cpp: a counter's owner and privileges are those of a sequence, its guard.
//
// PostgreSQL holds the owner and the grantees of its own objects by OID and records them in
// pg_shdepend, the one catalog every database shares: so a renamed role keeps what it owns and
// was granted, a new role of an old name gets nothing, DROP ROLE is refused (2BP01, the objects
// named) while any database holds something of the role, REASSIGN OWNED gives the objects away
// and DROP OWNED drops or revokes them. A counter is a row of slotted_counter.counters, which
// PostgreSQL knows nothing of; so each counter has a catalog object of PostgreSQL's own that
// carries its owner and ACL: the sequence slotted_counters.<counter name>, made by sc_create and
// dropped by sc_drop. Its SELECT privilege reads the counter, its UPDATE writes it; its owner (and
// the owner's members, and superusers) may do everything. pg_dump dumps it like any sequence, with
// its owner and grants by role name, so a restore into another cluster, --no-owner and --no-acl
// behave as for a table. The sequence's own values are never used.
//
// What PostgreSQL does to the guard by itself, it does to the counter: ALTER ROLE ... RENAME,
// REASSIGN OWNED, the revokes of DROP OWNED, GRANT and REVOKE ON SEQUENCE. What it would do
// that would leave a counter without its guard is completed or refused (role_commands.cpp):
// DROP SEQUENCE of a guard and DROP OWNED drop the counter, DROP EXTENSION drops every guard
// first, and a guard cannot be renamed, moved or altered as a sequence, nor dropped otherwise
// while its counter exists.
#include <initializer_list>

#include "definitions/guards.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_sequence.h"
#include "commands/sequence.h"
#include "commands/tablecmds.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "storage/lmgr.h"
#include "parser/parse_node.h"
#include "utils/fmgroids.h"
#include "utils/syscache.h"
}

namespace sc {

const char* const kGuardSchema = "slotted_counters";

namespace {

Oid GuardSchema() { return get_namespace_oid(kGuardSchema, true); }

}  // namespace

Oid GuardOwner(Oid guard) {
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(guard));
  if (!HeapTupleIsValid(tuple)) return InvalidOid;
  Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  return owner;
}

int64 GuardStart(Oid guard) {
  HeapTuple tuple = SearchSysCache1(SEQRELID, ObjectIdGetDatum(guard));
  if (!HeapTupleIsValid(tuple)) return 0;
  int64 start = reinterpret_cast<Form_pg_sequence>(GETSTRUCT(tuple))->seqstart;
  ReleaseSysCache(tuple);
  return start;
}

bool IsGuard(Oid relid) {
  Oid schema = GuardSchema();
  return OidIsValid(schema) && get_rel_namespace(relid) == schema &&
         get_rel_relkind(relid) == RELKIND_SEQUENCE;
}

List* AllGuards() {
  Oid schema = GuardSchema();
  List* guards = NIL;
  if (!OidIsValid(schema)) return guards;
  Relation rel = table_open(RelationRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber, F_OIDEQ,
              ObjectIdGetDatum(schema));
  SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 1, &key);
  HeapTuple tuple;
  while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
    auto* form = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple));
    if (form->relkind == RELKIND_SEQUENCE) guards = lappend_oid(guards, form->oid);
  }
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return guards;
}

Oid FindGuard(const char* name) {
  Oid schema = GuardSchema();
  if (!OidIsValid(schema)) return InvalidOid;
  Oid relid = get_relname_relid(name, schema);
  return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_SEQUENCE ? relid : InvalidOid;
}

void CreateGuard(const char* name, int32 id, Oid owner) {
  // The guard of a counter of this name that an sc_drop just dropped may still be in this
  // backend's caches: a transaction shows as committed (and so its DELETE of the counter's row
  // let this sc_create insert its own) before it sends the invalidations of its catalog changes,
  // and its commit purges the buffer in between. It holds its lock on the guard until after it
  // sent them: waiting for that lock (whose taking reads them) and looking again tells a guard
  // that is gone from one that is there. Without it, core said 42P07 ("relation ... already
  // exists").
  Oid existing = FindGuard(name);
  if (OidIsValid(existing)) {
    LockRelationOid(existing, AccessShareLock);
    if (OidIsValid(FindGuard(name)))
      ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                      errmsg("the guard of counter \"%s\" already exists", name),
                      errdetail("The sequence %s.%s, which would hold the new counter's owner and "
                                "privileges, belongs to no counter.",
                                kGuardSchema, quote_identifier(name)),
                      errhint("Drop that sequence, or create the counter under another name.")));
  }
  // As the extension, which owns the schema (no role may create in it), for `owner`.
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, saved_context | SECURITY_LOCAL_USERID_CHANGE);
  CreateSeqStmt* stmt = makeNode(CreateSeqStmt);
  stmt->sequence = makeRangeVar(pstrdup(kGuardSchema), pstrdup(name), -1);
  stmt->options = list_make1(makeDefElem(pstrdup("start"),
                                          reinterpret_cast<Node*>(makeInteger(id)), -1));
  stmt->ownerId = owner;
  stmt->for_identity = false;
  stmt->if_not_exists = false;
  ParseState* pstate = make_parsestate(nullptr);
  pstate->p_sourcetext = "";
  (void)DefineSequence(pstate, stmt);
  SetUserIdAndSecContext(saved_user, saved_context);
  CommandCounterIncrement();
}

void DropGuard(Oid guard, DropBehavior behavior) {
  ObjectAddress object;
  ObjectAddressSet(object, RelationRelationId, guard);
  performDeletion(&object, behavior, PERFORM_DELETION_INTERNAL);
  CommandCounterIncrement();
}

void ChangeGuardOwner(Oid guard, Oid owner) {
  ATExecChangeOwner(guard, owner, true, AccessExclusiveLock);
  CommandCounterIncrement();
}

void GrantOnGuard(const char* name, AclMode mask, const char* role, bool grant) {
  GrantStmt* stmt = makeNode(GrantStmt);
  stmt->is_grant = grant;
  stmt->targtype = ACL_TARGET_OBJECT;
  stmt->objtype = OBJECT_SEQUENCE;
  stmt->objects = list_make1(makeRangeVar(pstrdup(kGuardSchema), pstrdup(name), -1));
  stmt->privileges = NIL;
  for (const char* privilege : {"select", "update"}) {
    AclMode bit = strcmp(privilege, "select") == 0 ? ACL_SELECT : ACL_UPDATE;
    if ((mask & bit) == 0) continue;
    AccessPriv* access = makeNode(AccessPriv);
    access->priv_name = pstrdup(privilege);
    access->cols = NIL;
    stmt->privileges = lappend(stmt->privileges, access);
  }
  RoleSpec* grantee = makeNode(RoleSpec);
  grantee->roletype = role == nullptr ? ROLESPEC_PUBLIC : ROLESPEC_CSTRING;
  grantee->rolename = role == nullptr ? nullptr : pstrdup(role);
  grantee->location = -1;
  stmt->grantees = list_make1(grantee);
  stmt->grant_option = false;
  stmt->grantor = nullptr;
  stmt->behavior = DROP_RESTRICT;
  ExecuteGrantStmt(stmt);
  CommandCounterIncrement();
}

AclMode GuardPrivileges(Oid guard, Oid role, bool* owns) {
  *owns = false;
  if (OidIsValid(role) && superuser_arg(role)) {
    *owns = true;
    return ACL_SELECT | ACL_UPDATE;
  }
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(guard));
  if (!HeapTupleIsValid(tuple)) return 0;
  Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  bool isnull;
  Datum datum = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_relacl, &isnull);
  Acl* acl = isnull ? acldefault(OBJECT_SEQUENCE, owner) : DatumGetAclPCopy(datum);
  ReleaseSysCache(tuple);
  if (OidIsValid(role) && has_privs_of_role(role, owner)) {
    pfree(acl);
    *owns = true;
    return ACL_SELECT | ACL_UPDATE;
  }
  AclMode held = 0;
  if (OidIsValid(role)) {
    // As for any relation: the ACL, and pg_read_all_data / pg_write_all_data.
    held = pg_class_aclmask(guard, role, ACL_SELECT | ACL_UPDATE, ACLMASK_ALL);
  } else {
    const AclItem* items = ACL_DAT(acl);
    for (int i = 0; i < ACL_NUM(acl); i++)
      if (items[i].ai_grantee == ACL_ID_PUBLIC) held |= ACLITEM_GET_PRIVS(items[i]);
  }
  pfree(acl);
  return held & (ACL_SELECT | ACL_UPDATE);
}

}  // namespace sc
