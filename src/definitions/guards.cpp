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
// that would leave a counter without its guard, this file prevents or completes: a guard is
// dropped only by the extension (sc_drop; DROP OWNED drops the counters first; DROP EXTENSION
// drops every guard first), and it cannot be renamed, moved or altered as a sequence.
#include "definitions/guards.hpp"

#include "definitions/catalog.hpp"
#include "definitions/drop.hpp"
#include "spi.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "commands/tablecmds.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "utils/syscache.h"
}

namespace sc {

const char* const kGuardSchema = "slotted_counters";

namespace {

Oid GuardSchema() { return get_namespace_oid(kGuardSchema, true); }

// Whether relid is a guard: a sequence in the guards' schema.
bool IsGuard(Oid relid) {
  Oid schema = GuardSchema();
  return OidIsValid(schema) && get_rel_namespace(relid) == schema &&
         get_rel_relkind(relid) == RELKIND_SEQUENCE;
}

// The guard a RangeVar names, if it names one; InvalidOid otherwise (or if it names nothing).
Oid GuardNamed(RangeVar* relation) {
  if (relation == nullptr) return InvalidOid;
  Oid relid = RangeVarGetRelid(relation, NoLock, true);
  return OidIsValid(relid) && IsGuard(relid) ? relid : InvalidOid;
}

[[noreturn]] void RefuseAlteringGuard(Oid guard) {
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("cannot alter sequence %s.%s", kGuardSchema, get_rel_name(guard)),
                  errdetail("It holds the owner and the privileges of counter \"%s\".",
                            get_rel_name(guard)),
                  errhint("Use sc_alter_owner(), sc_grant() and sc_revoke(), or ALTER ... OWNER "
                          "TO, GRANT and REVOKE on the sequence.")));
  pg_unreachable();
}

// DROP OWNED: the counters owned by the roles are dropped, as the sequences would be; only when
// the current role may drop what each of them owns (else core's check fails the command).
void DropOwnedCounters(DropOwnedStmt* stmt) {
  if (!OidIsValid(ExtensionRelation("counters"))) return;
  List* roles = NIL;
  ListCell* cell;
  foreach (cell, stmt->roles) {
    Oid role = get_rolespec_oid(static_cast<RoleSpec*>(lfirst(cell)), true);
    if (!OidIsValid(role) || !has_privs_of_role(GetUserId(), role)) return;
    roles = lappend_oid(roles, role);
  }
  // The ids first: dropping reads the catalog again.
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute("SELECT id, name FROM slotted_counter.counters ORDER BY id", true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counters failed: %d", rc);
  List* owned = NIL;
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    int32 id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
                                           &isnull));
    char* name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
    Oid guard = FindGuard(name);
    if (!OidIsValid(guard)) continue;
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(guard));
    if (!HeapTupleIsValid(tuple)) continue;
    Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    if (list_member_oid(roles, owner)) {
      MemoryContext old = MemoryContextSwitchTo(spi.caller);
      owned = lappend_int(owned, id);
      MemoryContextSwitchTo(old);
    }
  }
  FinishSpi(spi);
  foreach (cell, owned) {
    const CounterDef* def = FindCounter(int32(lfirst_int(cell)));
    if (def != nullptr) {
      CounterDef copy = *def;
      (void)DropCounter(copy);
    }
  }
}

// DROP EXTENSION slotted_counter: the guards go first, by the extension, so that the command
// needs no CASCADE (the schema is the extension's; the sequences in it are not).
void DropAllGuards(DropStmt* stmt) {
  ListCell* cell;
  bool ours = false;
  foreach (cell, stmt->objects) {
    Node* object = static_cast<Node*>(lfirst(cell));
    if (IsA(object, String) && strcmp(strVal(object), "slotted_counter") == 0) ours = true;
  }
  Oid schema = GuardSchema();
  if (!ours || !OidIsValid(schema)) return;
  // Only for a role that may drop the extension: core checks that next, and fails otherwise.
  Oid extension = get_extension_oid("slotted_counter", true);
  if (!OidIsValid(extension) || !OwnsExtension(GetUserId(), extension)) return;
  SpiSession spi = ConnectSpi();
  Oid type = OIDOID;
  Datum arg = ObjectIdGetDatum(schema);
  int rc = SPI_execute_with_args(
      "SELECT oid FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) $1 "
      "AND relkind OPERATOR(pg_catalog.=) 'S'",
      1, &type, &arg, nullptr, true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading the guards failed: %d", rc);
  List* guards = NIL;
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    Oid guard = DatumGetObjectId(
        SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    MemoryContext old = MemoryContextSwitchTo(spi.caller);
    guards = lappend_oid(guards, guard);
    MemoryContextSwitchTo(old);
  }
  FinishSpi(spi);
  foreach (cell, guards) DropGuard(lfirst_oid(cell));
}

}  // namespace

Oid FindGuard(const char* name) {
  Oid schema = GuardSchema();
  if (!OidIsValid(schema)) return InvalidOid;
  Oid relid = get_relname_relid(name, schema);
  return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_SEQUENCE ? relid : InvalidOid;
}

void CreateGuard(const char* name, Oid owner) {
  // As the extension, which owns the schema (no role may create in it), for `owner`.
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, saved_context | SECURITY_LOCAL_USERID_CHANGE);
  CreateSeqStmt* stmt = makeNode(CreateSeqStmt);
  stmt->sequence = makeRangeVar(pstrdup(kGuardSchema), pstrdup(name), -1);
  stmt->options = NIL;
  stmt->ownerId = owner;
  stmt->for_identity = false;
  stmt->if_not_exists = false;
  ParseState* pstate = make_parsestate(nullptr);
  pstate->p_sourcetext = "";
  (void)DefineSequence(pstate, stmt);
  SetUserIdAndSecContext(saved_user, saved_context);
  CommandCounterIncrement();
}

void DropGuard(Oid guard) {
  ObjectAddress object;
  ObjectAddressSet(object, RelationRelationId, guard);
  performDeletion(&object, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
  CommandCounterIncrement();
}

void ChangeGuardOwner(Oid guard, Oid owner) {
  ATExecChangeOwner(guard, owner, true, AccessExclusiveLock);
  CommandCounterIncrement();
}

void GrantOnGuard(const char* name, uint32 mask, const char* role, bool grant) {
  GrantStmt* stmt = makeNode(GrantStmt);
  stmt->is_grant = grant;
  stmt->targtype = ACL_TARGET_OBJECT;
  stmt->objtype = OBJECT_SEQUENCE;
  stmt->objects = list_make1(makeRangeVar(pstrdup(kGuardSchema), pstrdup(name), -1));
  stmt->privileges = NIL;
  for (const char* privilege : {"select", "update"}) {
    uint32 bit = strcmp(privilege, "select") == 0 ? uint32(kSelect) : uint32(kUpdate);
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

uint32 GuardPrivileges(Oid guard, Oid role) {
  constexpr uint32 kAll = kSelect | kUpdate | kOwn;
  if (OidIsValid(role) && superuser_arg(role)) return kAll;
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(guard));
  if (!HeapTupleIsValid(tuple)) return 0;
  Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  bool isnull;
  Datum datum = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_relacl, &isnull);
  Acl* acl = isnull ? acldefault(OBJECT_SEQUENCE, owner) : DatumGetAclPCopy(datum);
  ReleaseSysCache(tuple);
  if (OidIsValid(role) && has_privs_of_role(role, owner)) return kAll;
  AclMode held = 0;
  if (OidIsValid(role)) {
    held = aclmask(acl, role, owner, ACL_SELECT | ACL_UPDATE, ACLMASK_ALL);
  } else {
    const AclItem* items = ACL_DAT(acl);
    for (int i = 0; i < ACL_NUM(acl); i++)
      if (items[i].ai_grantee == ACL_ID_PUBLIC) held |= ACLITEM_GET_PRIVS(items[i]);
  }
  pfree(acl);
  uint32 granted = 0;
  if ((held & ACL_SELECT) != 0) granted |= kSelect;
  if ((held & ACL_UPDATE) != 0) granted |= kUpdate;
  return granted;
}

void CheckGuardDrop(Oid relid, int dropflags) {
  if ((dropflags & PERFORM_DELETION_INTERNAL) != 0 || !IsGuard(relid)) return;
  ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
                  errmsg("cannot drop sequence %s.%s because counter \"%s\" requires it",
                         kGuardSchema, get_rel_name(relid), get_rel_name(relid)),
                  errhint("Drop the counter with sc_drop(); DROP OWNED drops the counters a "
                          "role owns.")));
}

void BeforeGuardCommand(Node* statement) {
  switch (nodeTag(statement)) {
    case T_DropOwnedStmt:
      DropOwnedCounters(reinterpret_cast<DropOwnedStmt*>(statement));
      break;
    case T_DropStmt: {
      auto* drop = reinterpret_cast<DropStmt*>(statement);
      if (drop->removeType == OBJECT_EXTENSION) DropAllGuards(drop);
      break;
    }
    case T_RenameStmt: {
      Oid guard = GuardNamed(reinterpret_cast<RenameStmt*>(statement)->relation);
      if (OidIsValid(guard)) RefuseAlteringGuard(guard);
      break;
    }
    case T_AlterObjectSchemaStmt: {
      Oid guard = GuardNamed(reinterpret_cast<AlterObjectSchemaStmt*>(statement)->relation);
      if (OidIsValid(guard)) RefuseAlteringGuard(guard);
      break;
    }
    case T_AlterSeqStmt: {
      Oid guard = GuardNamed(reinterpret_cast<AlterSeqStmt*>(statement)->sequence);
      if (OidIsValid(guard)) RefuseAlteringGuard(guard);
      break;
    }
    default:
      break;
  }
}

}  // namespace sc
