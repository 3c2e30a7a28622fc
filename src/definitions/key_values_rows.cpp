// key_values_rows.cpp: rows of slotted_counter.key_values written below the executor (the
// header says when and why).
#include <algorithm>
#include <initializer_list>

#include "definitions/key_values_rows.hpp"

#include "core/checked_math.hpp"
#include "core/counter_table.hpp"
#include "definitions/catalog.hpp"
#include "index_writer.hpp"
#include "tid.hpp"

namespace sc {

namespace {

constexpr int kRowsPerInsert = 1000;  // as COPY's buffer (MAX_BUFFERED_TUPLES)

constexpr const char* kNames[kColumns] = {"counter", "key",        "bucket",
                                          "value",   "updated_at", "written_at"};
constexpr Oid kTypes[kColumns] = {INT4OID, INT8OID, TIMESTAMPTZOID,
                                  INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// Whether rel has exactly the install script's columns, in its order, none dropped.
bool ColumnsAsMade(Relation rel) {
  TupleDesc desc = RelationGetDescr(rel);
  if (desc->natts != kColumns) return false;
  for (int a = 0; a < kColumns; a++) {
    Form_pg_attribute att = TupleDescAttr(desc, a);
    if (att->attisdropped || att->atttypid != kTypes[a] ||
        strcmp(NameStr(att->attname), kNames[a]) != 0)
      return false;
  }
  return rel->rd_rel->relam == HEAP_TABLE_AM_OID;
}

// Whether the row in `slot` is u's key (and holds a value and a stamp, as the table requires).
bool RowOfKey(TupleTableSlot* slot, const KeyValueUpdate& u) {
  slot_getallattrs(slot);
  for (int c : {kCounter, kKey, kBucket, kValue, kWrittenAt})
    if (slot->tts_isnull[c]) return false;
  return DatumGetInt32(slot->tts_values[kCounter]) == u.counter &&
         DatumGetInt64(slot->tts_values[kKey]) == u.key &&
         DatumGetTimestampTz(slot->tts_values[kBucket]) == u.bucket;
}

// The row in `found` updated by *u, into `updated`; u->value and u->change set.
void UpdatedRow(TupleTableSlot* found, KeyValueUpdate* u, TimestampTz updated_at,
                TupleTableSlot* updated) {
  ExecClearTuple(updated);
  for (int c = 0; c < kColumns; c++) {
    updated->tts_values[c] = found->tts_values[c];
    updated->tts_isnull[c] = found->tts_isnull[c];
  }
  int64 old = DatumGetInt64(found->tts_values[kValue]);
  TimestampTz written = DatumGetTimestampTz(found->tts_values[kWrittenAt]);
  bool expired = u->cutoff != kNeverExpires && written <= u->cutoff;
  int64 value = u->delta;
  if ((!expired && !CheckedAdd(old, u->delta, &value)) ||
      __builtin_sub_overflow(value, old, &u->change))
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
  u->value = value;
  updated->tts_values[kValue] = Int64GetDatum(value);
  updated->tts_values[kUpdatedAt] = TimestampTzGetDatum(updated_at);
  updated->tts_values[kWrittenAt] = TimestampTzGetDatum(Max(written, u->written_at));
  updated->tts_isnull[kUpdatedAt] = false;
  ExecStoreVirtualTuple(updated);
}

}  // namespace

Relation OpenKeyValues(bool* as_made) {
  Oid relid = ExtensionRelation("key_values");
  if (!OidIsValid(relid)) elog(ERROR, "slotted_counter.key_values is missing");
  Relation rel = table_open(relid, RowExclusiveLock);
  *as_made = ColumnsAsMade(rel);
  return rel;
}

void InsertKeyValues(Relation rel, NewKeyValue* rows, int64 n, TimestampTz updated_at) {
  Assert(ColumnsAsMade(rel));
  IndexWriter w = OpenIndexWriter(rel, 1);
  auto* slots = static_cast<TupleTableSlot**>(palloc(sizeof(TupleTableSlot*) * kRowsPerInsert));
  for (int s = 0; s < kRowsPerInsert; s++) slots[s] = table_slot_create(rel, nullptr);
  BulkInsertState bistate = GetBulkInsertState();
  CommandId cid = GetCurrentCommandId(true);
  for (int64 first = 0; first < n; first += kRowsPerInsert) {
    int count = int(std::min<int64>(kRowsPerInsert, n - first));
    for (int s = 0; s < count; s++) {
      const NewKeyValue& row = rows[first + s];
      TupleTableSlot* slot = slots[s];
      ExecClearTuple(slot);
      slot->tts_values[kCounter] = Int32GetDatum(row.counter);
      slot->tts_values[kKey] = Int64GetDatum(row.key);
      slot->tts_values[kBucket] = TimestampTzGetDatum(row.bucket);
      slot->tts_values[kValue] = Int64GetDatum(row.value);
      slot->tts_values[kUpdatedAt] = TimestampTzGetDatum(updated_at);
      slot->tts_values[kWrittenAt] = TimestampTzGetDatum(row.written_at);
      for (int c = 0; c < kColumns; c++) slot->tts_isnull[c] = false;
      ExecStoreVirtualTuple(slot);
    }
    table_multi_insert(rel, slots, count, cid, 0, bistate);
    for (int s = 0; s < count; s++) {
      ResetPerTupleExprContext(w.estate);
      if (w.result_rel->ri_NumIndices > 0) InsertIndexTuples(w.result_rel, slots[s], w.estate);
      rows[first + s].row = PackRow(&slots[s]->tts_tid);
    }
  }
  FreeBulkInsertState(bistate);
  for (int s = 0; s < kRowsPerInsert; s++) ExecDropSingleTupleTableSlot(slots[s]);
  CloseIndexWriter(w);
}

int64 UpdateKeyValuesAt(Relation rel, KeyValueUpdate* updates, int64 n, TimestampTz updated_at) {
  Assert(ColumnsAsMade(rel));
  // In no range table: no column reads as updated, and the index entries of a version that is
  // not HOT carry the hint that its indexed columns stayed (bottom-up deletion), as they did.
  IndexWriter w = OpenIndexWriter(rel, 0);
  EState* estate = w.estate;
  TupleTableSlot* found = table_slot_create(rel, nullptr);
  TupleTableSlot* updated = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  CommandId cid = GetCurrentCommandId(true);
  BlockNumber blocks = RelationGetNumberOfBlocks(rel);
  MemoryContext outer = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
  Buffer page = InvalidBuffer;
  int64 done = 0;
  for (int64 i = 0; i < n; i++) {
    ResetPerTupleExprContext(estate);
    KeyValueUpdate& u = updates[i];
    ItemPointerData tid;
    UnpackRow(u.row, &tid);
    u.row = 0;
    // A TID past the end (the table was truncated or rewritten since) is no row to fetch.
    if (!ItemPointerIsValid(&tid) || ItemPointerGetBlockNumber(&tid) >= blocks) continue;
    // Each page pruned when the writer comes to it, as an index scan prunes the pages it visits:
    // the versions its updates left dead make room for HOT updates again.
    if (!BufferIsValid(page) || BufferGetBlockNumber(page) != ItemPointerGetBlockNumber(&tid)) {
      if (BufferIsValid(page)) ReleaseBuffer(page);
      page = ReadBuffer(rel, ItemPointerGetBlockNumber(&tid));
      heap_page_prune_opt(rel, page);
    }
    if (!table_tuple_fetch_row_version(rel, &tid, snapshot, found) || !RowOfKey(found, u))
      continue;
    UpdatedRow(found, &u, updated_at, updated);
    ExecClearTuple(found);
    IndexEntries entries;
    // Not TM_Ok: a concurrent transaction updated or deleted the row since the snapshot (the
    // update waited for it to end); the caller's statement finds what it left.
    if (UpdateTuple(rel, &tid, updated, cid, snapshot, &entries) != TM_Ok) continue;
    if (w.result_rel->ri_NumIndices > 0)
      InsertUpdatedIndexTuples(w.result_rel, updated, estate, entries);
    u.row = PackRow(&updated->tts_tid);
    done++;
  }
  MemoryContextSwitchTo(outer);
  if (BufferIsValid(page)) ReleaseBuffer(page);
  UnregisterSnapshot(snapshot);
  ExecDropSingleTupleTableSlot(updated);
  ExecDropSingleTupleTableSlot(found);
  CloseIndexWriter(w);
  return done;
}

}  // namespace sc
