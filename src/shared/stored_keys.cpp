// stored_keys.cpp: the glue of each database's filter of stored keys (core/stored_filter.hpp):
// its look-ups for a load and for a request id, the keys of a statement's new rows (from the
// insert triggers' transition tables), its invalidation, and its rebuild by the flusher from scans
// of key_values and requests.
#include "shared/stored_keys.hpp"

#include "utils/tuplestore.h"

#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

// How many rows a rebuild's scan reads between two checks for interrupts.
constexpr uint64 kRowsPerInterruptCheck = 4096;

// The key columns of a table of the filter (key_values: counter, key, bucket; requests: counter,
// request_id), by name and type from the relation's descriptor.
struct KeyColumns {
  bool requests;           // requests' rows, else key_values'
  AttrNumber columns[3];   // the last: none for requests
};

// False if a column is missing (the table is not as the install script made it).
bool FindKeyColumns(Relation rel, KeyColumns* out) {
  static const char* const kNames[2][3] = {{"counter", "key", "bucket"},
                                           {"counter", "request_id", nullptr}};
  static const Oid kTypes[2][3] = {{INT4OID, INT8OID, TIMESTAMPTZOID},
                                   {INT4OID, TEXTOID, InvalidOid}};
  out->requests = strcmp(RelationGetRelationName(rel), "requests") == 0;
  int t = out->requests ? 1 : 0;
  int n = out->requests ? 2 : 3;
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < 3; i++) out->columns[i] = InvalidAttrNumber;
  for (int a = 0; a < desc->natts; a++) {
    Form_pg_attribute att = TupleDescAttr(desc, a);
    for (int i = 0; i < n && !att->attisdropped; i++)
      if (att->atttypid == kTypes[t][i] && strcmp(NameStr(att->attname), kNames[t][i]) == 0)
        out->columns[i] = att->attnum;
  }
  for (int i = 0; i < n; i++)
    if (out->columns[i] == InvalidAttrNumber) return false;
  return true;
}

uint64 RequestIdHash(int32 counter, const char* id, int len) {
  return StoredRequestHash(counter, hash_bytes_extended(reinterpret_cast<const unsigned char*>(id),
                                                        len, 0));
}

// The filter's hash of the row in `slot` (a column of NULL but the bucket: none, false).
bool RowHash(TupleTableSlot* slot, const KeyColumns& k, uint64* h) {
  bool counter_null, key_null;
  Datum counter = slot_getattr(slot, k.columns[0], &counter_null);
  Datum key = slot_getattr(slot, k.columns[1], &key_null);
  if (counter_null || key_null) return false;
  if (k.requests) {
    text* id = DatumGetTextPP(key);
    *h = RequestIdHash(DatumGetInt32(counter), VARDATA_ANY(id), int(VARSIZE_ANY_EXHDR(id)));
    if (reinterpret_cast<Pointer>(id) != DatumGetPointer(key)) pfree(id);
    return true;
  }
  bool bucket_null;
  Datum bucket = slot_getattr(slot, k.columns[2], &bucket_null);
  *h = StoredKeyHash(DatumGetInt32(counter), DatumGetInt64(key),
                     bucket_null ? kNoBucket : DatumGetTimestampTz(bucket));
  return true;
}

// Adds the key of every row of `relation` that `snapshot` sees; false if the table is not as the
// install script made it.
bool ScanTable(DatabaseSlot* slot, Oid relation, Snapshot snapshot) {
  Relation rel = table_open(relation, AccessShareLock);
  KeyColumns k;
  bool usable = FindKeyColumns(rel, &k);
  if (usable) {
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    TupleTableSlot* row = table_slot_create(rel, nullptr);
    uint64 rows = 0;
    while (table_scan_getnextslot(scan, ForwardScanDirection, row)) {
      uint64 h;
      if (RowHash(row, k, &h)) AddStored(slot->stored, h);
      if (++rows % kRowsPerInterruptCheck == 0) CHECK_FOR_INTERRUPTS();
    }
    ExecDropSingleTupleTableSlot(row);
    table_endscan(scan);
  }
  table_close(rel, AccessShareLock);
  return usable;
}

void AbandonRebuildCallback(int, Datum arg) {
  AbandonRebuild(reinterpret_cast<DatabaseSlot*>(DatumGetPointer(arg))->stored, MyProcPid);
}

// The rebuild itself (RebuildStoredKeys), with the rebuild taken and token its generation.
bool ScanIntoFilter(DatabaseSlot* slot, Oid key_values, Oid requests, uint64 token) {
  // No transaction that held a lock conflicting with SHARE when the bits were cleared may still
  // run: the locks, taken without waiting, say so; then the snapshot, and the locks go.
  if (!ConditionalLockRelationOid(key_values, ShareLock)) return false;
  if (!ConditionalLockRelationOid(requests, ShareLock)) {
    UnlockRelationOid(key_values, ShareLock);
    return false;
  }
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  UnlockRelationOid(requests, ShareLock);
  UnlockRelationOid(key_values, ShareLock);
  bool usable = ScanTable(slot, key_values, snapshot) && ScanTable(slot, requests, snapshot);
  UnregisterSnapshot(snapshot);
  return usable && FinishRebuild(slot->stored, MyProcPid, token, key_values);
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

bool StoredRequestMayExist(int32 counter, const char* id, int len, Oid key_values) {
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  if (slot == nullptr || !OidIsValid(key_values)) return true;
  return MayBeStored(slot->stored, RequestIdHash(counter, id, len), key_values);
}

void AddStoredKeys(Relation rel, Tuplestorestate* rows) {
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  // No slot: the one assigned later starts invalid (ResetSlot).
  if (slot == nullptr || slot->stored.words == nullptr || rows == nullptr) return;
  KeyColumns columns;
  if (!FindKeyColumns(rel, &columns)) {
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

void KeepStoredKeys(TriggerData* trigger) {
  TriggerEvent event = trigger->tg_event;
  if (TRIGGER_FIRED_BY_INSERT(event))
    AddStoredKeys(trigger->tg_relation, trigger->tg_newtable);
  else if (TRIGGER_FIRED_BY_TRUNCATE(event) ||
           (TRIGGER_FIRED_BY_UPDATE(event) && trigger->tg_newtable == nullptr))
    ForgetStoredKeys(MyDatabaseId);
}

void ForgetStoredKeys(Oid db) {
  if (DatabaseSlot* slot = FindSlot(db)) InvalidateStored(slot->stored);
}

void RebuildStoredKeys(DatabaseSlot* slot, Oid key_values, Oid requests) {
  StoredFilter& f = slot->stored;
  if (f.words == nullptr || !OidIsValid(key_values) || !OidIsValid(requests)) return;
  if (StoredFilterValid(f) && f.relation.load() == key_values) return;
  // Tables of more rows than the filter holds well would have it answer "maybe" nearly always.
  double reltuples = 0;
  const Oid tables[2] = {key_values, requests};
  for (Oid relation : tables) {
    Relation rel = table_open(relation, AccessShareLock);
    reltuples += Max(rel->rd_rel->reltuples, 0.0);
    table_close(rel, AccessShareLock);
  }
  if (reltuples > double(f.word_mask + 1) * 8) return;
  uint64 token;
  if (!BeginRebuild(f, MyProcPid, &token)) return;
  bool valid = false;
  PG_ENSURE_ERROR_CLEANUP(AbandonRebuildCallback, PointerGetDatum(slot));
  {
    valid = ScanIntoFilter(slot, key_values, requests, token);
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
