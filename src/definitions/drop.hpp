// drop.hpp: dropping a counter (drop.cpp).
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// Deletes counter def's row, its values, deltas, attachments and request ids, and (with_guard)
// its guard, with `behavior` for what depends on the guard, in the current transaction, and
// notes the drop for its commit. The caller checked the privilege. False if a transaction that
// committed meanwhile had dropped it already.
bool DropCounter(const CounterDef& def, bool with_guard, DropBehavior behavior);

}  // namespace sc
