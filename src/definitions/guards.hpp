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

// Makes the guard of a new counter, owned by `owner` (with the owner's default privileges on
// sequences in the schema, as any new sequence of it gets).
void CreateGuard(const char* name, Oid owner);

// Drops the guard as the extension's own act, with whatever a role made depend on it (CASCADE).
void DropGuard(Oid guard);

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
