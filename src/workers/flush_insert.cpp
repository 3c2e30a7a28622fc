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
#include "definitions/sums_sql.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

constexpr int kRowsPerInsert = 1000;  // as COPY's buffer (MAX_BUFFERED_TUPLES)

enum Column { kCounter, kKey, kBucket, kValue, kUpdatedAt, kWrittenAt, kColumns };
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
void InsertRows(Relation rel, const FlushItem* items, int64 n, bool stamped) {
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
    }
  }
  FreeBulkInsertState(bistate);
  for (int s = 0; s < kRowsPerInsert; s++) ExecDropSingleTupleTableSlot(slots[s]);
  ExecCloseIndices(result_rel);
  FreeExecutorState(estate);
}

// One (counter, bucket)'s change, a partial sum that fits in a bigint (a group whose deltas sum
// past one has several; the statement sums them as numeric).
struct SumChange {
  int32 counter;
  int64 bucket;
  int64 change;
};

SPIPlanPtr plan_sums = nullptr;

// Adds each (counter, bucket)'s deltas of items to its row of counter_totals with the insert
// trigger's statement (definitions/sums_sql.hpp), with the latest snapshot as the trigger.
void AddToSums(const FlushItem* items, int64 n) {
  auto* changes = static_cast<SumChange*>(MemoryContextAllocHuge(
      CurrentMemoryContext, sizeof(SumChange) * (n + 1)));
  for (int64 i = 0; i < n; i++)
    changes[i] = SumChange{items[i].counter, items[i].bucket, items[i].claim.delta};
  std::sort(changes, changes + n, [](const SumChange& a, const SumChange& b) {
    return a.counter != b.counter ? a.counter < b.counter : a.bucket < b.bucket;
  });
  int64 groups = 0;
  for (int64 i = 0; i < n; i++) {
    SumChange& last = changes[groups > 0 ? groups - 1 : 0];
    int64 added;
    if (groups > 0 && last.counter == changes[i].counter && last.bucket == changes[i].bucket &&
        !__builtin_add_overflow(last.change, changes[i].change, &added))
      last.change = added;
    else
      changes[groups++] = changes[i];
  }
  auto* counters = static_cast<int32*>(palloc(sizeof(int32) * (groups + 1)));
  auto* buckets = static_cast<int64*>(palloc(sizeof(int64) * (groups + 1)));
  auto* amounts = static_cast<int64*>(palloc(sizeof(int64) * (groups + 1)));
  for (int64 g = 0; g < groups; g++)
    counters[g] = changes[g].counter, buckets[g] = changes[g].bucket,
    amounts[g] = changes[g].change;
  static const Oid types[3] = {INT4ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID};
  SPIPlanPtr plan = KeptPlan(
      &plan_sums,
      SC_ADD_TO_SUMS(
          "SELECT u.counter, u.bucket, u.change::pg_catalog.numeric AS v FROM ROWS FROM ("
          "pg_catalog.unnest($1::pg_catalog.int4[]), "
          "pg_catalog.unnest($2::pg_catalog.timestamptz[]), "
          "pg_catalog.unnest($3::pg_catalog.int8[])) AS u(counter, bucket, change)"),
      3, types);
  Datum args[3] = {Int4Array(counters, int(groups)), TimestampArray(buckets, int(groups)),
                   Int8Array(amounts, int(groups))};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, false,
                                false, 0);
  if (rc != SPI_OK_INSERT) elog(ERROR, "keeping slotted_counter.counter_totals failed: %d", rc);
}

}  // namespace

void InsertFreshRows(const FlushItem* items, int64 n, bool stamped) {
  if (n == 0) return;
  Oid relid = ExtensionRelation("key_values");
  if (!OidIsValid(relid)) elog(ERROR, "slotted_counter.key_values is missing");
  Relation rel = table_open(relid, RowExclusiveLock);
  if (!ColumnsAsMade(rel)) {
    table_close(rel, NoLock);
    CopyFreshRows(items, n, stamped);
    return;
  }
  InsertRows(rel, items, n, stamped);
  table_close(rel, NoLock);
  // What the rows' writer and the statements below see of them from here on.
  CommandCounterIncrement();
  AddToSums(items, n);
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  for (int64 i = 0; i < n; i++)
    AddStoredKey(slot, items[i].counter, items[i].key, items[i].bucket);
}

}  // namespace sc
