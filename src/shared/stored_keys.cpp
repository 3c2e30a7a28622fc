// stored_keys.cpp: the glue of each database's filter of stored keys (core/stored_filter.hpp):
// its look-up for a load, the keys of a statement's new rows (from the insert trigger's
// transition table), its invalidation, and its rebuild by the flusher from a scan of key_values.
#include "shared/stored_keys.hpp"

#include "utils/tuplestore.h"

#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

// How many rows a rebuild's scan reads between two checks for interrupts.
constexpr uint64 kRowsPerInterruptCheck = 4096;

// The key columns of key_values, by name and type from the relation's descriptor; false if one is
// missing (the table is not as the install script made it).
bool KeyColumns(TupleDesc desc, AttrNumber columns[3]) {
  static const char* const kNames[3] = {"counter", "key", "bucket"};
  static const Oid kTypes[3] = {INT4OID, INT8OID, TIMESTAMPTZOID};
  for (int i = 0; i < 3; i++) columns[i] = InvalidAttrNumber;
  for (int a = 0; a < desc->natts; a++) {
    Form_pg_attribute att = TupleDescAttr(desc, a);
    for (int i = 0; i < 3 && !att->attisdropped; i++)
      if (att->atttypid == kTypes[i] && strcmp(NameStr(att->attname), kNames[i]) == 0)
        columns[i] = att->attnum;
  }
  return columns[0] != InvalidAttrNumber && columns[1] != InvalidAttrNumber &&
         columns[2] != InvalidAttrNumber;
}

// The filter's hash of the row in `slot` (a counter or key of NULL: none, false).
bool RowHash(TupleTableSlot* slot, const AttrNumber columns[3], uint64* h) {
  bool counter_null, key_null, bucket_null;
  Datum counter = slot_getattr(slot, columns[0], &counter_null);
  Datum key = slot_getattr(slot, columns[1], &key_null);
  Datum bucket = slot_getattr(slot, columns[2], &bucket_null);
  if (counter_null || key_null) return false;
  *h = StoredKeyHash(DatumGetInt32(counter), DatumGetInt64(key),
                     bucket_null ? kNoBucket : DatumGetTimestampTz(bucket));
  return true;
}

void AbandonRebuildCallback(int, Datum arg) {
  AbandonRebuild(reinterpret_cast<DatabaseSlot*>(DatumGetPointer(arg))->stored, MyProcPid);
}

// The rebuild itself (RebuildStoredKeys), with the rebuild taken and token its generation.
bool ScanIntoFilter(DatabaseSlot* slot, Oid relation, uint64 token) {
  // No transaction that held a lock conflicting with SHARE when the bits were cleared may still
  // run: the lock, taken without waiting, says so; then the snapshot, and the lock goes.
  if (!ConditionalLockRelationOid(relation, ShareLock)) return false;
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  UnlockRelationOid(relation, ShareLock);
  Relation rel = table_open(relation, AccessShareLock);
  AttrNumber columns[3];
  bool usable = KeyColumns(RelationGetDescr(rel), columns);
  if (usable) {
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    TupleTableSlot* row = table_slot_create(rel, nullptr);
    uint64 rows = 0;
    while (table_scan_getnextslot(scan, ForwardScanDirection, row)) {
      uint64 h;
      if (RowHash(row, columns, &h)) AddStored(slot->stored, h);
      if (++rows % kRowsPerInterruptCheck == 0) CHECK_FOR_INTERRUPTS();
    }
    ExecDropSingleTupleTableSlot(row);
    table_endscan(scan);
  }
  table_close(rel, AccessShareLock);
  UnregisterSnapshot(snapshot);
  return usable && FinishRebuild(slot->stored, MyProcPid, token, relation);
}

}  // namespace

bool StoredKeysInUse(Oid db) {
  DatabaseSlot* slot = FindSlot(db);
  return slot != nullptr && StoredFilterValid(slot->stored);
}

bool StoredKeyMayExist(const CounterKey& k, Oid relation) {
  DatabaseSlot* slot = FindSlot(k.db);
  if (slot == nullptr || !OidIsValid(relation)) return true;
  return MayBeStored(slot->stored, StoredKeyHash(k.counter, k.key, k.bucket), relation);
}

void AddStoredKeys(Relation rel, Tuplestorestate* rows) {
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  // No slot: the one assigned later starts invalid (ResetSlot).
  if (slot == nullptr || slot->stored.words == nullptr || rows == nullptr) return;
  AttrNumber columns[3];
  if (!KeyColumns(RelationGetDescr(rel), columns)) {
    ForgetStoredKeys(MyDatabaseId);
    return;
  }
  // A read pointer of its own from the start, as a scan of the transition table takes one
  // (nodeNamedtuplestorescan.c; the store was made with EXEC_FLAG_REWIND); the first pointer is
  // active again after, as when the statement wrote the rows.
  int pointer = tuplestore_alloc_read_pointer(rows, EXEC_FLAG_REWIND);
  tuplestore_select_read_pointer(rows, pointer);
  tuplestore_rescan(rows);
  TupleTableSlot* row = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsMinimalTuple);
  while (tuplestore_gettupleslot(rows, true, false, row)) {
    uint64 h;
    if (RowHash(row, columns, &h)) AddStored(slot->stored, h);
  }
  ExecDropSingleTupleTableSlot(row);
  tuplestore_select_read_pointer(rows, 0);
}

void ForgetStoredKeys(Oid db) {
  if (DatabaseSlot* slot = FindSlot(db)) InvalidateStored(slot->stored);
}

void RebuildStoredKeys(DatabaseSlot* slot, Oid relation) {
  StoredFilter& f = slot->stored;
  if (f.words == nullptr || !OidIsValid(relation)) return;
  if (StoredFilterValid(f) && f.relation.load() == relation) return;
  // A table of more rows than the filter holds well would answer "maybe" nearly always.
  Relation rel = table_open(relation, AccessShareLock);
  double reltuples = rel->rd_rel->reltuples;
  table_close(rel, AccessShareLock);
  if (reltuples > double(f.word_mask + 1) * 8) return;
  uint64 token;
  if (!BeginRebuild(f, MyProcPid, &token)) return;
  bool valid = false;
  PG_ENSURE_ERROR_CLEANUP(AbandonRebuildCallback, PointerGetDatum(slot));
  {
    valid = ScanIntoFilter(slot, relation, token);
  }
  PG_END_ENSURE_ERROR_CLEANUP(AbandonRebuildCallback, PointerGetDatum(slot));
  if (!valid) AbandonRebuild(f, MyProcPid);
}

const char* StoredKeysState(DatabaseSlot* slot) {
  const StoredFilter& f = slot->stored;
  if (f.words == nullptr) return "off";
  if (StoredFilterValid(f)) return "valid";
  return f.rebuilder.load() != 0 ? "rebuilding" : "invalid";
}

}  // namespace sc
