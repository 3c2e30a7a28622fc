// rank_indexes.hpp: the rank indexes of sc_rank (core/rank_index.hpp), one per counter that asked
// for one, in a dynamic shared memory area (DSA) that the first index creates.
//
// Protocol:
//   - The registry (RankIndexes::lock) holds each slot's (db, counter, state) and the area's
//     handle. A backend that ranks a key of an unbucketed counter whose keys do not expire finds
//     its slot under the lock SHARED; if it has none it claims a free one EXCLUSIVE as kWanted,
//     wakes its database's flusher, and answers from the tables this time.
//   - Only the flusher of a slot's database changes the slot: it builds a wanted index from
//     slotted_counter.totals in a transaction of its own between two flushes (the flusher is the
//     only writer of an unbucketed counter's rows), marks it kReady, applies what each committed
//     flush, fold and write-through stored (ApplyRankUpdates), and frees the slots of counters
//     dropped, given buckets or a retention, or not used for 10 minutes, and every slot of its
//     database when it starts (a flusher that took over cannot know what the last one applied).
//     It changes an index under the slot's lock EXCLUSIVE and the slot's state under both locks.
//   - A reader ranks under the slot's lock SHARED, after checking there that the slot is still
//     kReady for its counter. An index whose change failed halfway (an error in DSA) is marked
//     kBroken under its lock before the change and kReady after: a reader never uses a broken
//     one, and the flusher frees it.
//   - Memory: slotted_counter.rank_memory (MB) for all indexes together; a build or change that
//     would exceed it frees the index (the tables answer).
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"
#include "shared/rank_registry.hpp"

namespace sc {

// A backend: if a ready index of def's keys exists, sets *above to the number of keys other than
// `key` whose stored value is larger than `value` (and not 0), and returns true; otherwise asks
// the flusher for one and returns false.
bool RankFromIndex(const CounterDef& def, int64 key, int64 value, int64* above);

// The flusher of db, between flushes, outside any transaction: frees what must go and builds
// what was asked for (each in a transaction of its own). `starting`: the first call of this
// flusher process, which frees every index of db.
void MaintainRankIndexes(Oid db, bool starting);

// What a committed flush, fold or write-through stored: the key's value in its row.
struct RankUpdate {
  int32 counter;
  int64 key;
  int64 value;
};
// Whether db has an index of `counter` (ready), read without waiting: the flusher collects the
// updates of such counters only.
bool RankIndexed(Oid db, int32 counter);
bool AnyRankIndex(Oid db);
// How many of db's indexes are ready (slotted_counter.stats).
int ReadyRankIndexes(Oid db);
void ApplyRankUpdates(Oid db, const RankUpdate* updates, int n);
// Frees db's index of `counter`, if any (a change it cannot follow key by key: the next sc_rank
// asks for it anew).
void ForgetRankIndex(Oid db, int32 counter);

}  // namespace sc
