// large_commit.cpp: a commit too large to pin its keys (the protocol is in large_commit.hpp).
#include <initializer_list>

#include "transactions/large_commit.hpp"

#include "buffer/rank_indexes.hpp"
#include "core/checked_math.hpp"
#include "definitions/expiry.hpp"
#include "definitions/key_values_rows.hpp"
#include "definitions/sums.hpp"
#include "settings.hpp"
#include "shared/shmem.hpp"
#include "shared/stored_keys.hpp"
#include "spi.hpp"
#include "transactions/fold_sql.hpp"

namespace sc {

namespace {

// The counters whose loads this commit holds (in TopTransactionContext), and the slot it counts
// itself in as a writer of key_values.
int32* held = nullptr;
int nheld = 0;
DatabaseSlot* writing_slot = nullptr;

void ReleaseHolds() {
  for (int i = 0; i < nheld; i++) ReleaseCounterLoads(held[i]);
  nheld = 0;
}

// Step 1: the counters' rows FOR UPDATE, in id order, with the latest snapshot; 42704 naming one
// dropped since this transaction counted into it.
void LockCounters(const CounterDef* defs, int n) {
  auto* ids = static_cast<int32*>(palloc(sizeof(int32) * (n + 1)));
  for (int i = 0; i < n; i++) ids[i] = defs[i].id;
  Oid type = INT4ARRAYOID;
  Datum arg = Int4Array(ids, n);
  int rc = ExecuteWithLatestSnapshot(
      "SELECT id FROM slotted_counter.counters WHERE id OPERATOR(pg_catalog.=) "
      "ANY ($1::pg_catalog.int4[]) ORDER BY id FOR UPDATE",
      1, &type, &arg);
  if (rc != SPI_OK_SELECT) elog(ERROR, "locking the counters failed: %d", rc);
  if (SPI_processed == uint64(n)) return;
  for (int i = 0; i < n; i++) {
    bool found = false;
    for (uint64 r = 0; r < SPI_processed && !found; r++) {
      bool isnull;
      found = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1,
                                          &isnull)) == defs[i].id;
    }
    if (!found) ReportDroppedSinceCounted(defs[i].name);
  }
}

// Before the holds: every table the commit writes, and its indexes, locked as its
// statements will lock them, so that no wait for a lock comes once loads wait for this commit
// (the lock manager cannot see a loader that waits for the holds).
void LockTables() {
  for (const char* name : {"key_values", "counter_totals", "deltas"}) {
    Oid relid = ExtensionRelation(name);
    if (!OidIsValid(relid)) continue;  // the statement reports it
    Relation rel = table_open(relid, RowExclusiveLock);
    List* indexes = RelationGetIndexList(rel);
    ListCell* cell;
    foreach (cell, indexes)
      LockRelationOid(lfirst_oid(cell), RowExclusiveLock);
    list_free(indexes);
    table_close(rel, NoLock);
  }
}

// Step 3: the committed deltas of the counters into key_values, every page of them, stamped
// `now`.
void FoldDeltas(const CounterDef* defs, int n, TimestampTz now) {
  auto* ids = static_cast<int32*>(palloc(sizeof(int32) * (n + 1)));
  for (int i = 0; i < n; i++) ids[i] = defs[i].id;
  auto* first = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData)));
  auto* beyond = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData)));
  ItemPointerSet(first, 0, 0);
  ItemPointerSet(beyond, MaxBlockNumber, 0);
  Oid types[4] = {INT4ARRAYOID, TIDOID, TIDOID, TIMESTAMPTZOID};
  Datum args[4] = {Int4Array(ids, n), PointerGetDatum(first), PointerGetDatum(beyond),
                   TimestampTzGetDatum(now)};
  int rc = ExecuteWithLatestSnapshot(SC_FOLD_SQL_STAMPED("$4"), 4, types, args);
  if (rc != SPI_OK_INSERT) elog(ERROR, "folding slotted_counter.deltas failed: %d", rc);
}

// Rows of one counter that the commit writes itself, sorted by key and bucket.
struct OwnRows {
  int n = 0;
  int64* keys;
  int64* buckets;
  int64* deltas;
  Bounds* bounds;
  uint64* found;  // where the transaction's reads found the row, or 0

  explicit OwnRows(int room)
      : keys(static_cast<int64*>(palloc(sizeof(int64) * (room + 1)))),
        buckets(static_cast<int64*>(palloc(sizeof(int64) * (room + 1)))),
        deltas(static_cast<int64*>(palloc(sizeof(int64) * (room + 1)))),
        bounds(static_cast<Bounds*>(palloc(sizeof(Bounds) * (room + 1)))),
        found(static_cast<uint64*>(palloc(sizeof(uint64) * (room + 1)))) {}

  void Add(int64 key, int64 bucket, int64 delta, const Bounds& bound, uint64 row) {
    keys[n] = key, buckets[n] = bucket, deltas[n] = delta, bounds[n] = bound, found[n++] = row;
  }
};

// The error of a bounded row whose value the commit would leave outside its bounds.
void ReportOutOfBounds(const CounterDef& def, int64 key, int64 value) {
  ereport(ERROR,
          (errcode(ERRCODE_CHECK_VIOLATION),
           errmsg("bounded increment of counter \"%s\" would leave its bounds", def.name),
           errdetail("Key %lld would be %lld after this transaction, outside the bounds its "
                     "bounded increments allow. Nothing of this transaction is committed.",
                     (long long)key, (long long)value)));
}

// The error of a row whose value plus the commit's change leaves bigint.
void ReportRowOutOfRange(const CounterDef& def) {
  ReportValueOutOfRange(def.name, "A key's value plus this transaction's change leaves the "
                                  "bigint range. Nothing of this transaction is committed.");
}

// Step 5's statements over a counter's rows: $1 the counter, $2, $3 and $4 the keys, buckets and
// deltas, $5 the commit's time (both stamps of a row), $6 the expiry cutoff (the upsert's).
#define SC_OWN_ROWS_INSERT                                                                        \
  "INSERT INTO slotted_counter.key_values AS t "                                                  \
  "(counter, key, bucket, value, written_at, updated_at) "                                        \
  "SELECT $1, u.k, u.b, u.d, $5, $5 FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.int8[]), "   \
  "pg_catalog.unnest($3::pg_catalog.timestamptz[]), pg_catalog.unnest($4::pg_catalog.int8[])) "   \
  "AS u(k, b, d)"

// Appends c to changes[0 .. *n), merged into the last one if that is of the same bucket and the
// sum fits: an unbucketed counter's million rows are one change, not a million to sort.
void AddChange(SumChange* changes, int* n, SumChange c) {
  int64 sum;
  SumChange* last = *n > 0 ? &changes[*n - 1] : nullptr;
  if (last != nullptr && last->counter == c.counter && last->bucket == c.bucket &&
      CheckedAdd(last->change, c.change, &sum))
    last->change = sum;
  else
    changes[(*n)++] = c;
}

// What the triggers of key_values would have done for rows inserted with their deltas (the row
// triggers skipped, definitions/sums.hpp): the deltas to the sums, the keys to the filter.
void KeepInsertedSums(const CounterDef& def, const OwnRows& rows) {
  auto* changes = static_cast<SumChange*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(SumChange) * (rows.n + 1)));
  int nchanges = 0;
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  for (int i = 0; i < rows.n; i++) {
    AddChange(changes, &nchanges, SumChange{def.id, rows.buckets[i], rows.deltas[i]});
    AddStoredKey(slot, def.id, rows.keys[i], rows.buckets[i]);
  }
  AddToSums(changes, nchanges);
  pfree(changes);
}

// Runs one of them in a subtransaction: nullptr, or the error it raised; *rc is SPI's code. With
// `inserted`, sql inserts each row with its delta (or fails): the sums and the filter are kept
// here, from the rows, and the row triggers are not fired.
ErrorData* ExecuteOwnRows(const char* sql, const CounterDef& def, const OwnRows& rows,
                          TimestampTz now, int64 cutoff, int* rc, bool inserted = false) {
  Oid types[6] = {INT4OID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID,
                  TIMESTAMPTZOID};
  Datum args[6] = {Int32GetDatum(def.id),          Int8Array(rows.keys, rows.n),
                   TimestampArray(rows.buckets, rows.n), Int8Array(rows.deltas, rows.n),
                   TimestampTzGetDatum(now),       TimestampTzGetDatum(cutoff)};
  return InSubtransaction([&] {
    if (!inserted) {
      *rc = ExecuteWithLatestSnapshot(sql, 6, types, args);
      return;
    }
    {
      KeepingSums keeping;
      *rc = ExecuteWithLatestSnapshot(sql, 6, types, args);
    }
    KeepInsertedSums(def, rows);
  });
}

// The rows of keys that never had a row, inserted below the executor
// (definitions/key_values_rows.hpp) in a subtransaction, with their sums and filter: nullptr, or
// the error it raised. False in *as_made (and nothing done) if key_values is not as made.
ErrorData* InsertOwnRowsBelow(const CounterDef& def, const OwnRows& rows, TimestampTz now,
                              bool* as_made) {
  Relation rel = OpenKeyValues(as_made);
  ErrorData* error = nullptr;
  if (*as_made)
    error = InSubtransaction([&] {
      auto* made = static_cast<NewKeyValue*>(
          MemoryContextAllocHuge(CurrentMemoryContext, sizeof(NewKeyValue) * (rows.n + 1)));
      for (int i = 0; i < rows.n; i++)
        made[i] = NewKeyValue{def.id, rows.keys[i], rows.buckets[i], rows.deltas[i], now, 0};
      InsertKeyValues(rel, made, rows.n, now);
      pfree(made);
      CommandCounterIncrement();
      KeepInsertedSums(def, rows);
    });
  table_close(rel, NoLock);
  return error;
}

// Step 5 for rows that are the commit's to write: adds each delta to its key's row (an expired
// key, last written at or before cutoff, counts from 0), stamped `now`; checks the bounds of
// bounded rows against the values written.
void UpsertOwnRows(const CounterDef& def, const OwnRows& rows, TimestampTz now, int64 cutoff) {
  int n = rows.n;
  const int64* keys = rows.keys;
  const int64* buckets = rows.buckets;
  const Bounds* bounds = rows.bounds;
  bool bounded = false;
  for (int i = 0; i < n && !bounded; i++)
    bounded = bounds[i].lower != INT64_MIN || bounds[i].upper != INT64_MAX;
  const char* sql =
      SC_OWN_ROWS_INSERT " ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "
      "SET value = CASE WHEN t.written_at OPERATOR(pg_catalog.<=) $6 THEN excluded.value "
      "ELSE t.value OPERATOR(pg_catalog.+) excluded.value END, "
      "written_at = GREATEST(t.written_at, excluded.written_at), updated_at = excluded.updated_at";
  if (bounded) sql = psprintf("%s RETURNING t.key, t.bucket, t.value", sql);
  int rc = 0;
  ErrorData* error = ExecuteOwnRows(sql, def, rows, now, cutoff, &rc);
  if (error != nullptr && error->sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)
    ReportRowOutOfRange(def);
  if (error != nullptr) ReThrowError(error);
  if (rc != (bounded ? SPI_OK_INSERT_RETURNING : SPI_OK_INSERT))
    elog(ERROR, "writing slotted_counter.key_values failed: %d", rc);
  for (uint64 r = 0; bounded && r < SPI_processed; r++) {
    HeapTuple tuple = SPI_tuptable->vals[r];
    bool isnull;
    int64 key = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull));
    int64 bucket = DatumGetTimestampTz(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull));
    int64 value = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 3, &isnull));
    // The rows are sorted by key, then bucket.
    int lo = 0, hi = n;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (keys[mid] < key || (keys[mid] == key && buckets[mid] < bucket))
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < n && keys[lo] == key && buckets[lo] == bucket && !bounds[lo].Admit(value))
      ReportOutOfBounds(def, key, value);
  }
}

// Step 5 for rows of keys that never had a row (the filter of stored keys says so: a migration's,
// a backfill's keys): inserted below the executor as COPY inserts them (a plain INSERT if the
// table is not as made), without the upsert's probe of the unique index and its speculative
// insertion and confirmation of each row. Should a row have appeared all the same
// (written where the filter's triggers did not run), the upsert writes them instead.
void InsertNewRows(const CounterDef& def, const OwnRows& rows, TimestampTz now, int64 cutoff) {
  // Its bounded increments admitted the delta from 0 (the statement read no row).
  for (int i = 0; i < rows.n; i++) Assert(rows.bounds[i].Admit(rows.deltas[i]));
  int rc = SPI_OK_INSERT;
  bool as_made;
  ErrorData* error = InsertOwnRowsBelow(def, rows, now, &as_made);
  if (!as_made) error = ExecuteOwnRows(SC_OWN_ROWS_INSERT, def, rows, now, cutoff, &rc, true);
  if (error != nullptr && error->sqlerrcode == ERRCODE_UNIQUE_VIOLATION) {
    FreeErrorData(error);
    UpsertOwnRows(def, rows, now, cutoff);
    return;
  }
  if (error != nullptr) ReThrowError(error);
  if (rc != SPI_OK_INSERT) elog(ERROR, "writing slotted_counter.key_values failed: %d", rc);
}

// Step 5 for the rows the transaction's reads found: each updated where it was found, below the
// executor, with the upsert's value and stamps, its sum kept and its bounds checked. `rows` keeps
// the others, in order.
void UpdateFoundRows(const CounterDef& def, OwnRows* rows, TimestampTz now, int64 cutoff) {
  auto* updates = static_cast<KeyValueUpdate*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(KeyValueUpdate) * (rows->n + 1)));
  auto* from = static_cast<int*>(palloc(sizeof(int) * (rows->n + 1)));
  int n = 0;
  for (int i = 0; i < rows->n; i++)
    if (rows->found[i] != 0) {
      from[n] = i;
      updates[n++] = KeyValueUpdate{def.id, rows->keys[i], rows->buckets[i], rows->deltas[i], now,
                                    cutoff, rows->found[i], 0, 0};
    }
  if (n == 0) {
    pfree(from);
    pfree(updates);
    return;
  }
  bool as_made;
  Relation rel = OpenKeyValues(&as_made);
  ErrorData* error = nullptr;
  if (as_made)
    error = InSubtransaction([&] {
      (void)UpdateKeyValuesAt(rel, updates, n, now);
      CommandCounterIncrement();
      auto* changes = static_cast<SumChange*>(
          MemoryContextAllocHuge(CurrentMemoryContext, sizeof(SumChange) * (n + 1)));
      int nchanges = 0;
      for (int j = 0; j < n; j++)
        if (updates[j].row != 0)
          AddChange(changes, &nchanges, SumChange{def.id, updates[j].bucket, updates[j].change});
      AddToSums(changes, nchanges);
      pfree(changes);
    });
  table_close(rel, NoLock);
  if (error != nullptr && error->sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)
    ReportRowOutOfRange(def);
  if (error != nullptr) ReThrowError(error);
  auto* written = static_cast<bool*>(palloc0(sizeof(bool) * (rows->n + 1)));
  for (int j = 0; j < n; j++) {
    if (updates[j].row == 0) continue;
    if (!rows->bounds[from[j]].Admit(updates[j].value))
      ReportOutOfBounds(def, updates[j].key, updates[j].value);
    written[from[j]] = true;
  }
  int all = rows->n;
  rows->n = 0;  // refilled in place, in order: its row i goes to n <= i
  for (int i = 0; i < all; i++)
    if (!written[i])
      rows->Add(rows->keys[i], rows->buckets[i], rows->deltas[i], rows->bounds[i], 0);
  pfree(written);
  pfree(from);
  pfree(updates);
}

// Step 5 for one counter's rows: those its reads found by UpdateFoundRows, then those of keys the
// filter of stored keys knows never had a row by InsertNewRows, the others by UpsertOwnRows.
// `rows` keeps the others; `fresh` has its room.
void WriteOwnRows(const CounterDef& def, OwnRows* rows, OwnRows* fresh, TimestampTz now,
                  int64 cutoff) {
  fresh->n = 0;
  UpdateFoundRows(def, rows, now, cutoff);
  if (StoredKeysInUse(MyDatabaseId)) {
    Oid relation = ExtensionRelation("key_values");
    int n = rows->n;
    rows->n = 0;  // refilled in place, in order: its row i goes to n <= i
    for (int i = 0; i < n; i++) {
      CounterKey k{MyDatabaseId, def.id, rows->keys[i], rows->buckets[i]};
      OwnRows* to = StoredKeyMayExist(k, relation) ? rows : fresh;
      to->Add(rows->keys[i], rows->buckets[i], rows->deltas[i], rows->bounds[i], 0);
    }
  }
  if (fresh->n > 0) InsertNewRows(def, *fresh, now, cutoff);
  if (rows->n > 0) UpsertOwnRows(def, *rows, now, cutoff);
}

}  // namespace

bool IsLargeCommit(int rows) { return rows > settings.max_entries / 4; }

TimestampTz LargeCommitPrepare(const CounterDef* defs, int ncounters, int rows, int32* counters,
                               int64* keys, int64* buckets, int64* deltas, Bounds* bounds,
                               uint64* found_rows, Reservation* reservations,
                               int* nreserved) {
  Assert(nheld == 0 && writing_slot == nullptr && ncounters > 0);
  SpiSession spi = ConnectSpi();
  LockCounters(defs, ncounters);
  LockTables();
  // Unconditionally: an index whose change is under way reads as not ready meanwhile.
  for (int c = 0; c < ncounters; c++) ForgetRankIndex(MyDatabaseId, defs[c].id);
  // A writer of key_values from before its clock is read: the rows' stamp (its own and those of
  // its fold) is not before the watermark of an attachment run that cannot see them (shmem.hpp).
  if (DatabaseSlot* slot = FindSlot(MyDatabaseId)) {
    OpenTotalsWrite(slot);
    writing_slot = slot;
  }
  TimestampTz now = GetCurrentTimestamp();
  if (StoredReadsNeedDeltas()) FoldDeltas(defs, ncounters, now);

  MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
  held = static_cast<int32*>(palloc(sizeof(int32) * ncounters));
  auto* own = static_cast<bool*>(palloc(sizeof(bool) * (rows + 1)));
  auto* writes = static_cast<Write*>(palloc(sizeof(Write) * ncounters));
  MemoryContextSwitchTo(old);
  for (int c = 0; c < ncounters; c++) writes[c] = CommitWrite(defs[c], now);
  for (;;) {
    for (int c = 0; c < ncounters; c++) {
      held[nheld] = defs[c].id;  // noted before it is raised: an error releases what was
      HoldCounterLoads(held[nheld++]);
    }
    int busy = -1, busy_counter = 0;
    for (int i = 0, c = 0; i < rows && busy < 0; i++) {
      while (defs[c].id != counters[i]) c++;
      Reservation* r = &reservations[*nreserved];
      uint64 hint = 0;
      Reserve result = BufferReserveOrWriteOwn(defs[c], keys[i], buckets[i], deltas[i],
                                               bounds[i], writes[c], r, &hint);
      own[i] = result == Reserve::kMissing;
      if (own[i] && found_rows[i] == 0) found_rows[i] = hint;  // a loaded entry's row
      if (result == Reserve::kBusy) busy = i, busy_counter = c;
      if (result == Reserve::kReserved) (*nreserved)++;
    }
    if (busy < 0) break;
    // Expired, and held by a commit that may wait for a load this commit holds: give everything
    // back and wait for that commit's settle as a small commit would (reserving the key, then
    // giving it back), holding nothing else, before starting again.
    for (int j = 0; j < *nreserved; j++) BufferSettle(reservations[j], false);
    *nreserved = 0;
    ReleaseHolds();
    Reservation settled;
    BufferReserve(defs[busy_counter], keys[busy], buckets[busy], deltas[busy], Bounds{},
                  writes[busy_counter], &settled);
    BufferSettle(settled, false);
  }

  // The rows of the keys kept, counter by counter; then the reserved ones to the front.
  int nown = 0;
  for (int i = 0; i < rows; i++) nown += own[i];
  if (nown > 0) {
    OwnRows own_rows(nown), fresh(nown);
    for (int c = 0, i = 0; c < ncounters; c++) {
      own_rows.n = 0;
      for (; i < rows && counters[i] == defs[c].id; i++)
        if (own[i]) own_rows.Add(keys[i], buckets[i], deltas[i], bounds[i], found_rows[i]);
      if (own_rows.n > 0) WriteOwnRows(defs[c], &own_rows, &fresh, now, writes[c].cutoff);
    }
  }
  FinishSpi(spi);
  int kept = 0;
  for (int i = 0, j = 0; i < rows; i++) {
    if (own[i]) continue;
    counters[kept] = counters[i];
    keys[kept] = keys[i];
    buckets[kept] = buckets[i];
    deltas[kept] = deltas[i] - reservations[j++].expired;
    bounds[kept++] = bounds[i];
  }
  Assert(kept == *nreserved);
  return now;
}

void LargeCommitEnd() {
  ReleaseHolds();
  held = nullptr;  // in TopTransactionContext
  if (writing_slot != nullptr) CloseTotalsWrite(writing_slot);
  writing_slot = nullptr;
}

}  // namespace sc
