// rank_indexes.hpp: the rank indexes of sc_rank (core/rank_index.hpp), one per counter that asked
// for one, in a dynamic shared memory area (DSA) that the first index creates.
//
// Protocol:
//   - The registry (RankIndexes::lock) holds each slot's (db, counter, owner, state, want) and
//     the area's handle. A backend that ranks a key of an unbucketed counter whose keys do not
//     expire finds its slot under the lock SHARED; if it has none it claims one EXCLUSIVE as
//     kWanted (below), wakes its database's flusher, and answers from the tables this time.
//   - The flusher of a slot's database builds a wanted index from slotted_counter.key_values in a
//     transaction of its own between two flushes (the flusher is the only writer of an unbucketed
//     counter's rows), marks it kReady, applies what each committed flush, fold and write-through
//     stored (ApplyRankUpdates), and frees the slots of counters dropped (their refusals too),
//     given buckets or a retention, or not used for 10 minutes, and every slot of its database
//     when it starts (a flusher that took over cannot know what the last one applied). Any
//     process may take a slot back for another counter under the fair share (below). So (db,
//     counter) of a slot may change between two looks: whoever acts on a slot checks them again
//     under its locks. An index changes under the slot's lock EXCLUSIVE, a slot's (db, counter,
//     owner, state) under both locks; the order is the registry's, then one slot's, never two
//     slots' at once.
//   - A reader ranks under the slot's lock SHARED, after checking there that the slot is still
//     kReady for its counter. An index whose change failed halfway (an error in DSA) is marked
//     kBroken under its lock before the change and kReady after: a reader never uses a broken
//     one, and the flusher frees it.
//   - Fair shares (core/fair_share.hpp, pools whose units can be taken back): the kRankSlots
//     slots, and the bytes of slotted_counter.rank_memory (MB, for all indexes together), are
//     shared by the databases, and each database's part by the roles owning its counters (a
//     slot's owner). A slot kWanted, kReady or kBroken holds a slot and its index's bytes. A claim
//     takes a free (or refused) slot; with none, a database within its share takes back the
//     least recently used slot of a database above its share, or else a role within its share
//     that of a role of its database above its share (the index is freed, its counter asks again
//     at its next sc_rank). A build or change that would exceed rank_memory first frees the
//     indexes of parties above their share, if its own is within its share (by the bytes it
//     asks for); if it still does not fit, it is refused: the slot is kRankRefused with the bytes
//     it wanted, which holds nothing, and its counter asks again once they would fit (memory
//     freed, rank_memory raised, or the counter back within its share).
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
