// transactional.cpp: increments that belong to their transaction.
//
// An increment of a transactional counter stays in this backend until the transaction commits:
// a table of pending deltas by key (`pending`: core/pending_table.hpp), and for increments inside
// a subtransaction a second one by key and nesting level (`at_level`), so ROLLBACK TO SAVEPOINT
// drops what the subtransaction added. Both are emptied at the end. Outside any subtransaction an
// increment touches `pending` alone: only the top-level abort can undo it, and that empties
// everything.
// sc_incr returns the committed value (the buffer entry) plus the pending delta; nothing shared
// changes, and nobody waits.
//
// At pre-commit, for each key with a non-zero delta: BufferReserve makes the key resident,
// checks for overflow against the value plus every other committing transaction's delta, and
// pins the entry; then one row per key goes into slotted_counter.deltas (a direct heap insert),
// so the deltas become durable with the commit record. At commit each pinned entry receives its delta;
// at abort the reservations are dropped. The pin keeps the entry from being evicted (and so
// reloaded from tables that already show this commit) until the delta is in it.
//
// PREPARE TRANSACTION with pending increments is refused: COMMIT PREPARED runs in another session,
// with none of this backend's state, so the buffer could not receive the delta.
#include <algorithm>

#include "transactions/transactional.hpp"

#include "buffer/buffer.hpp"
#include "core/checked_math.hpp"
#include "core/counter_table.hpp"
#include "core/pending_table.hpp"
#include "index_writer.hpp"
#include "definitions/expiry.hpp"
#include "settings.hpp"
#include "shared/shmem.hpp"
#include "transactions/large_commit.hpp"

namespace sc {

namespace {

struct LevelKey {
  CounterKey key;
  int level;
};

// bounds: what the bounded increments at that level (and of the committed subtransactions
// below it) admit; all of bigint when there were none.
struct PendingAtLevel {
  LevelKey id;  // hash key
  int64 delta;
  Bounds bounds;
};


HTAB* at_level = nullptr;  // LevelKey -> delta added at that nesting level (2 and deeper)
// Room for every entry of at_level and one more, grown after each new entry (so an error while
// growing still leaves room for all), so that the end of a subtransaction (a callback, which must
// not fail) allocates nothing. In TopMemoryContext.
constexpr long kInitialMoveRoom = 64;
PendingAtLevel* moved_space = nullptr;
long moved_capacity = 0;

void KeepMoveRoom() {
  long needed = hash_get_num_entries(at_level) + 1;
  if (needed <= moved_capacity) return;
  long capacity = Max(kInitialMoveRoom, needed * 2);
  size_t bytes = sizeof(PendingAtLevel) * size_t(capacity);
  moved_space = static_cast<PendingAtLevel*>(
      moved_space == nullptr ? MemoryContextAllocHuge(TopMemoryContext, bytes)
                             : repalloc_huge(moved_space, bytes));
  moved_capacity = capacity;
}
// CounterKey -> delta over all levels (core/pending_table.hpp); its room in TopMemoryContext.
PendingTable pending;

// The names of the counters this transaction counted into, for a commit that finds one dropped.
struct CounterName {
  int32 id;  // hash key
  char name[NAMEDATALEN];
};
HTAB* names = nullptr;
int32 last_named = 0;  // the counter named last (ids start at 1)
Reservation* reservations = nullptr;
int reservation_count = 0;


// The keys by level are hashed with the buffer's own mix (a third of hash_bytes' instructions on
// these fixed-size keys); dynahash compares them with memcmp.
uint32 HashLevelKey(const void* key, Size) {
  const auto* lk = static_cast<const LevelKey*>(key);
  return HashCounterKey(lk->key) ^ (uint32(lk->level) * 0x9e3779b9u);
}

// hash: nullptr for dynahash's own hash of the key's bytes.
HTAB* MakeTable(const char* name, Size keysize, Size entrysize, HashValueFunc hash) {
  HASHCTL ctl;
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = keysize;
  ctl.entrysize = entrysize;
  ctl.hash = hash;
  return hash_create(name, 16, &ctl, HASH_ELEM | (hash != nullptr ? HASH_FUNCTION : HASH_BLOBS));
}

// Room for `pending` to hold twice its keys (16 at first), in TopMemoryContext; the old room is
// freed once the table moved. An out-of-memory error leaves the table as it was.
void GrowPending() {
  uint32 capacity = pending.attached() ? 2 * pending.capacity() : 16;
  auto* entries = static_cast<PendingSum*>(
      MemoryContextAllocHuge(TopMemoryContext, sizeof(PendingSum) * Size(capacity)));
  auto* slots = static_cast<uint64*>(MemoryContextAllocHuge(
      TopMemoryContext, sizeof(uint64) * Size(PendingTable::SlotsFor(capacity))));
  PendingSum* old_entries = pending.begin();
  uint64* old_slots = pending.slots();
  if (pending.attached())
    pending.MoveTo(entries, slots, capacity);
  else
    pending.Attach(entries, slots, capacity);
  if (old_entries != nullptr) pfree(old_entries);
  if (old_slots != nullptr) pfree(old_slots);
}

void FreePending() {
  if (!pending.attached()) return;
  PendingSum* entries = pending.begin();
  uint64* slots = pending.slots();
  pending.Detach();
  pfree(entries);
  pfree(slots);
}

// The tables live as long as the backend (creating two per transaction costs more than the
// increment) and are emptied when the transaction ends. `pending` is made last: it says they
// all exist (an out-of-memory error before it leaves them to be made again).
void MakeTables() {
  at_level = MakeTable("slotted_counter pending by level", sizeof(LevelKey),
                       sizeof(PendingAtLevel), HashLevelKey);
  names = MakeTable("slotted_counter pending names", sizeof(int32), sizeof(CounterName), nullptr);
  KeepMoveRoom();
  GrowPending();
}

void RememberName(const CounterDef& def) {
  if (def.id == last_named) return;
  bool found;
  auto* entry = static_cast<CounterName*>(hash_search(names, &def.id, HASH_ENTER, &found));
  if (!found) strlcpy(entry->name, def.name, NAMEDATALEN);
  last_named = def.id;
}

// The counter a commit applies to, by the name this transaction counted into it under; 42704
// naming it if it was dropped since.
CounterDef CommittingCounter(int32 id) {
  const CounterDef* def = FindCounter(id);
  if (def != nullptr) return *def;
  auto* entry = static_cast<CounterName*>(hash_search(names, &id, HASH_FIND, nullptr));
  ReportDroppedSinceCounted(entry != nullptr ? entry->name : psprintf("%d", id));
}

void Empty(HTAB* table) {
  HASH_SEQ_STATUS scan;
  hash_seq_init(&scan, table);
  for (void* p = hash_seq_search(&scan); p != nullptr; p = hash_seq_search(&scan))
    hash_search(table, p, HASH_REMOVE, nullptr);  // the key is the entry's first member
}

LevelKey MakeLevelKey(const CounterKey& k, int level) {
  LevelKey lk;
  memset(&lk, 0, sizeof(lk));  // padding is part of the hash key
  lk.key = k;
  lk.level = level;
  return lk;
}

CounterKey MakeKey(int32 counter, int64 key, int64 bucket) {
  CounterKey k;
  memset(&k, 0, sizeof(k));
  k.db = MyDatabaseId;
  k.counter = counter;
  k.key = key;
  k.bucket = bucket;
  return k;
}

bool any_pending = false;  // the tables hold something of this transaction

// Tables grown past this many entries are given back at the end of their transaction, rather
// than emptied and kept (a backfill's million keys would otherwise stay in the backend's memory).
constexpr long kKeptEntries = 65536;

void Forget() {
  if (any_pending && (pending.size() > kKeptEntries ||
                      hash_get_num_entries(at_level) > kKeptEntries)) {
    hash_destroy(at_level);
    hash_destroy(names);
    FreePending();
    pfree(moved_space);
    at_level = names = nullptr;  // made again by the next increment
    moved_space = nullptr;
    moved_capacity = 0;
  } else if (any_pending) {
    Empty(at_level);
    pending.Clear();
    Empty(names);
  }
  last_named = 0;
  any_pending = false;
  reservations = nullptr;  // in TopTransactionContext
  reservation_count = 0;
}

// Writes one row per key with a non-zero delta into slotted_counter.deltas, and the entries of
// any index a user added to it. The table has no trigger or constraint beyond NOT NULL, so a
// direct heap insert (WAL-logged, counted for autovacuum) does what an INSERT would, without
// planning a statement, and regardless of the caller's privileges on the table. It has no index
// of its own: a commit costs one heap insert per key, and loads read a key's deltas by a scan only
// while they must (core/fold_epochs.hpp: until a fold after a restart or a bucket drop).
void InsertDeltas(int n, const int32* counters, const int64* keys, const int64* buckets,
                  const int64* deltas, TimestampTz written_at) {
  // The extension may have been dropped by a transaction that committed meanwhile: then the
  // table is gone by the time its lock is granted, and so are the counters.
  Oid relid = ExtensionRelation("deltas");
  Relation rel = OidIsValid(relid) ? try_relation_open(relid, RowExclusiveLock) : nullptr;
  if (rel == nullptr) {
    (void)CommittingCounter(counters[0]);  // reports the counter, by the name it was counted under
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                    errmsg("relation \"slotted_counter.deltas\" does not exist")));
  }
  // Rows go in with simple_heap_insert: the table must be a heap (the scripts create it USING
  // heap; a table rewritten into another access method since is refused, not corrupted).
  if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("slotted_counter.deltas is not a heap table"),
                    errhint("ALTER TABLE slotted_counter.deltas SET ACCESS METHOD heap;")));
  TupleDesc desc = RelationGetDescr(rel);
  IndexWriter w = OpenIndexWriter(rel, 1);
  TupleTableSlot* slot = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
  for (int i = 0; i < n; i++) {
    Datum values[5] = {Int32GetDatum(counters[i]), Int64GetDatum(keys[i]),
                       TimestampTzGetDatum(buckets[i]), Int64GetDatum(deltas[i]),
                       TimestampTzGetDatum(written_at)};
    bool nulls[5] = {false, false, false, false, false};
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    simple_heap_insert(rel, tuple);
    if (w.result_rel->ri_NumIndices > 0) {
      ExecStoreHeapTuple(tuple, slot, false);
      InsertIndexTuples(w.result_rel, slot, w.estate);
      ExecClearTuple(slot);
    }
    heap_freetuple(tuple);
  }
  ExecDropSingleTupleTableSlot(slot);
  CloseIndexWriter(w);
  table_close(rel, NoLock);
}

}  // namespace

int64 TransactionalPending(int32 counter, int64 key, int64 bucket) {
  if (!any_pending) return 0;
  CounterKey k = MakeKey(counter, key, bucket);
  const PendingSum* p = pending.Find(k, HashCounterKey(k));
  return p != nullptr ? p->delta : 0;
}

namespace {

// Whether a read of a key's committed value loads it into the buffer: yes while the transaction's
// keys are few enough to be held there at its commit; no once it will be a large commit
// (large_commit.hpp), which writes the rows of the keys out of the buffer itself: its reads then
// leave other sessions' keys resident.
bool LoadOnRead() {
  return !pending.attached() || !IsLargeCommit(int(pending.size()));
}

// The increment, with bounds or (kBounded false: nothing of them compiled in, the common case)
// without. kSet: `delta` is the value the key is set to, the change is what it holds less that
// (one read of the buffer and one look-up of the key, not two of each), and *result is what it
// held.
template <bool kBounded, bool kSet = false>
pg_attribute_always_inline bool AddPending(const CounterDef& def, int64 key, int64 bucket,
                                           int64 delta, Bounds bounds, int64* result) {
  static_assert(!(kBounded && kSet), "a set has no bounds");
  uint64 row;
  int64 committed = BufferRead(def, key, bucket, LoadOnRead(), &row);
  if (!pending.attached()) MakeTables();
  any_pending = true;
  RememberName(def);
  // Enter every entry before changing any: an error between them (out of memory, out of range)
  // must not leave a delta counted in one table and not the other. A new entry holds 0, which
  // changes nothing.
  CounterKey k = MakeKey(def.id, key, bucket);
  bool found;
  if (pending.Full()) GrowPending();
  PendingSum* total =
      pending.Enter(k, HashCounterKey(k), &found, uint32(settings.max_transaction_keys));
  if (total == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
             errmsg("transaction changes more than %d keys of transactional counters",
                    settings.max_transaction_keys),
             errdetail("slotted_counter.max_transaction_keys bounds the backend memory a "
                       "transaction's changes take, about 300 bytes per key at its commit."),
             errhint("Raise slotted_counter.max_transaction_keys, or commit in smaller "
                     "transactions.")));
  if (kSet) {
    int64 value = delta, old;
    if (!CheckedAdd(committed, total->delta, &old) || __builtin_sub_overflow(value, old, &delta))
      ReportValueOutOfRange(def.name,
                            psprintf("Setting key %lld to %lld is a change outside the bigint "
                                     "range.",
                                     (long long)key, (long long)value));
    *result = old;
  }
  if (row != 0) total->row = row;
  int64 new_pending, value;
  if (!CheckedAdd(total->delta, delta, &new_pending) ||
      !CheckedAdd(committed, new_pending, &value))
    ReportValueOutOfRange(def.name,
                          psprintf("Key %lld holds %lld in this transaction; adding %lld leaves "
                                   "the bigint range.",
                                   (long long)key, (long long)(committed + total->delta),
                                   (long long)delta));
  if (kBounded && !bounds.Admit(value)) {
    if (!CheckedAdd(committed, total->delta, result))
      ReportValueOutOfRange(def.name,
                            psprintf("Key %lld leaves the bigint range.", (long long)key));
    return false;
  }
  int level = GetCurrentTransactionNestLevel();
  if (level > 1) {
    LevelKey lk = MakeLevelKey(k, level);
    auto* here = static_cast<PendingAtLevel*>(hash_search(at_level, &lk, HASH_ENTER, &found));
    if (!found) {
      here->delta = 0;
      here->bounds = Bounds{};
      KeepMoveRoom();
    }
    here->delta += delta;
    if (kBounded) here->bounds = here->bounds.And(bounds);
  } else if (kBounded) {
    total->bounds = total->bounds.And(bounds);
  }
  total->delta = new_pending;
  if (!kSet) *result = value;
  return true;
}

}  // namespace

int64 TransactionalIncrement(const CounterDef& def, int64 key, int64 bucket, int64 delta) {
  int64 value;
  (void)AddPending<false>(def, key, bucket, delta, Bounds{}, &value);
  return value;
}

bool TransactionalIncrementWithin(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                                  Bounds bounds, int64* value) {
  return AddPending<true>(def, key, bucket, delta, bounds, value);
}

int TransactionalPendingOf(int32 counter, int64** keys, int64** buckets, int64** deltas) {
  *keys = *buckets = *deltas = nullptr;
  if (!any_pending) return 0;
  long n = pending.size();
  *keys = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  *buckets = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  *deltas = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  int count = 0;
  for (const PendingSum& p : pending) {
    if (p.key.counter != counter || p.delta == 0) continue;
    (*keys)[count] = p.key.key;
    (*buckets)[count] = p.key.bucket;
    (*deltas)[count++] = p.delta;
  }
  return count;
}

int64 TransactionalSet(const CounterDef& def, int64 key, int64 bucket, int64 value) {
  int64 old;
  (void)AddPending<false, true>(def, key, bucket, value, Bounds{}, &old);
  return old;
}

void TransactionalPreCommit() {
  if (!any_pending) return;
  long n = pending.size();
  MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
  reservations = static_cast<Reservation*>(palloc(sizeof(Reservation) * n));
  auto* counters = static_cast<int32*>(palloc(sizeof(int32) * n));
  auto* keys = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* buckets = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* deltas = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* bounds = static_cast<Bounds*>(palloc(sizeof(Bounds) * n));
  MemoryContextSwitchTo(old);

  // In key order: a commit that waits for another's hold on an expired key (BufferReserve) holds
  // only keys before it, so no two commits wait for each other. Sorted by value, not through
  // pointers into the table (a cache miss per comparison, for millions of keys).
  struct Ordered {
    int32 counter;
    int64 key;
    int64 bucket;
    const PendingSum* sum;
  };
  auto* order = static_cast<Ordered*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(Ordered) * (n + 1)));
  int rows = 0;
  for (const PendingSum& p : pending)
    if (p.delta != 0) order[rows++] = Ordered{p.key.counter, p.key.key, p.key.bucket, &p};
  auto before = [](const Ordered& a, const Ordered& b) {
    if (a.counter != b.counter) return a.counter < b.counter;
    if (a.key != b.key) return a.key < b.key;
    return a.bucket < b.bucket;
  };
  // A backfill enters its keys in order, mostly: then one pass finds them sorted.
  if (!std::is_sorted(order, order + rows, before)) std::sort(order, order + rows, before);
  bool large = IsLargeCommit(rows);
  auto* found_rows = large ? static_cast<uint64*>(MemoryContextAllocHuge(
                                 CurrentMemoryContext, sizeof(uint64) * (rows + 1)))
                           : nullptr;
  for (int i = 0; i < rows; i++) {
    counters[i] = order[i].counter;
    keys[i] = order[i].key;
    buckets[i] = order[i].bucket;
    deltas[i] = order[i].sum->delta;
    bounds[i] = order[i].sum->bounds;
    if (large) found_rows[i] = order[i].sum->row;
  }
  pfree(order);
  // Reserve (and pin) every entry first, then write: if either fails, the abort settles the
  // reservations made so far. A commit of more keys than the buffer should pin writes those out
  // of it itself (large_commit.hpp).
  // A counter dropped since the increment (here or by a committed drop) fails the commit: 42704.
  TimestampTz now;
  if (large) {
    // One definition per counter (the rows are sorted by counter), not per row: a row's
    // definition is over a hundred bytes, and a large commit has millions of rows.
    int ncounters = 0;
    for (int i = 0; i < rows; i++) ncounters += i == 0 || counters[i] != counters[i - 1];
    auto* defs = static_cast<CounterDef*>(palloc(sizeof(CounterDef) * ncounters));
    for (int i = 0, c = 0; i < rows; i++)
      if (i == 0 || counters[i] != counters[i - 1]) defs[c++] = CommittingCounter(counters[i]);
    now = LargeCommitPrepare(defs, ncounters, rows, counters, keys, buckets, deltas, bounds,
                             found_rows, reservations, &reservation_count);
    rows = reservation_count;
  } else {
    // The commit's time is each key's last write; a key that expired by then counts from 0, its
    // row carrying the change (the delta less the expired value).
    now = GetCurrentTimestamp();
    for (int i = 0; i < rows; i++) {
      CounterDef def = CommittingCounter(counters[i]);
      BufferReserve(def, keys[i], buckets[i], deltas[i], bounds[i], CommitWrite(def, now),
                    &reservations[reservation_count]);
      deltas[i] -= reservations[reservation_count].expired;
      reservation_count++;
    }
  }
  if (rows > 0) InsertDeltas(rows, counters, keys, buckets, deltas, now);
}

void TransactionalPrePrepare() {
  if (!any_pending) return;
  // Increments undone by ROLLBACK TO SAVEPOINT (or summing to zero) leave nothing to apply.
  bool changes = false;
  for (const PendingSum& p : pending) changes = changes || p.delta != 0;
  if (!changes) return;
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("cannot PREPARE a transaction that has incremented transactional counters"),
                  errhint("Commit the increments in a transaction of their own, or use a "
                          "buffered counter.")));
}

void TransactionalEnd(bool committed) {
  for (int i = 0; i < reservation_count; i++) BufferSettle(reservations[i], committed);
  LargeCommitEnd();
  Forget();
}

void TransactionalSubEnd(bool committed, int level) {
  if (!any_pending) return;
  // Nothing here allocates: an abort takes this level's deltas out of `pending` as it removes
  // them; a commit collects them into moved_space first (dynahash allows deleting the current
  // entry during a scan, not inserting), then enters them one level up, each into an element
  // just freed by a removal. Deltas committed into the top level are in `pending` already:
  // they are only removed.
  bool move_up = committed && level - 1 > 1;
  int count = 0;
  HASH_SEQ_STATUS scan;
  hash_seq_init(&scan, at_level);
  for (auto* p = static_cast<PendingAtLevel*>(hash_seq_search(&scan)); p != nullptr;
       p = static_cast<PendingAtLevel*>(hash_seq_search(&scan))) {
    if (p->id.level < level) continue;
    if (move_up) {
      moved_space[count++] = *p;
    } else {
      // Committed into the top level: its bounds join the key's; rolled back: its delta leaves
      // the total and its bounds are forgotten.
      PendingSum* t = pending.Find(p->id.key, HashCounterKey(p->id.key));
      if (t != nullptr && committed) t->bounds = t->bounds.And(p->bounds);
      if (t != nullptr && !committed) t->delta -= p->delta;
    }
    hash_search(at_level, &p->id, HASH_REMOVE, nullptr);
  }
  for (int i = 0; i < count; i++) {
    const PendingAtLevel& m = moved_space[i];
    LevelKey parent = MakeLevelKey(m.id.key, level - 1);
    bool found;
    auto* p = static_cast<PendingAtLevel*>(hash_search(at_level, &parent, HASH_ENTER, &found));
    p->delta = found ? p->delta + m.delta : m.delta;
    p->bounds = found ? p->bounds.And(m.bounds) : m.bounds;
  }
}

}  // namespace sc
