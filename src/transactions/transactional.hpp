// transactional.hpp: increments that belong to their transaction (transactional counters).
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"

namespace sc {

// Adds delta to this transaction's pending delta of the key; returns the committed value plus
// the pending delta. Fails with 22003, changing nothing, if that leaves the bigint range.
int64 TransactionalIncrement(const CounterDef& def, int64 key, int64 bucket, int64 delta);

// The same if the committed value plus the pending delta stays within bounds: true and *value
// that sum, or false and *value the sum it was refused against (nothing changed). The bounds are
// kept with the key's pending delta (as long as the subtransaction that gave them is not rolled
// back), and checked again at COMMIT against every committing transaction: a COMMIT that could
// leave them fails with 23514.
bool TransactionalIncrementWithin(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                                  Bounds bounds, int64* value);

// Sets the key to value as this transaction sees it (committed + own pending): records the
// difference as a pending delta, so increments other transactions commit meanwhile are kept.
// Returns the value it saw.
int64 TransactionalSet(const CounterDef& def, int64 key, int64 bucket, int64 value);

// The (key, bucket) pairs of a counter with a non-zero pending delta in this transaction, and
// the deltas (palloc'd arrays); returns how many.
int TransactionalPendingOf(int32 counter, int64** keys, int64** buckets, int64** deltas);

// This transaction's pending delta of the key (0 outside a transaction that touched it).
int64 TransactionalPending(int32 counter, int64 key, int64 bucket);

// Transaction callbacks (xact.cpp): reserve and write at pre-commit, refuse PREPARE, settle at
// the end, and keep or drop a subtransaction's deltas.
void TransactionalPreCommit();
void TransactionalPrePrepare();
void TransactionalEnd(bool committed);
void TransactionalSubEnd(bool committed, int level);

}  // namespace sc
