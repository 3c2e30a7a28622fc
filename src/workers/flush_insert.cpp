// flush_insert.cpp: a flush's fresh keys inserted into slotted_counter.key_values below the
// executor, with the sums and the filter of stored keys that the table's triggers would keep.
//
// Any trigger with a transition table makes every INSERT of the table collect its rows into a
// tuplestore, enabled or not (PostgreSQL reads the flags of the trigger descriptor): a quarter of
// the flush of a million new keys (3,151 ms with the triggers of counter_totals, 2,339 without:
// docs/performance.md, "Flush"). Rows inserted below the executor as COPY inserts them
// (definitions/key_values_rows.hpp) fire no trigger and collect nothing; the flush then adds what
// the triggers would have added: each (counter, bucket)'s deltas to its sum, in (counter, bucket)
// order as the trigger does, and each key to the filter. A table whose columns are not as the
// install script made them is written by COPY instead (flush_copy.cpp).
#include "definitions/sums.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

void InsertFreshRows(FlushItem* items, int64 n, bool stamped) {
  if (n == 0) return;
  bool as_made;
  Relation rel = OpenKeyValues(&as_made);
  if (!as_made) {
    table_close(rel, NoLock);
    for (int64 i = 0; i < n; i++) items[i].claim.row = 0;
    CopyFreshRows(items, n, stamped);
    return;
  }
  TimestampTz now = GetCurrentTransactionStartTimestamp();
  auto* rows = static_cast<NewKeyValue*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(NewKeyValue) * (n + 1)));
  for (int64 i = 0; i < n; i++) {
    const FlushItem& item = items[i];
    rows[i] = NewKeyValue{item.counter,
                          item.key,
                          item.bucket,
                          item.claim.delta,
                          stamped ? StampToStore(item.claim.stamped ? item.claim.stamp : kNoWrite)
                                  : now,
                          0};
  }
  InsertKeyValues(rel, rows, n, now);
  for (int64 i = 0; i < n; i++) items[i].claim.row = rows[i].row;
  pfree(rows);
  table_close(rel, NoLock);
  // What the rows' writer and the statements below see of them from here on.
  CommandCounterIncrement();
  KeepItemSums(items, n, true);
}

void KeepItemSums(const FlushItem* items, int64 n, bool inserted) {
  auto* changes = static_cast<SumChange*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(SumChange) * (n + 1)));
  for (int64 i = 0; i < n; i++)
    changes[i] = SumChange{items[i].counter, items[i].bucket, items[i].claim.delta};
  AddToSums(changes, n);
  pfree(changes);
  if (!inserted) return;
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  for (int64 i = 0; i < n; i++)
    AddStoredKey(slot, items[i].counter, items[i].key, items[i].bucket);
}

}  // namespace sc
