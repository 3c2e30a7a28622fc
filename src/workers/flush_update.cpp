// flush_update.cpp: a flush's updates of the rows of keys it wrote before, found where it last
// wrote them (Entry::row) and written below the executor.
//
// The statement's UPDATE (flush_write.cpp) finds each key's row by a descent of the primary key:
// a third of the flusher in a profile of a million updated keys (docs/performance.md, "Flush").
// A row the flush wrote has its TID in the entry. Fetched there with the step's snapshot, visible
// and holding the item's counter, key and bucket, it is the key's row (the primary key admits one
// visible row per key), and it is updated (definitions/key_values_rows.hpp: UpdateKeyValuesAt) as
// the UPDATE would update it: table_tuple_update (HOT when its page has room; WAL, logical
// decoding and a concurrent writer's wait as for any update), index entries when it was not HOT,
// value + delta with the UPDATE's error on overflow, updated_at now() and written_at never going
// back. No trigger fires: the table's row triggers are the sums', which the flush keeps itself
// (KeepItemSums, as under KeepingSums), and its statement triggers keep nothing for rows whose
// counter, key and bucket stay. A TID that finds nothing of the key (the row updated by another
// writer, deleted, moved by VACUUM FULL or CLUSTER, its slot holding another row) leaves the item
// to the UPDATE.
#include <algorithm>

#include "pg.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

// The rows of items at their claim.row into rel (as made), each item's claim.row set as
// UpdateRowsInPlace says.
int64 UpdateAtRows(Relation rel, FlushItem* items, int64 n) {
  auto* updates = static_cast<KeyValueUpdate*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(KeyValueUpdate) * (n + 1)));
  for (int64 i = 0; i < n; i++) {
    const FlushItem& item = items[i];
    updates[i] = KeyValueUpdate{item.counter,     item.key,      item.bucket,
                                item.claim.delta,
                                StampToStore(item.claim.stamped ? item.claim.stamp : kNoWrite),
                                kNeverExpires,    item.claim.row, 0, 0};
  }
  int64 done = UpdateKeyValuesAt(rel, updates, n, GetCurrentTransactionStartTimestamp());
  for (int64 i = 0; i < n; i++) items[i].claim.row = updates[i].row;
  pfree(updates);
  return done;
}

// Moves the items UpdateAtRows updated (claim.row set) before the others, each part in the
// order it had.
void UpdatedFirst(FlushItem* items, int64 n) {
  auto* rest = static_cast<FlushItem*>(MemoryContextAllocHuge(CurrentMemoryContext,
                                                              sizeof(FlushItem) * (n + 1)));
  int64 updated = 0, left = 0;
  for (int64 i = 0; i < n; i++) {
    if (items[i].claim.row != 0)
      items[updated++] = items[i];
    else
      rest[left++] = items[i];
  }
  std::copy(rest, rest + left, items + updated);
  pfree(rest);
}

}  // namespace

int64 UpdateRowsInPlace(FlushItem* items, int64 n) {
  if (n == 0) return 0;
  bool as_made;
  Relation rel = OpenKeyValues(&as_made);
  int64 done = 0;
  if (as_made) {
    done = UpdateAtRows(rel, items, n);
  } else {
    for (int64 i = 0; i < n; i++) items[i].claim.row = 0;
  }
  table_close(rel, NoLock);
  if (done == 0) return 0;
  // What the statements below and the sums see of the rows from here on.
  CommandCounterIncrement();
  UpdatedFirst(items, n);
  KeepItemSums(items, done, false);
  return done;
}

}  // namespace sc
