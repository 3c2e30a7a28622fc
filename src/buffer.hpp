// buffer.hpp: where an increment goes: the shared buffer of counter values.
#pragma once

#include "catalog.hpp"
#include "counter_table.hpp"
#include "pg.hpp"

namespace sc {

// Adds delta to the value of (counter, key, bucket) of this database and returns the new value.
// Fails with 22003, changing nothing, if the value would leave the bigint range.
int64 BufferIncrement(const CounterDef& def, int64 key, int64 bucket, int64 delta);

// The current value of (counter, key, bucket); 0 for a key never counted.
int64 BufferRead(const CounterDef& def, int64 key, int64 bucket);

// Removes every entry of one counter (or of a whole database) from the buffer.
// Used when a drop commits; takes only LWLocks and cannot fail.
void PurgeCounter(Oid db, int32 counter);
void PurgeDatabase(Oid db);

}  // namespace sc
