// role_commands.cpp: what commands on roles and on the extension do to counters.
//
// A counter's owner and grants are its guard's (guards.cpp), so core's ALTER ROLE ... RENAME,
// DROP ROLE, REASSIGN OWNED and the revokes of DROP OWNED need nothing from us. Before the rest,
// the ProcessUtility hook (databases.cpp) calls BeforeRoleCommand:
// - DROP OWNED BY r: the counters r owns in this database are dropped (drop.cpp), as core drops
//   r's tables, if the current role may (has r's privileges; else core refuses the command);
// - DROP SEQUENCE of a guard (as pg_restore --clean and pg_dump --clean run for every sequence
//   they restore): its counter is dropped first, by a role that owns it (else core refuses);
// - DROP EXTENSION slotted_counter: every guard is dropped first, as the extension (the schema is
//   the extension's, the sequences in it are not, so core would ask for CASCADE);
// - ALTER ... RENAME, SET SCHEMA, ALTER SEQUENCE on a guard: refused, since a counter finds its
//   guard by its own name in the guards' schema (ALTER ... OWNER TO, GRANT, REVOKE are allowed).
// All of it runs in the command's transaction: if the command fails, it is undone. Any other drop
// of a guard whose counter exists (a cascade) is refused by the object access hook (xact.cpp).
#include "definitions/role_commands.hpp"

#include "definitions/catalog.hpp"
#include "definitions/drop.hpp"
#include "definitions/guards.hpp"
#include "spi.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
}

namespace sc {

namespace {

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
                  errhint("Use sc_alter_owner(), sc_grant() and sc_revoke() (or GRANT and REVOKE "
                          "on the sequence).")));
  pg_unreachable();
}

// The guards' schema is found by its name: it keeps it.
[[noreturn]] void RefuseAlteringGuardSchema() {
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("cannot alter schema %s", kGuardSchema),
                  errdetail("It holds the sequences that hold the counters' owners and "
                            "privileges.")));
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
  int rc = SPI_execute("SELECT id FROM slotted_counter.counters ORDER BY id", true, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counters failed: %d", rc);
  List* ids = NIL;
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    int32 id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
                                           &isnull));
    MemoryContext old = MemoryContextSwitchTo(spi.caller);
    ids = lappend_int(ids, id);
    MemoryContextSwitchTo(old);
  }
  FinishSpi(spi);
  // With the command's RESTRICT or CASCADE for what depends on the guards, as core drops the
  // roles' other objects.
  foreach (cell, ids) {
    const CounterDef* def = FindCounter(int32(lfirst_int(cell)));
    if (def == nullptr || !OidIsValid(def->guard) ||
        !list_member_oid(roles, GuardOwner(def->guard)))
      continue;
    CounterDef copy = *def;
    (void)DropCounter(copy, true, stmt->behavior);
  }
}

// DROP SEQUENCE: the counters of the guards it names that the current role owns are dropped,
// without their guards, which the command then drops.
void DropGuardedCounters(DropStmt* stmt) {
  ListCell* cell;
  foreach (cell, stmt->objects) {
    Oid guard = GuardNamed(makeRangeVarFromNameList(static_cast<List*>(lfirst(cell))));
    if (!OidIsValid(guard) || !OwnsRelation(GetUserId(), guard)) continue;
    const CounterDef* def = FindCounter(get_rel_name(guard), int(strlen(get_rel_name(guard))));
    if (def == nullptr || def->guard != guard) continue;  // a guard of no counter (guards.hpp)
    CounterDef copy = *def;
    (void)DropCounter(copy, false, DROP_RESTRICT);
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
  if (!ours) return;
  // Only for a role that may drop the extension: core checks that next, and fails otherwise.
  Oid extension = get_extension_oid("slotted_counter", true);
  if (!OidIsValid(extension) || !OwnsExtension(GetUserId(), extension)) return;
  List* guards = AllGuards();
  foreach (cell, guards) DropGuard(lfirst_oid(cell), stmt->behavior);
}

}  // namespace

void BeforeRoleCommand(Node* statement) {
  // pg_upgrade's restore recreates what was there, as it was (ALTER SCHEMA ... OWNER TO too).
  if (IsBinaryUpgrade) return;
  switch (nodeTag(statement)) {
    case T_DropOwnedStmt:
      DropOwnedCounters(reinterpret_cast<DropOwnedStmt*>(statement));
      break;
    case T_DropStmt: {
      auto* drop = reinterpret_cast<DropStmt*>(statement);
      if (drop->removeType == OBJECT_EXTENSION) DropAllGuards(drop);
      if (drop->removeType == OBJECT_SEQUENCE) DropGuardedCounters(drop);
      break;
    }
    case T_RenameStmt: {
      auto* rename = reinterpret_cast<RenameStmt*>(statement);
      if (rename->renameType == OBJECT_SCHEMA && rename->subname != nullptr &&
          strcmp(rename->subname, kGuardSchema) == 0)
        RefuseAlteringGuardSchema();
      Oid guard = GuardNamed(rename->relation);
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

void CheckGuardDrop(Oid relid, int dropflags) {
  if ((dropflags & PERFORM_DELETION_INTERNAL) != 0 || !IsGuard(relid)) return;
  const char* name = get_rel_name(relid);
  const CounterDef* def = FindCounter(name, int(strlen(name)));
  // Dropped first (above), or the guard of no counter (guards.hpp): nothing to keep.
  if (def == nullptr || def->guard != relid) return;
  ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
                  errmsg("cannot drop sequence %s.%s because counter \"%s\" requires it",
                         kGuardSchema, name, name),
                  errhint("Drop the counter first, with sc_drop() or DROP SEQUENCE %s.%s.",
                          kGuardSchema, quote_identifier(name))));
}

}  // namespace sc
