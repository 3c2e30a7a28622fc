// session.hpp: the session settings of the extension's background workers (the flusher, the
// attacher), pinned whatever the database's and the roles' defaults say.
#pragma once

#include "pg.hpp"

namespace sc {

// Pins the settings a default of the database or of a role (ALTER DATABASE / ALTER ROLE ... SET,
// which InitPostgres applied before the worker's code ran) could turn against the worker: it
// acts as the bootstrap superuser that it connected as, writes in read committed, waits for no
// standby and for no one longer than lock_timeout_ms (0: no limit), and finds nothing by an
// unqualified name. Right after the worker connected, outside a transaction (it runs one).
void PinSessionSettings(int lock_timeout_ms);

}  // namespace sc
