// privileges.hpp: who may do what with a counter (the model: privileges.cpp).
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// The privileges (Privilege bits) that `role` holds on def; role InvalidOid: PUBLIC's. Uses the
// definition's grantee arrays, so only on a definition just looked up.
uint32 PrivilegesOf(const CounterDef& def, Oid role);

// Runs one UPDATE of counter id's row in slotted_counter.counters as the extension (42704 if it
// is gone), and notes the change, so that its commit makes every backend read the row again.
void UpdateCounterRow(int32 id, const char* sql, int nargs, Oid* types, Datum* args);

// Whether the current role holds every privilege in `need` (cached in the definition).
bool HasPrivileges(const CounterDef* def, uint32 need);

}  // namespace sc
