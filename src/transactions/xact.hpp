// xact.hpp: what slotted_counter does at the end of a transaction (what the transaction did is
// recorded in changes.hpp).
#pragma once

#include "pg.hpp"

namespace sc {

void InstallTransactionHooks();

}  // namespace sc
