// stored_keys.cpp: the glue of each database's filter of stored keys (core/stored_filter.hpp):
// its look-ups for a load, a request id and a text, the keys of a statement's new rows (from the
// insert triggers' transition tables), its invalidation, and its rebuild by the flusher from scans
// of key_values, requests and keys.
#include "shared/stored_keys.hpp"

extern "C" {
#include "storage/bufmgr.h"
#include "utils/tuplestore.h"
}

#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

// How many rows a rebuild's scan reads between two checks for interrupts.
constexpr uint64 kRowsPerInterruptCheck = 4096;

// The key columns of a table of the filter, by name and type from the relation's descriptor.
struct KeyColumns {
  StoredTable table;
  AttrNumber columns[3];   // the last: key_values' bucket only
};

// False if the relation is none of the tables, or a column is missing (the table is not as the
// install script made it).
bool FindKeyColumns(Relation rel, KeyColumns* out) {
  static const char* const kNames[kStoredTables][3] = {{"counter", "key", "bucket"},
                                                        {"counter", "request_id", nullptr},
                                                        {"counter", "key", nullptr}};
  static const Oid kTypes[kStoredTables][3] = {{INT4OID, INT8OID, TIMESTAMPTZOID},
                                               {INT4OID, TEXTOID, InvalidOid},
                                               {INT4OID, TEXTOID, InvalidOid}};
  int t = 0;
  while (t < kStoredTables && strcmp(RelationGetRelationName(rel), kStoredTableNames[t]) != 0) t++;
  if (t == kStoredTables) return false;
  out->table = StoredTable(t);
  int n = t == kKeyValuesTable ? 3 : 2;
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

uint64 BytesHash(const char* bytes, int len) {
  return hash_bytes_extended(reinterpret_cast<const unsigned char*>(bytes), len, 0);
}

// The filter's hash of the row in `slot` (a column of NULL but the bucket: none, false).
bool RowHash(TupleTableSlot* slot, const KeyColumns& k, uint64* h) {
  bool counter_null, key_null;
  Datum counter = slot_getattr(slot, k.columns[0], &counter_null);
  Datum key = slot_getattr(slot, k.columns[1], &key_null);
  if (counter_null || key_null) return false;
  if (k.table != kKeyValuesTable) {
    text* t = DatumGetTextPP(key);
    uint64 bytes = BytesHash(VARDATA_ANY(t), int(VARSIZE_ANY_EXHDR(t)));
    if (reinterpret_cast<Pointer>(t) != DatumGetPointer(key)) pfree(t);
    *h = k.table == kRequestsTable ? StoredRequestHash(DatumGetInt32(counter), bytes)
                                   : StoredTextHash(DatumGetInt32(counter), bytes);
    return true;
  }
  bool isnull;
  Datum bucket = slot_getattr(slot, k.columns[2], &isnull);
  *h = StoredKeyHash(DatumGetInt32(counter), DatumGetInt64(key), DatumGetTimestampTz(bucket));
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

// A rebuild between its clear and its scan: the transactions that held a lock on the tables
// conflicting with SHARE when it cleared the bits, which must all end before its snapshot. The
// flusher's, across its flushes (RebuildStoredKeys looks again after each).
struct PendingRebuild {
  DatabaseSlot* slot = nullptr;  // none pending
  uint64 token = 0;
  VirtualTransactionId* lockers = nullptr;  // in TopMemoryContext
  int nlockers = 0;
};
PendingRebuild pending;
bool exit_callback_registered = false;

// Ends the pending rebuild; gives the filter's rebuild up unless FinishRebuild already did.
void EndPending() {
  if (pending.slot != nullptr) AbandonRebuild(pending.slot->stored, MyProcPid);
  if (pending.lockers != nullptr) pfree(pending.lockers);
  pending = PendingRebuild();
}

void EndPendingCallback(int, Datum) { EndPending(); }

// The transactions holding a lock on one of the tables that conflicts with SHARE (writers, and
// VACUUM or ANALYZE), as CREATE INDEX CONCURRENTLY lists them.
void ListLockers(const Oid tables[kStoredTables]) {
  for (int t = 0; t < kStoredTables; t++) {
    LOCKTAG tag;
    SET_LOCKTAG_RELATION(tag, MyDatabaseId, tables[t]);
    int n = 0;
    // In the transaction's memory; what is kept, in TopMemoryContext.
    VirtualTransactionId* found = GetLockConflicts(&tag, ShareLock, &n);
    if (n > 0) {
      size_t bytes = sizeof(VirtualTransactionId) * size_t(pending.nlockers + n);
      pending.lockers =
          pending.lockers == nullptr
              ? static_cast<VirtualTransactionId*>(MemoryContextAlloc(TopMemoryContext, bytes))
              : static_cast<VirtualTransactionId*>(repalloc(pending.lockers, bytes));
      memcpy(pending.lockers + pending.nlockers, found, sizeof(VirtualTransactionId) * size_t(n));
      pending.nlockers += n;
    }
  }
}

// Whether every listed locker ended (asked without waiting; the ones that did are dropped).
bool LockersEnded() {
  while (pending.nlockers > 0 && VirtualXactLock(pending.lockers[pending.nlockers - 1], false))
    pending.nlockers--;
  return pending.nlockers == 0;
}

// The rows of the tables (oids as StoredTable numbers them) of more than the filter holds well
// (a row per 8 bits): it would answer "maybe" nearly always. A table never analyzed counts 100
// rows a page.
bool TooManyRows(const StoredFilter& f, const Oid tables[kStoredTables]) {
  double rows = 0;
  for (int t = 0; t < kStoredTables; t++) {
    Relation rel = table_open(tables[t], AccessShareLock);
    double reltuples = rel->rd_rel->reltuples;
    rows += reltuples >= 0 ? reltuples : 100.0 * double(RelationGetNumberOfBlocks(rel));
    table_close(rel, AccessShareLock);
  }
  return rows > double(f.word_mask + 1) * 8;
}

// The scan of a rebuild whose lockers ended: a snapshot, every row of the tables, valid unless an
// invalidation came meanwhile.
bool ScanIntoFilter(DatabaseSlot* slot, const Oid tables[kStoredTables], uint64 token) {
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  bool usable = true;
  for (int t = 0; t < kStoredTables && usable; t++) usable = ScanTable(slot, tables[t], snapshot);
  UnregisterSnapshot(snapshot);
  return usable &&
         FinishRebuild(slot->stored, MyProcPid, token, MyDatabaseId, tables[kKeyValuesTable]);
}

}  // namespace

bool StoredKeysInUse(Oid db) {
  // Not on a standby: its replay writes rows that no trigger adds.
  DatabaseSlot* slot = FindSlot(db);
  return slot != nullptr && StoredFilterValid(slot->stored) && !RecoveryInProgress();
}

bool StoredKeyMayExist(const CounterKey& k, Oid relation) {
  DatabaseSlot* slot = FindSlot(k.db);
  if (slot == nullptr || !OidIsValid(relation)) return true;
  return MayBeStored(slot->stored, StoredKeyHash(k.counter, k.key, k.bucket), k.db, relation);
}

bool StoredBytesMayExist(StoredTable table, int32 counter, const char* bytes, int len,
                         Oid key_values) {
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  if (slot == nullptr || !OidIsValid(key_values)) return true;
  Assert(table == kRequestsTable || table == kKeysTable);
  uint64 hash = BytesHash(bytes, len);
  return MayBeStored(slot->stored,
                     table == kRequestsTable ? StoredRequestHash(counter, hash)
                                             : StoredTextHash(counter, hash),
                     MyDatabaseId, key_values);
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

void AddStoredRow(Relation rel, TupleTableSlot* row) {
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  if (slot == nullptr || slot->stored.words == nullptr) return;
  KeyColumns columns;
  uint64 h;
  if (!FindKeyColumns(rel, &columns))
    ForgetStoredKeys(MyDatabaseId);
  else if (RowHash(row, columns, &h))
    AddStored(slot->stored, h);
}

void AddStoredKey(DatabaseSlot* slot, int32 counter, int64 key, int64 bucket) {
  if (slot == nullptr || slot->stored.words == nullptr) return;
  AddStored(slot->stored, StoredKeyHash(counter, key, bucket));
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

void RebuildStoredKeys(DatabaseSlot* slot, const Oid tables[kStoredTables]) {
  StoredFilter& f = slot->stored;
  if (f.words == nullptr || RecoveryInProgress()) return;
  for (int t = 0; t < kStoredTables; t++)
    if (!OidIsValid(tables[t])) return;
  if (pending.slot != nullptr && (pending.slot != slot || f.state.load() != pending.token))
    EndPending();  // invalidated since it cleared: it begins again
  if (pending.slot == nullptr) {
    if (StoredFilterValid(f) && f.db.load() == MyDatabaseId &&
        f.relation.load() == tables[kKeyValuesTable])
      return;
    if (TooManyRows(f, tables)) return;
    uint64 token;
    if (!BeginRebuild(f, MyProcPid, &token)) return;
    if (!exit_callback_registered) {
      before_shmem_exit(EndPendingCallback, 0);
      exit_callback_registered = true;
    }
    pending.slot = slot;
    pending.token = token;
    ListLockers(tables);
  }
  if (!LockersEnded()) return;  // looked at again after the next flush
  PG_ENSURE_ERROR_CLEANUP(EndPendingCallback, 0);
  {
    (void)ScanIntoFilter(slot, tables, pending.token);
  }
  PG_END_ENSURE_ERROR_CLEANUP(EndPendingCallback, 0);
  EndPending();
}

const char* StoredKeysState(DatabaseSlot* slot) {
  const StoredFilter& f = slot->stored;
  if (f.words == nullptr) return "off";
  if (StoredFilterValid(f)) return "valid";
  return f.rebuilder.load() != 0 ? "rebuilding" : "invalid";
}

}  // namespace sc
