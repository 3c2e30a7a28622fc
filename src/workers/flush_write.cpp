// flush_write.cpp: the statements that write a flush step's claimed entries to
// slotted_counter.key_values (flush_internal.hpp: WriteItems), and the request ids taken with them.
//
// Keys flushed before, which mostly have their row, are updated where the flush last wrote them
// (flush_update.cpp), and the others of them with UPDATEs in statements of at most kBatch keys;
// keys never flushed, which mostly have none, inserted below the executor (flush_insert.cpp); the
// statements and the insertions each in one subtransaction, redone as upserts if a key's row was
// not as expected after all.
#include <algorithm>
#include <cstring>

#include "definitions/sums.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

constexpr int kBatch = 10000;

// [stamped]: the statements for batches where some key carries the time of its last write (a
// counter whose keys expire: definitions/expiry.hpp), and where none does (the others: their
// rows' written_at is this flush's time, and the statements take four arrays, not five).
SPIPlanPtr plan_flush[2] = {nullptr, nullptr};
SPIPlanPtr plan_update[2] = {nullptr, nullptr};

// The rows of the arrays, unnested in the select list, in step (ProjectSet): in FROM, each
// unnest would first copy its array into a tuplestore of its own, a tuple per array and row. The
// fifth, when stamped, is each key's stamp (Entry::last_write): written_at never goes back.
#define SC_FLUSH_ROWS4                                                                           \
  "SELECT pg_catalog.unnest($1::pg_catalog.int4[]), pg_catalog.unnest($2::pg_catalog.int8[]), " \
  "pg_catalog.unnest($3::pg_catalog.timestamptz[]), pg_catalog.unnest($4::pg_catalog.int8[])"
#define SC_FLUSH_ROWS5 SC_FLUSH_ROWS4 ", pg_catalog.unnest($5::pg_catalog.timestamptz[])"
#define SC_UPSERT                                                                                 \
  " ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "                           \
  "SET value = t.value OPERATOR(pg_catalog.+) excluded.value, updated_at = pg_catalog.now(), "   \
  "written_at = GREATEST(t.written_at, excluded.written_at)"

const char* const kFlushSql[2] = {
    "INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value) " SC_FLUSH_ROWS4
        SC_UPSERT,
    "INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value, written_at) "
    SC_FLUSH_ROWS5 SC_UPSERT};

// Rows of keys flushed before, which mostly have their row, but not where the flush last wrote
// them (flush_update.cpp): an UPDATE joined on the primary key (a nested loop of index scans)
// skips the upsert's arbiter probe, a new index scan per row, and its tuple lock, a second WAL
// record per row. It returns where each row went, for the next flush of the key.
#define SC_FLUSH_UPDATE(written, stamp_rows)                                                    \
  "UPDATE slotted_counter.key_values t SET value = t.value OPERATOR(pg_catalog.+) u.delta, "       \
  "updated_at = pg_catalog.now(), written_at = GREATEST(t.written_at, " written ") "           \
  "FROM (SELECT pg_catalog.unnest($1::pg_catalog.int4[]) AS c, "                                 \
  "pg_catalog.unnest($2::pg_catalog.int8[]) AS k, "                                              \
  "pg_catalog.unnest($3::pg_catalog.timestamptz[]) AS b, " stamp_rows                            \
  "pg_catalog.unnest($4::pg_catalog.int8[]) AS delta) u "                                        \
  "WHERE t.counter OPERATOR(pg_catalog.=) u.c AND t.key OPERATOR(pg_catalog.=) u.k "            \
  "AND t.bucket OPERATOR(pg_catalog.=) u.b RETURNING t.key, t.ctid"
#define SC_STAMP_ROWS "pg_catalog.unnest($5::pg_catalog.timestamptz[]) AS w, "

const char* const kUpdateSql[2] = {SC_FLUSH_UPDATE("pg_catalog.now()", ""),
                                   SC_FLUSH_UPDATE("u.w", SC_STAMP_ROWS)};

// How items are written: upserts, which cannot fail on a key's row being there or not; plain
// insertions (fresh keys, by COPY), which fail with 23505 on a key that has a row; UPDATEs (keys
// with rows), which fail with 02000 on a key that has none.
enum class Statement { kUpsert, kInsert, kUpdate };

bool AnyStamped(const FlushItem* items, int64 n) {
  return std::any_of(items, items + n, [](const FlushItem& item) { return item.claim.stamped; });
}

// A statement's batch: upserts or UPDATEs.
void WriteBatch(FlushItem* items, int64 n, Statement write) {
  Assert(write != Statement::kInsert);
  bool stamped = AnyStamped(items, n);
  SPIPlanPtr plan;
  int expected_rc;
  if (write == Statement::kUpsert) {
    plan = KeyArrayPlan(&plan_flush[stamped], kFlushSql[stamped]);
    expected_rc = SPI_OK_INSERT;
  } else {
    plan = KeyArrayPlan(&plan_update[stamped], kUpdateSql[stamped]);
    expected_rc = SPI_OK_UPDATE_RETURNING;
  }
  auto* counters = static_cast<int32*>(palloc(sizeof(int32) * n));
  auto* keys = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* buckets = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* deltas = static_cast<int64*>(palloc(sizeof(int64) * n));
  auto* stamps = stamped ? static_cast<int64*>(palloc(sizeof(int64) * n)) : nullptr;
  for (int64 i = 0; i < n; i++) {
    counters[i] = items[i].counter;
    keys[i] = items[i].key;
    buckets[i] = items[i].bucket;
    deltas[i] = items[i].claim.delta;
    if (stamped)
      stamps[i] = StampToStore(items[i].claim.stamped ? items[i].claim.stamp : kNoWrite);
  }
  ExecuteKeyArrays(plan, expected_rc, int(n), counters, keys, buckets, deltas, stamps);
  if (write != Statement::kUpdate) return;
  // The items are distinct keys, so each row the UPDATE found is one item's.
  if (int64(SPI_processed) != n)
    ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
                    errmsg("a key flushed before has no row in slotted_counter.key_values")));
  // In the items' order (the nested loop's outer side); a row whose key is not its item's tells
  // nothing.
  for (int64 i = 0; i < n; i++) {
    HeapTuple row = SPI_tuptable->vals[i];
    bool null_key, null_tid;
    Datum key = SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &null_key);
    Datum tid = SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &null_tid);
    if (!null_key && !null_tid && DatumGetInt64(key) == items[i].key)
      items[i].claim.row = PackRow(reinterpret_cast<ItemPointer>(DatumGetPointer(tid)));
  }
  // In SPI's context until the step's SPI_finish otherwise.
  SPI_freetuptable(SPI_tuptable);
}

// Writes the deltas of items (n of them): insertions in one COPY, statements in batches of at
// most kBatch.
// Each batch's arrays are freed before the next: memory the process already has, not a million
// keys' worth touched anew.
void WriteBatches(FlushItem* items, int64 n, Statement write) {
  if (write == Statement::kInsert) {
    InsertFreshRows(items, n, AnyStamped(items, n));
    return;
  }
  // Where the rows went: told by the UPDATEs (WriteBatch), not by the upserts.
  for (int64 i = 0; i < n; i++) items[i].claim.row = 0;
  // UPDATEs are planned as index lookups in a nested loop, whatever the statistics of key_values
  // say: with none yet (a table a flush just grew), a merge join over a sort of the whole table
  // can look cheaper, once per batch; a plan cached while the table was
  // tiny would scan it whole. Set as a function's SET clause sets them, for these statements
  // (planned when executed); an error restores them with the (sub)transaction's abort.
  int nest_level = 0;
  if (write == Statement::kUpdate)
    nest_level = PlannerSettingsOff({"enable_hashjoin", "enable_mergejoin", "enable_seqscan"});
  MemoryContext batch_context =
      AllocSetContextCreate(CurrentMemoryContext, "slotted_counter flush batch",
                            ALLOCSET_DEFAULT_SIZES);
  MemoryContext outer = MemoryContextSwitchTo(batch_context);
  {
    // Each row's value moves by its item's delta, whether the upsert inserts it or adds to it:
    // the flush keeps the sums itself, its rows fire no row trigger.
    KeepingSums keeping;
    for (int64 i = 0; i < n;) {
      int64 size = std::min<int64>(kBatch, n - i);
      WriteBatch(items + i, size, write);
      MemoryContextReset(batch_context);
      i += size;
    }
  }
  MemoryContextSwitchTo(outer);
  MemoryContextDelete(batch_context);
  if (write == Statement::kUpdate) PlannerSettingsBack(nest_level);
  KeepItemSums(items, n, write == Statement::kUpsert);
}

// Writes items (n of them) with the cheaper statement that fails if a key's row is not as
// expected, in one subtransaction (one, not one per batch: more than 64 subtransactions would
// overflow this backend's cache of them, which slows every other backend's snapshots). If it
// failed that way (the code expected of it), the subtransaction is rolled back and every item is
// written again as an upsert. Any other error goes to the caller.
void WriteExpecting(FlushItem* items, int64 n, Statement write, int expected_error) {
  if (n == 0) return;
  ErrorData* error = InSubtransaction([&] { WriteBatches(items, n, write); });
  if (error == nullptr) return;
  if (error->sqlerrcode != expected_error) ReThrowError(error);
  FreeErrorData(error);
  WriteBatches(items, n, Statement::kUpsert);
}

// The items with rows first, then the fresh ones; each in the primary key's order.
bool ItemOrder(const FlushItem& a, const FlushItem& b) {
  if (a.fresh != b.fresh) return b.fresh;
  if (a.counter != b.counter) return a.counter < b.counter;
  if (a.key != b.key) return a.key < b.key;
  return a.bucket < b.bucket;
}

}  // namespace

int64 WriteItems(FlushItem* items, int64 n) {
  std::sort(items, items + n, ItemOrder);
  int64 with_rows =
      std::partition_point(items, items + n, [](const FlushItem& item) { return !item.fresh; }) -
      items;
  int64 in_place = UpdateRowsInPlace(items, with_rows);
  WriteExpecting(items + in_place, with_rows - in_place, Statement::kUpdate,
                 ERRCODE_NO_DATA_FOUND);
  WriteExpecting(items + with_rows, n - with_rows, Statement::kInsert, ERRCODE_UNIQUE_VIOLATION);
  return n - with_rows;
}

namespace {

// The request ids a flush took, written with the increments it writes by an upsert (an id known
// before, whose row's time was past the window then, takes the row over).
SPIPlanPtr plan_request_ids = nullptr;

void UpsertRequestIds(const TakenRequestId* taken, int n) {
  Datum *counters = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *ids = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *keys = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *buckets = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *results = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *times = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; i++) {
    counters[i] = Int32GetDatum(taken[i].counter);
    ids[i] = CStringGetTextDatum(taken[i].id);
    keys[i] = Int64GetDatum(taken[i].key);
    buckets[i] = TimestampTzGetDatum(taken[i].bucket);
    results[i] = Int64GetDatum(taken[i].result);
    times[i] = TimestampTzGetDatum(taken[i].applied_at);
  }
  Datum args[6] = {
      PointerGetDatum(construct_array(counters, n, INT4OID, 4, true, TYPALIGN_INT)),
      PointerGetDatum(construct_array(ids, n, TEXTOID, -1, false, TYPALIGN_INT)),
      PointerGetDatum(construct_array(keys, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(buckets, n, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(results, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(times, n, TIMESTAMPTZOID, 8, true, TYPALIGN_DOUBLE))};
  static const Oid types[6] = {INT4ARRAYOID, TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID,
                               INT8ARRAYOID, TIMESTAMPTZARRAYOID};
  SPIPlanPtr plan = KeptPlan(
      &plan_request_ids,
      "INSERT INTO slotted_counter.requests AS r (counter, request_id, key, bucket, result, "
      "applied_at) SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
      "pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), "
      "pg_catalog.unnest($6)) ON CONFLICT (counter, request_id) DO UPDATE SET key = excluded.key, "
      "bucket = excluded.bucket, result = excluded.result, applied_at = excluded.applied_at",
      6, types);
  if (SPI_execute_plan(plan, args, nullptr, false, 0) != SPI_OK_INSERT)
    elog(ERROR, "writing slotted_counter.requests failed");
}

}  // namespace

// Mostly new ids: inserted by COPY in a subtransaction, all of them upserted instead if one had a
// row after all (23505). COPY receives each id as text's binary form, which it converts from the
// client encoding and checks: a flusher whose client_encoding (the server's, a database's or a
// role's setting) is not the database's upserts them, and so does one whose ids did not pass
// the check (22021), as the upsert took them before.
void WriteRequestIds(const TakenRequestId* taken, int n) {
  if (n == 0) return;
  if (pg_get_client_encoding() == GetDatabaseEncoding()) {
    // In the primary key's order (the ids are COLLATE "C": bytes), so that the insertions of
    // consecutive ids descend to the same or the next leaf, whose pages are still in the CPU's
    // caches, rather than one random leaf after another in the order of the table's parts.
    auto* sorted = static_cast<TakenRequestId*>(palloc(sizeof(TakenRequestId) * size_t(n)));
    std::copy(taken, taken + n, sorted);
    std::sort(sorted, sorted + n, [](const TakenRequestId& a, const TakenRequestId& b) {
      if (a.counter != b.counter) return a.counter < b.counter;
      return std::strcmp(a.id, b.id) < 0;
    });
    ErrorData* error = InSubtransaction([&] { CopyRequestIds(sorted, n); });
    pfree(sorted);
    if (error == nullptr) return;
    if (error->sqlerrcode != ERRCODE_UNIQUE_VIOLATION &&
        error->sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE)
      ReThrowError(error);
    FreeErrorData(error);
  }
  UpsertRequestIds(taken, n);
}

}  // namespace sc
