// distinct_adds.hpp: a transactional distinct counter's adds belong to their transaction: none is
// seen by another session before the commit, a rollback (of the transaction or of the
// subtransaction that added) leaves no trace, and a commit's adds are in key_sketches when it
// returns, so they survive a crash (distinct_adds.cpp says how).
#pragma once

#include "core/sketch_set.hpp"
#include "definitions/catalog.hpp"

namespace sc {

// Keeps an add of hash to key in bucket for the commit: true if it changes the sketch this
// transaction sees (the committed one with its own adds).
bool TransactionalSketchAdd(const CounterDef& def, int64 key, int64 bucket, uint64 hash);

// sc_drop_buckets in this transaction: its own adds to the counter's buckets that start before
// `before` are dropped with them (and come back if the subtransaction that dropped rolls back).
void DropPendingSketchBuckets(int32 counter, int64 before);

// Unions into out this transaction's own adds to the counter's keys (nkeys of them, sorted; every
// key when keys is nullptr) whose bucket starts in [since, until).
void UnionPendingSketches(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                          int64 until, SketchSet* out);

// Transaction callbacks (xact.cpp): the writes at pre-commit (may fail: the commit then fails);
// PREPARE refused; the end (the resident sketches take the commit's adds; cannot fail); a
// subtransaction's end.
void SketchesPreCommit();
void SketchesPrePrepare();
void SketchesEnd(bool committed);
void SketchesSubEnd(bool committed, int level);

}  // namespace sc
