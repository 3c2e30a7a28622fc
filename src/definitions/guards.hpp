// guards.hpp: the catalog object that holds a counter's owner and privileges (guards.cpp).
#pragma once

#include "pg.hpp"

namespace sc {

// The schema of the guards; a counter's guard is the sequence kGuardSchema.<counter name>.
extern const char* const kGuardSchema;

// The guard of the counter named `name`; InvalidOid if it has none (or the extension is gone).
Oid FindGuard(const char* name);

// The guard's owner; InvalidOid if there is no such guard.
Oid GuardOwner(Oid guard);

// Whether relid is a guard: a sequence in the guards' schema.
bool IsGuard(Oid relid);

// Every guard of this database, as a List of OIDs.
List* AllGuards();

// Makes the guard of new counter `id`, owned by `owner` (with the owner's default privileges on
// sequences in the schema, as any new sequence of it gets). The sequence starts at `id`: a guard
// belongs to the counter of its name only if its start is that counter's id (GuardStart), so a
// guard left from a dropped counter of the same name (copied to a subscriber, say) grants nothing
// on a new one. Dumps, restores and pg_upgrade keep both the start and the id.
void CreateGuard(const char* name, int32 id, Oid owner);

// The start of the guard's sequence: the id of the counter it belongs to; 0 if none.
int64 GuardStart(Oid guard);

// Drops the guard as the extension's own act, with whatever depends on it if `behavior` is
// DROP_CASCADE (else 2BP01 if anything does).
void DropGuard(Oid guard, DropBehavior behavior);

// Gives the guard to `owner`: its ACL and shared dependencies follow, as ALTER ... OWNER TO.
// The caller checked the rules.
void ChangeGuardOwner(Oid guard, Oid owner);

// GRANT or REVOKE the privileges in `mask` (ACL_SELECT, ACL_UPDATE) on the guard of counter
// `name` to `role` (nullptr: PUBLIC), as the current role, with core's rules for the grantor.
void GrantOnGuard(const char* name, AclMode mask, const char* role, bool grant);

// ACL_SELECT and ACL_UPDATE as `role` (InvalidOid: PUBLIC) holds them on the guard, from its ACL;
// both, and *owns, for the owner's members and superusers.
AclMode GuardPrivileges(Oid guard, Oid role, bool* owns);

}  // namespace sc
