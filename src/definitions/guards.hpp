// guards.hpp: the catalog object that holds a counter's owner and privileges (guards.cpp).
#pragma once

#include "pg.hpp"

namespace sc {

// The schema of the guards; a counter's guard is the sequence kGuardSchema.<counter name>.
extern const char* const kGuardSchema;

// The guard of the counter named `name`; InvalidOid if it has none (or the extension is gone).
Oid FindGuard(const char* name);

// Makes the guard of a new counter, owned by `owner` (with the owner's default privileges on
// sequences in the schema, as any new sequence of it gets).
void CreateGuard(const char* name, Oid owner);

// Drops the guard as the extension's own act (the object access hook refuses any other drop).
void DropGuard(Oid guard);

// Gives the guard to `owner`: its ACL and shared dependencies follow, as ALTER ... OWNER TO.
// The caller checked the rules.
void ChangeGuardOwner(Oid guard, Oid owner);

// GRANT or REVOKE the privileges in `mask` (Privilege bits) on the guard of counter `name` to
// `role` (nullptr: PUBLIC), as the current role, with core's rules for the grantor.
void GrantOnGuard(const char* name, uint32 mask, const char* role, bool grant);

// The Privilege bits that `role` (InvalidOid: PUBLIC) holds on the guard: kSelect and kUpdate
// from its ACL; all, with kOwn, for its owner's members and superusers.
uint32 GuardPrivileges(Oid guard, Oid role);

// The object access hook's check: fails with 2BP01 when a guard is dropped other than by the
// extension (DROP SEQUENCE, a cascade from an object it was made to depend on).
void CheckGuardDrop(Oid relid, int dropflags);

// Before a utility command: DROP OWNED drops the counters the roles own (the rest of the command
// revokes their grants), DROP EXTENSION drops every guard (so that no CASCADE is needed, as before
// any guard existed), and renaming, moving or altering a guard as a sequence is refused.
void BeforeGuardCommand(Node* statement);

}  // namespace sc
