// large_commit.hpp: the commit of a transaction that changed more keys of transactional counters
// than the buffer should pin (a backfill, a migration: a million keys in one statement).
//
// A commit pins every key it changes until its deltas are in the buffer (transactional.cpp):
// its keys must be resident, so a transaction of more keys than the buffer holds could never
// commit. A large commit (more than a quarter of slotted_counter.max_entries) instead:
//   1. locks its counters' rows FOR UPDATE, in id order, as a drop does: the flusher's fold,
//      its expiry of old keys and its rank index builds skip or wait for those counters, a drop
//      or another large commit of them waits for this one, and it sees every row committed
//      before the locks were granted; then the tables it writes (and their indexes), so that no
//      lock is waited for once loads wait for it (step 4: the lock manager cannot see them);
//   2. forgets their rank indexes (the next sc_rank builds them again, after this commit);
//   3. counts itself a writer of key_values (shmem.hpp: attachments) and reads the clock, the
//      commit's time, which stamps every row it writes; moves any committed deltas of its
//      counters into key_values if loads must still read deltas (after a restart, until the
//      flusher's first fold), so that every key out of the buffer is its row alone;
//   4. holds its counters' loads (core/through_holds.hpp) and, key by key in order, reserves the
//      delta of a key whose entry holds what the tables lack (as a small commit does), or else
//      removes its entry, if any, and keeps the key to write itself; a key expired and reserved
//      by another commit (which may wait for a load this one holds) makes it give back every
//      reservation and hold, wait for that commit's settle holding nothing, and start again;
//   5. writes the deltas of the reserved keys as deltas rows, and adds those of the others to
//      their key_values rows (an expired key counts from 0; a value that leaves bigint fails
//      the commit with 22003, one that leaves its bounds with 23514): first the rows that the
//      transaction's reads found (found_rows), updated where they are below the executor
//      (definitions/key_values_rows.hpp; one not there any more is left to the upsert); then
//      the keys that the filter of stored keys knows never had a row, inserted below the executor
//      (no speculative insertion), redone as the upsert if a row was there after all; then the
//      rest in one upsert per counter.
// After the commit (or the abort) the reservations settle and the holds go. Until then, loads of
// its counters' keys out of the buffer wait: other sessions' first reads of those keys wait for
// the commit, as for a lock.
#pragma once

#include "buffer/buffer.hpp"
#include "pg.hpp"

namespace sc {

// Whether a commit that changes `rows` keys takes the large path.
bool IsLargeCommit(int rows);

// At pre-commit, for the rows (sorted by counter, key and bucket) of the counters defs[0 ..
// ncounters) (sorted by id, each with a row); found_rows[i]: where a read of the transaction found
// row i's key in key_values (tid.hpp), or 0 (then the hint of an entry removed, if any). Writes
// the rows it keeps itself, reserves the others into reservations (*nreserved of them) and moves
// those rows, with their deltas less the expired value each takes away, to the front of the
// arrays; returns the commit's time.
TimestampTz LargeCommitPrepare(const CounterDef* defs, int ncounters, int rows, int32* counters,
                               int64* keys, int64* buckets, int64* deltas, Bounds* bounds,
                               uint64* found_rows, Reservation* reservations,
                               int* nreserved);

// At the end of the transaction, after the reservations settled: releases the holds. Cannot fail.
void LargeCommitEnd();

}  // namespace sc
