// flush_insert.cpp: a flush's fresh keys inserted into slotted_counter.key_values below the
// executor, with the sums and the filter of stored keys that the table's triggers would keep.
//
// Any trigger with a transition table makes every INSERT of the table collect its rows into a
// tuplestore, enabled or not (PostgreSQL reads the flags of the trigger descriptor): a quarter of
// the flush of a million new keys (3,151 ms with the triggers of counter_totals, 2,339 without:
// docs/performance.md, "Flush"). Rows inserted with table_multi_insert and their index entries
// with ExecInsertIndexTuples, as COPY inserts them, fire no trigger and collect nothing; the
// flush then adds what the triggers would have added: each (counter, bucket)'s deltas to its sum,
// in (counter, bucket) order as the trigger does, and each key to the filter. The rows, their
// WAL (logical decoding included), unique checks (23505 on a key that has a row), partial indexes
// and an index a user added are as for COPY. A table whose columns are not as the install script
// made them is written by COPY instead (flush_copy.cpp).
#include <algorithm>

#include "definitions/catalog.hpp"
#include "definitions/sums.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

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

// The rows of items into rel and its indexes, kRowsPerInsert at a time.
void InsertRows(Relation rel, FlushItem* items, int64 n, bool stamped) {
  EState* estate = CreateExecutorState();
  ResultRelInfo* result_rel = makeNode(ResultRelInfo);
  InitResultRelInfo(result_rel, rel, 1, nullptr, 0);
  ExecOpenIndices(result_rel, false);
  auto* slots = static_cast<TupleTableSlot**>(palloc(sizeof(TupleTableSlot*) * kRowsPerInsert));
  for (int s = 0; s < kRowsPerInsert; s++) slots[s] = table_slot_create(rel, nullptr);
  BulkInsertState bistate = GetBulkInsertState();
  CommandId cid = GetCurrentCommandId(true);
  TimestampTz now = GetCurrentTransactionStartTimestamp();
  for (int64 first = 0; first < n; first += kRowsPerInsert) {
    int count = int(std::min<int64>(kRowsPerInsert, n - first));
    for (int s = 0; s < count; s++) {
      const FlushItem& item = items[first + s];
      TupleTableSlot* slot = slots[s];
      ExecClearTuple(slot);
      slot->tts_values[kCounter] = Int32GetDatum(item.counter);
      slot->tts_values[kKey] = Int64GetDatum(item.key);
      slot->tts_values[kBucket] = TimestampTzGetDatum(item.bucket);  // kNoBucket: -infinity
      slot->tts_values[kValue] = Int64GetDatum(item.claim.delta);
      slot->tts_values[kUpdatedAt] = TimestampTzGetDatum(now);
      slot->tts_values[kWrittenAt] = TimestampTzGetDatum(
          stamped ? StampToStore(item.claim.stamped ? item.claim.stamp : kNoWrite) : now);
      for (int c = 0; c < kColumns; c++) slot->tts_isnull[c] = false;
      ExecStoreVirtualTuple(slot);
    }
    table_multi_insert(rel, slots, count, cid, 0, bistate);
    for (int s = 0; s < count; s++) {
      ResetPerTupleExprContext(estate);
      if (result_rel->ri_NumIndices > 0) InsertIndexTuples(result_rel, slots[s], estate);
      items[first + s].claim.row = PackRow(&slots[s]->tts_tid);
    }
  }
  FreeBulkInsertState(bistate);
  for (int s = 0; s < kRowsPerInsert; s++) ExecDropSingleTupleTableSlot(slots[s]);
  ExecCloseIndices(result_rel);
  FreeExecutorState(estate);
}

}  // namespace

Relation OpenKeyValues(bool* as_made) {
  Oid relid = ExtensionRelation("key_values");
  if (!OidIsValid(relid)) elog(ERROR, "slotted_counter.key_values is missing");
  Relation rel = table_open(relid, RowExclusiveLock);
  *as_made = ColumnsAsMade(rel);
  return rel;
}

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
  InsertRows(rel, items, n, stamped);
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
