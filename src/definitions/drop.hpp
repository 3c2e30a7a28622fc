// drop.hpp: dropping a counter, and the attachments of a dropped table (drop.cpp).
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// Deletes counter def's row, its values, deltas, attachments and request ids, and (with_guard)
// its guard, with `behavior` for what depends on the guard, in the current transaction, and
// notes the drop for its commit. The caller checked the privilege. False if a transaction that
// committed meanwhile had dropped it already.
bool DropCounter(const CounterDef& def, bool with_guard, DropBehavior behavior);

// Deletes the attachments whose target is one of the tables this transaction dropped, as part of
// it (a dropped table takes its attachments along, as it takes its triggers). At pre-commit.
void DetachDroppedTargets(const Oid* relids, int n);

}  // namespace sc
