// attach.hpp: lagged totals written into users' own tables (sc_attach, sc_detach).
#pragma once

#include "pg.hpp"

namespace sc {

// Runs this database's due attachments, each in its own transaction as the role that attached;
// counts the changed keys that had no row, and the attachments that failed (already logged).
// Must run in the flusher, outside a transaction.
void RunAttachments(Oid db, int64* skipped, int64* errors);

}  // namespace sc
