// flush_update.cpp: a flush's updates of the rows of keys it wrote before, found where it last
// wrote them (Entry::row) and written below the executor.
//
// The statement's UPDATE (flush_write.cpp) finds each key's row by a descent of the primary key:
// a third of the flusher in a profile of a million updated keys (docs/performance.md, "Flush").
// A row the flush wrote has its TID in the entry. Fetched there with the step's snapshot, visible
// and holding the item's counter, key and bucket, it is the key's row (the primary key admits one
// visible row per key), and it is updated as the UPDATE would update it: table_tuple_update (HOT
// when its page has room; WAL, logical decoding and a concurrent writer's wait as for any
// update), index entries when it was not HOT, value + delta with the UPDATE's error on overflow,
// updated_at now() and written_at never going back. No trigger fires: the table's row triggers are
// the sums', which the flush keeps itself (KeepItemSums, as under KeepingSums), and its statement
// triggers keep nothing for rows whose counter, key and bucket stay. A TID that finds nothing of
// the key (the row updated by another writer, deleted, moved by VACUUM FULL or CLUSTER, its slot
// holding another row) leaves the item to the UPDATE.
#include <algorithm>

#include "core/checked_math.hpp"
#include "pg.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

// Whether the row in `slot` is the key of `item`.
bool RowOfItem(TupleTableSlot* slot, const FlushItem& item) {
  slot_getallattrs(slot);
  for (int c = kCounter; c <= kBucket; c++)
    if (slot->tts_isnull[c]) return false;
  return DatumGetInt32(slot->tts_values[kCounter]) == item.counter &&
         DatumGetInt64(slot->tts_values[kKey]) == item.key &&
         DatumGetTimestampTz(slot->tts_values[kBucket]) == item.bucket;
}

// The row in `found` with item's delta added, into `updated`, as the flush's UPDATE sets it.
void UpdatedRow(TupleTableSlot* found, const FlushItem& item, TimestampTz now,
                TupleTableSlot* updated) {
  ExecClearTuple(updated);
  for (int c = 0; c < kColumns; c++) {
    updated->tts_values[c] = found->tts_values[c];
    updated->tts_isnull[c] = found->tts_isnull[c];
  }
  int64 value;
  if (found->tts_isnull[kValue] ||
      !CheckedAdd(DatumGetInt64(found->tts_values[kValue]), item.claim.delta, &value))
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
  updated->tts_values[kValue] = Int64GetDatum(value);
  updated->tts_values[kUpdatedAt] = TimestampTzGetDatum(now);
  TimestampTz written = StampToStore(item.claim.stamped ? item.claim.stamp : kNoWrite);
  if (!found->tts_isnull[kWrittenAt])
    written = Max(written, DatumGetTimestampTz(found->tts_values[kWrittenAt]));
  updated->tts_values[kWrittenAt] = TimestampTzGetDatum(written);
  updated->tts_isnull[kUpdatedAt] = updated->tts_isnull[kWrittenAt] = false;
  ExecStoreVirtualTuple(updated);
}

// The rows of items at their claim.row into rel (as made), each item's claim.row set as
// UpdateRowsInPlace says.
int64 UpdateAtRows(Relation rel, FlushItem* items, int64 n) {
  EState* estate = CreateExecutorState();
  ResultRelInfo* result_rel = makeNode(ResultRelInfo);
  // In no range table: no column reads as updated, and the index entries of a version that is
  // not HOT carry the hint that its indexed columns stayed (bottom-up deletion), as they did.
  InitResultRelInfo(result_rel, rel, 0, nullptr, 0);
  ExecOpenIndices(result_rel, false);
  TupleTableSlot* found = table_slot_create(rel, nullptr);
  TupleTableSlot* updated = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  CommandId cid = GetCurrentCommandId(true);
  TimestampTz now = GetCurrentTransactionStartTimestamp();
  BlockNumber blocks = RelationGetNumberOfBlocks(rel);
  MemoryContext outer = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
  Buffer page = InvalidBuffer;
  int64 done = 0;
  for (int64 i = 0; i < n; i++) {
    ResetPerTupleExprContext(estate);
    FlushItem& item = items[i];
    ItemPointerData tid;
    UnpackRow(item.claim.row, &tid);
    item.claim.row = 0;
    // A TID past the end (the table was truncated or rewritten since) is no row to fetch.
    if (!ItemPointerIsValid(&tid) || ItemPointerGetBlockNumber(&tid) >= blocks) continue;
    // Each page pruned when the flush comes to it, as an index scan prunes the pages it visits:
    // the versions its updates left dead make room for HOT updates again.
    if (!BufferIsValid(page) || BufferGetBlockNumber(page) != ItemPointerGetBlockNumber(&tid)) {
      if (BufferIsValid(page)) ReleaseBuffer(page);
      page = ReadBuffer(rel, ItemPointerGetBlockNumber(&tid));
      heap_page_prune_opt(rel, page);
    }
    if (!table_tuple_fetch_row_version(rel, &tid, snapshot, found) || !RowOfItem(found, item))
      continue;
    UpdatedRow(found, item, now, updated);
    ExecClearTuple(found);
    IndexEntries entries;
    // Not TM_Ok: a concurrent transaction updated or deleted the row since the snapshot (the
    // update waited for it to end); the UPDATE's own snapshot finds what it left.
    if (UpdateTuple(rel, &tid, updated, cid, snapshot, &entries) != TM_Ok) continue;
    if (result_rel->ri_NumIndices > 0)
      InsertUpdatedIndexTuples(result_rel, updated, estate, entries);
    item.claim.row = PackRow(&updated->tts_tid);
    done++;
  }
  MemoryContextSwitchTo(outer);
  if (BufferIsValid(page)) ReleaseBuffer(page);
  UnregisterSnapshot(snapshot);
  ExecDropSingleTupleTableSlot(updated);
  ExecDropSingleTupleTableSlot(found);
  ExecCloseIndices(result_rel);
  FreeExecutorState(estate);
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
