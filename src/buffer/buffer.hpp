// buffer.hpp: where an increment goes: the shared buffer of counter values.
#pragma once

#include "definitions/catalog.hpp"
#include "core/protocol.hpp"
#include "core/sketch_set.hpp"
#include "pg.hpp"

namespace sc {

// Whether reads of the stored values of keys that are not resident (of a transactional
// counter) must add their unfolded rows of slotted_counter.deltas: on a standby, which folds
// nothing, and while this database's slot says so (shmem.hpp: fold epochs). Otherwise such a
// key has none: an entry leaves the buffer only after its deltas were folded into key_values.
bool StoredReadsNeedDeltas();

// Adds delta to the value of (counter, key, bucket) of this database and returns the new value.
// Fails with 22003, changing nothing, if the value would leave the bigint range.
int64 BufferIncrement(const CounterDef& def, int64 key, int64 bucket, int64 delta);

// Adds deltas[i] to (keys[i], bucket) of a buffered counter for every i, in order, and sets
// values[i] to the new value after it: all or nothing, under every failure (overflow, a cancel, a
// timeout, termination, a flusher that cannot write). First, where an error changes nothing, it
// makes the keys resident and pins them; the keys left over are handed to the flusher as one
// write-through, whose partitions it holds so no one loads them.
// Then, with interrupts held, it adds to the pinned entries, has the flusher write the rest in
// one transaction (withdrawing the request if no flusher took it within 10 s), and takes its
// adds back if that failed. Batches together pin a quarter of the buffer at most.
// Fails having counted nothing, or returns having counted all, with interrupts still held: the
// caller ends its call with ResumeInterruptsCounted (shared/late_cancel.hpp) once it has nothing
// left to do but return.
void BufferIncrementBatch(const CounterDef& def, const int64* keys, const int64* deltas, int n,
                          int64 bucket, int64* values);

// At the abort of a (sub)transaction: gives back what a batch that failed before its adds held
// (pins, partition holds). Cannot fail.
void BufferBatchAbort();

// Adds delta to (counter, key, bucket) of a buffered counter if the new value stays within
// bounds: true and *value the new value, or false and *value the value it was refused against
// (nothing changed). Concurrent ones admit exactly what fits. A key not in the buffer is loaded;
// with no room, it waits for the flusher as BufferSet does (the bound needs the value, which a
// write-through does not have).
bool BufferIncrementWithin(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                           Bounds bounds, int64* value);

// A rate limiter's call of `cost` on key at the clock's now (core/gcra.hpp): one compare-and-swap
// on the key's entry, whose value is its TAT, so concurrent callers admit exactly what the limit
// allows. A key not in the buffer is loaded; with no room, it waits as BufferSet does. A limiter
// has no deltas, whatever its durability: its keys are a buffered counter's.
GcraAnswer BufferThrottle(const CounterDef& def, int64 key, int64 cost);

// Gives a rolled-back call's cost back to key's entry, if it is resident (in an abort: no load,
// cannot fail); a key the buffer evicted meanwhile keeps it, and refills with time.
void BufferGiveBack(int32 counter, const GcraLimit& limit, int64 key, int64 cost);

// Replaces the value of (counter, key, bucket) of a buffered counter and returns the old value.
// Concurrent increments fall before or after it. If the buffer has no room it waits for the
// flusher (10 s at most, then 53400).
int64 BufferSet(const CounterDef& def, int64 key, int64 bucket, int64 value);

// The current value of (counter, key, bucket) (for a transactional counter: its committed value);
// 0 for a key never counted. With load, a key not in the buffer is loaded into it. *row (if given):
// where the key's row of slotted_counter.key_values was found when the value was read from it
// without loading (tid.hpp), else 0.
int64 BufferRead(const CounterDef& def, int64 key, int64 bucket, bool load,
                 uint64* row = nullptr);

// The current values of many keys of an unbucketed counter (committed values, for a
// transactional one): each exact at some moment during the call. Keys not in the buffer are read
// with one query and not loaded.
void BufferReadMany(const CounterDef& def, const int64* keys, int n, int64* values);

// A key and its value.
struct KeyValue {
  int64 key;
  int64 value;
};

// The candidates for the n largest values of an unbucketed counter (committed values, for a
// transactional one): every resident key with its exact value, and the n largest stored values
// of the other keys (one query). Unordered, distinct keys, in a palloc'd array with room for
// `extra` more; returns how many. Its cost is a pass over the buffer, a top-n query, and
// O(keys log keys).
int64 BufferTopCandidates(const CounterDef& def, int64 n, int64 extra, KeyValue** out);

// The sum of the values of every key of an unbucketed counter (committed values, for a
// transactional one; an expired key adds nothing): the resident ones each exact at some moment
// during the call, the others as stored (one query, which leaves the resident keys out; 22003
// if their sum alone leaves bigint). In 128 bits: the caller checks the range of what it adds
// up. Its cost is a pass over the buffer and a pass over the counter's stored rows: O(keys).
int128 BufferTotal(const CounterDef& def);
// One resident value of a bucketed counter.
struct BucketValue {
  int64 key;
  int64 bucket;
  int64 value;
};

// The resident values of a bucketed counter whose key is one of keys (sorted, distinct; nullptr:
// any key) and whose bucket starts in [since, until), each exact at some moment during the call
// (committed values, for a transactional counter), in a palloc'd array; returns how many. Keys
// take one partition scan each (all buckets of a key share its partition), any key all of them.
int64 BufferResidentBuckets(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                            int64 until, BucketValue** out);

// What the buffer holds of a counter beyond its rows, for the buckets that start in [since,
// until) (an unbucketed counter's: kNoBucket): the counter's sum entries (counter_table.hpp), a
// chain in each partition, as (bucket, value, 0) in palloc'd arrays; or, if one wrapped around,
// each key entry whose value is not its flushed, with both (a pass over the buffer). Exact with
// the tables only between two flush commits: the caller reads within a commit window
// (core/commit_window.hpp).
struct Unflushed {
  int64* buckets;
  int64* values;
  int64* flushed;
  int64 n;
};
Unflushed BufferUnflushed(const CounterDef& def, int64 since, int64 until);

// ---- distinct counters (sketches.cpp; core/sketch_pool.hpp) ----

// Adds an element's hash to the sketch of key in bucket (loading it, or waiting for room: never
// written through): true if the sketch changed.
bool BufferSketchAdd(const CounterDef& def, int64 key, int64 bucket, uint64 hash);
// Unions into out the resident sketches of the counter's keys (nkeys of them, sorted; every key
// when keys is nullptr) whose bucket starts in [since, until); returns how many.
int64 BufferSketchUnion(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                        int64 until, SketchSet* out);
// Whether entry (index, generation) holds a sketch; for a flush, which claimed it.
bool IsSketchEntry(uint32 index, uint32 generation);
// A copy of the sketch of entry (index, generation) of key k, which the caller keeps (a flush's
// claim, a commit's pin); false if it left.
bool BufferSketchOfEntry(const CounterKey& k, uint32 index, uint32 generation, SketchSet* out);
// Whether adding hash would change key's sketch in bucket (loading it, or waiting for room).
bool BufferSketchLacks(const CounterDef& def, int64 key, int64 bucket, uint64 hash);
// A transactional commit's adds (n hashes) to the sketch of key in bucket, if it is resident;
// the entry stays clean (the tables hold them). Cannot fail.
void BufferSketchAddIfResident(int32 counter, int64 key, int64 bucket, const uint64* hashes,
                               int n);

// At pre-commit: makes the key resident, checks that its value plus every reserved delta plus
// delta fits in a bigint (22003 if not) and, whatever the other reserved deltas do, stays within
// bounds right after delta (23514 if not), reserves delta and pins the entry, so that it is not
// evicted (and so not reloaded from tables that already hold this delta) before BufferSettle.
// w: the commit's time and its counter's cutoff then: a key that has expired counts from 0, the
// reservation taking its value away (Reservation::expired); while another commit holds such a
// key, this one waits for its settle.
void BufferReserve(const CounterDef& def, int64 key, int64 bucket, int64 delta, Bounds bounds,
                   Write w, Reservation* out);
// At commit (adds the delta to the value) or abort; cannot fail.
void BufferSettle(const Reservation& r, bool committed);

// A commit too large to pin its keys (transactions/large_commit.hpp) holds the loads of each of
// its counters (core/through_holds.hpp: counter holds) from before it looks at its keys until its
// commit is visible or aborted; neither can fail.
void HoldCounterLoads(int32 counter);
void ReleaseCounterLoads(int32 counter);
// With def's loads held: kMissing if the key is not in the buffer (an entry that held nothing the
// tables lack is removed): the caller writes its row; kReserved as BufferReserve (22003, 23514 as
// there); kBusy: expired while another commit holds it: the caller gives back every reservation
// and hold it has, waits (BufferWaitForSettle) and starts again. Waits for a load under way.
// *row: with kMissing, the removed entry's hint of where the key's row is (tid.hpp), or 0.
Reserve BufferReserveOrWriteOwn(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                                Bounds bounds, Write w, Reservation* out, uint64* row);
void BufferWaitForSettle(int* waits);

// A buffered sc_incr_once that owns its request id (request_ids.hpp: kIdApplying at id_index):
// adds delta like BufferIncrement, but never writes through (it waits for room as sc_set does),
// and marks the id kPending with the new value in the same section as the add. 22003 if the
// value would leave bigint (the id stays the caller's to abandon).
int64 BufferIncrementOnce(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                          uint32 id_index);

// Retention of an unbucketed counter (retention.cpp): keys (all of partition p, with their hashes)
// whose rows were last written long ago. Removes the entries of those that hold nothing the tables
// lack, sets expirable[i] to whether keys[i] is out of the buffer, and holds partition p against
// loads (core/through_holds.hpp) until ReleaseExpiryHold(p). Takes only LWLocks; cannot fail.
void HoldForExpiry(uint32 p, const CounterKey* keys, const uint32* hashes, int n, bool* expirable);
void ReleaseExpiryHold(uint32 p);

// Removes every entry of one counter (or of a whole database) from the buffer.
// Used when a drop commits; takes only LWLocks and cannot fail.
void PurgeCounter(Oid db, int32 counter);
// Raises the write stamp of every value of one counter in the buffer to `stamp` (and marks it
// for the next flush to store): its keys were written without one, before it had a retention.
// Takes only LWLocks and cannot fail.
void StampCounter(Oid db, int32 counter, int64 stamp);
// Removes the entries of one counter's buckets that start before `before`.
void PurgeBuckets(Oid db, int32 counter, int64 before);
void PurgeDatabase(Oid db);
// Removes the entries of database db that hold nothing the tables lack (flushed, folded, not
// pinned); returns how many of its entries stay. Takes only LWLocks and cannot fail.
uint32 PurgeCleanEntries(Oid db);

}  // namespace sc
