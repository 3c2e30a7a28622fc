// privileges.hpp: who may do what with a counter (the model: privileges.cpp).
#pragma once

#include "catalog.hpp"

namespace sc {

// The privileges (Privilege bits) that `role` holds on def; role InvalidOid: PUBLIC's. Uses the
// definition's grantee arrays, so only on a definition just looked up.
uint32 PrivilegesOf(const CounterDef& def, Oid role);

// Whether the current role holds every privilege in `need` (cached in the definition).
bool HasPrivileges(const CounterDef* def, uint32 need);

}  // namespace sc
