// role_commands.hpp: what commands on roles and on the extension do to counters
// (role_commands.cpp).
#pragma once

#include "pg.hpp"

namespace sc {

// Before a utility command: DROP OWNED drops the counters the roles own (the rest of the command
// revokes their grants), DROP SEQUENCE of a guard drops its counter, DROP EXTENSION drops every
// guard (so that no CASCADE is needed), and renaming, moving or altering a guard as a sequence is
// refused (0A000).
void BeforeRoleCommand(Node* statement);

// The object access hook's check: fails with 2BP01 when a guard whose counter exists is dropped
// other than by the extension or the commands above (a cascade from an object it depends on).
void CheckGuardDrop(Oid relid, int dropflags);

}  // namespace sc
