// stored.cpp: the stored value of a key that is not in the buffer: none for a key the filter of
// stored keys never saw (unless deltas must be added), else one probe of key_values' unique index
// (the load of a key not seen before), or a query where deltas must be added or the index is not
// as the install script made it. Touches no shared state but the slot's fold flag and filter (and
// the slots, to start a flusher for a read that finds none: shared/flusher_slots.hpp).
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"
#include "tid.hpp"

namespace sc {

bool StoredReadsNeedDeltas() {
  // Without a slot (its flusher left, idle), whether every delta is folded is not known: the
  // read starts one, whose first pass folds (worker.cpp).
  return RecoveryInProgress() || LoadsReadDeltas(FlusherForReads());
}

namespace {

// [transactional]
SPIPlanPtr plan_stored[2] = {nullptr, nullptr};

#define SC_ROW_OF(column)                                                                         \
  "(SELECT " column " FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "   \
  "AND key OPERATOR(pg_catalog.=) $2 AND bucket OPERATOR(pg_catalog.=) $3)"

// A transactional value is its key_values row plus its committed, not yet folded deltas, read in
// one snapshot (a fold moves rows from one to the other in one transaction); its last write is the
// later of the row's and the deltas'.
const char* const kStoredSql[2] = {
    "SELECT value, written_at FROM slotted_counter.key_values "
    "WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND key OPERATOR(pg_catalog.=) $2 AND bucket OPERATOR(pg_catalog.=) $3",
    "SELECT (COALESCE(" SC_ROW_OF("value") ", 0) OPERATOR(pg_catalog.+) "
    "COALESCE(d.s, 0))::pg_catalog.int8, GREATEST(" SC_ROW_OF("written_at") ", d.w) "
    "FROM (SELECT pg_catalog.sum(delta) AS s, pg_catalog.max(written_at) AS w "
    "FROM slotted_counter.deltas WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND key OPERATOR(pg_catalog.=) $2 AND bucket OPERATOR(pg_catalog.=) $3) d"};

// The value and written_at columns of k's row in slotted_counter.key_values (0 and kNoWrite if it
// has none) and where the row is (*row, 0 if none), read in `snapshot` through the table's
// primary key (counter, key, bucket) without a query: the load of a key not seen before is this
// one index probe. It reads what the superuser's query would (no privilege check, no row
// security). False when the index is not as the scripts made it (dropped, invalid, rebuilt on
// other columns): the caller runs the query instead.
bool ReadTotalsRow(const CounterKey& k, Snapshot snapshot, int64* value, int64* stamp,
                   uint64* row) {
  Oid relid = ExtensionRelation("key_values");
  if (!OidIsValid(relid)) return false;
  Relation rel = table_open(relid, AccessShareLock);
  // Looked up under the table's lock (which a DROP INDEX waits for), in the table's schema; and
  // opened only if it still exists (DROP INDEX CONCURRENTLY does not wait for that lock).
  Oid indexid = get_relname_relid("key_values_pkey", RelationGetNamespace(rel));
  Relation index = OidIsValid(indexid) ? try_relation_open(indexid, AccessShareLock) : nullptr;
  if (index == nullptr || index->rd_rel->relkind != RELKIND_INDEX) {
    if (index != nullptr) relation_close(index, NoLock);
    table_close(rel, NoLock);
    return false;
  }
  // The columns by name and type, from the relation's descriptor (no catalog lookups).
  static const char* const kNames[5] = {"counter", "key", "bucket", "value", "written_at"};
  static const Oid kTypes[5] = {INT4OID, INT8OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID};
  AttrNumber columns[5] = {InvalidAttrNumber, InvalidAttrNumber, InvalidAttrNumber,
                           InvalidAttrNumber, InvalidAttrNumber};
  TupleDesc desc = RelationGetDescr(rel);
  for (int a = 0; a < desc->natts; a++) {
    Form_pg_attribute att = TupleDescAttr(desc, a);
    for (int i = 0; i < 5 && !att->attisdropped; i++)
      if (att->atttypid == kTypes[i] && strcmp(NameStr(att->attname), kNames[i]) == 0)
        columns[i] = att->attnum;
  }
  AttrNumber value_column = columns[3];
  AttrNumber stamp_column = columns[4];
  const FormData_pg_index* form = index->rd_index;
  bool usable = form->indrelid == relid && form->indisvalid && form->indisunique &&
                index->rd_rel->relam == BTREE_AM_OID && form->indnkeyatts == 3 &&
                value_column != InvalidAttrNumber && stamp_column != InvalidAttrNumber;
  for (int i = 0; usable && i < 3; i++)
    usable = columns[i] != InvalidAttrNumber && form->indkey.values[i] == columns[i];
  if (usable) {
    ScanKeyData keys[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(k.counter));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(k.key));
    ScanKeyInit(&keys[2], 3, BTEqualStrategyNumber, F_TIMESTAMPTZ_EQ,
                TimestampTzGetDatum(k.bucket));
    IndexScanDesc scan = BeginIndexScan(rel, index, snapshot, 3, 0);
    index_rescan(scan, keys, 3, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    *value = 0;
    *stamp = kNoWrite;
    *row = 0;
    if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
      bool isnull;
      Datum d = slot_getattr(slot, value_column, &isnull);
      if (!isnull) *value = DatumGetInt64(d);
      d = slot_getattr(slot, stamp_column, &isnull);
      if (!isnull) *stamp = DatumGetTimestampTz(d);
      *row = PackRow(&slot->tts_tid);
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
  }
  // The locks stay until the end of the transaction, as a query's would.
  index_close(index, NoLock);
  table_close(rel, NoLock);
  return usable;
}

}  // namespace

int64 ReadStoredValue(const CounterKey& k, bool transactional, bool committed_only,
                      int64* stamp, uint64* row) {
  uint64 found_row = 0;
  transactional = transactional && StoredReadsNeedDeltas();
  // A key the filter of stored keys never saw has no row (shared/stored_keys.hpp): the answer of
  // the probe below, without it. Not while a transactional key's deltas may hold it.
  if (!transactional && StoredKeysInUse(k.db) &&
      !StoredKeyMayExist(k, ExtensionRelation("key_values"))) {
    if (stamp != nullptr) *stamp = kNoWrite;
    if (row != nullptr) *row = 0;
    return 0;
  }
  // A tuple this transaction inserted is visible from command curcid on, one it deleted until
  // then: from the first command, neither. Always on a registered copy: the latest snapshot
  // itself is static, and others may take it meanwhile.
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  if (committed_only) snapshot->curcid = FirstCommandId;
  int64 value = 0;
  int64 written = kNoWrite;
  if (transactional || !ReadTotalsRow(k, snapshot, &value, &written, &found_row)) {
    SpiSession spi = ConnectSpi();
    static const Oid types[3] = {INT4OID, INT8OID, TIMESTAMPTZOID};
    SPIPlanPtr plan =
        KeptPlan(&plan_stored[transactional], kStoredSql[transactional], 3, types);
    Datum args[3] = {Int32GetDatum(k.counter), Int64GetDatum(k.key),
                     TimestampTzGetDatum(k.bucket)};
    int rc = SPI_execute_snapshot(plan, args, nullptr, snapshot, InvalidSnapshot, true, false, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
    if (SPI_processed == 1) {
      bool isnull;
      value = DatumGetInt64(
          SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
      if (isnull) value = 0;
      Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
      if (!isnull) written = DatumGetTimestampTz(d);
    }
    FinishSpi(spi);
  }
  UnregisterSnapshot(snapshot);
  if (stamp != nullptr) *stamp = written;
  if (row != nullptr) *row = found_row;
  return value;
}

}  // namespace sc
