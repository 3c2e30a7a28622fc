// databases.hpp: DROP, copy, rename and move of a database that counts (databases.cpp).
#pragma once

#include "pg.hpp"

namespace sc {

// Installs the ProcessUtility hook; from _PG_init.
void InstallDatabaseHooks();

// Whether a command on the whole database db is running or about to: then no flusher or attacher
// of it may start, and one that started leaves.
bool DatabaseClosing(Oid db);

}  // namespace sc
