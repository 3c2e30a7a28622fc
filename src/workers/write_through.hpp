// write_through.hpp: where the flusher serves the write-through requests of its database
// (write_through.cpp); the request and the requester's half: shared/write_through.hpp.
#pragma once

#include "shared/write_through.hpp"

namespace sc {

// Applies the pending write-through requests of db in one transaction; returns how many keys were
// answered. Must run in db's flusher, outside a transaction; may throw (ereport).
int ServeWriteThroughs(Oid db);

// Reserves a range of ids for the backends of db to give new text keys (core/text_ids.hpp) if
// one of them asked and it runs low (empty: only after_requests were served), in a transaction
// of its own. In the flusher, outside a transaction; may throw (ereport).
void ReserveTextIds(Oid db, bool after_requests);

// Writes the rows of the ids backends gave new text keys (workers/text_ids.hpp), in a
// transaction of its own, once many were given since this last did (GivenIdsBetweenWrites): a
// flush writes them too, with their values, but a set of the shared key cache would fill with
// unwritten ids within a flush interval. Asynchronous commit: a value that uses one commits
// later. In the flusher, outside a transaction; may throw (ereport).
void WriteGivenTextIds(Oid db);

}  // namespace sc
