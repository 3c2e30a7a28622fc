// flush.cpp: what the flusher writes to slotted_counter.totals, in its own transactions.
//
// A flush reads the dirty entries of one database (partition locks SHARED): those its slot's
// ring names as having turned dirty since the last flush, or, when the ring overflowed, every
// entry of the buffer (shmem.hpp: DatabaseSlot::dirty). It marks them in_flush
// so that no eviction takes them, writes each entry's delta (value - flushed) with one batched
// statement per 10,000 keys: keys flushed before, which mostly have their row, with UPDATEs, and
// keys never flushed, which mostly have none, with plain INSERTs, each kind in one subtransaction
// that is redone as upserts if a key's row was not as expected after all), commits, and only
// then advances each entry's flushed by the delta it wrote (checking the entry's generation: a
// drop may have freed it meanwhile). A failed flush
// advances nothing, so it loses nothing and counts nothing twice; a crash before the advance
// resets the buffer with everything else in shared memory.
//
// In the same transaction it folds the committed deltas of transactional counters
// (slotted_counter.deltas) into totals, which bounds their storage; a value read from the tables
// is totals plus deltas in one snapshot, so the fold changes no value.
//
// The counters being flushed are locked FOR KEY SHARE (skipping those a transaction is dropping),
// so a drop waits for the flush that writes its keys, and its DELETE of their rows sees them.
#include <algorithm>

#include "workers/flush.hpp"

#include "definitions/catalog.hpp"
#include "functions/attach.hpp"
#include "functions/key_arrays.hpp"
#include "shared/rank_indexes.hpp"
#include "shared/request_ids.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"

namespace sc {

bool full_scan_next = false;

namespace {

constexpr int kBatch = 10000;
constexpr int kFullScanMs = 10000;

TimestampTz last_full_scan = 0;

// One claimed entry (protocol.hpp: Claim) and the row its delta goes to. fresh: the entry holds
// nothing flushed (flushed = 0: a key new to the buffer and the table, or one whose row holds 0),
// so its row most likely does not exist.
struct FlushItem {
  Claim claim;
  int32 counter;
  int64 key;
  int64 bucket;
  bool fresh;
};

// Outlives each flush's transaction (SPI_finish frees what was allocated inside it); reset at
// the start of every round.
MemoryContext work_context = nullptr;

// [stamped]: the statements for batches where some key carries the time of its last write (a
// counter whose keys expire: definitions/expiry.hpp), and where none does (the others: their
// rows' written_at is this flush's time, and the statements take four arrays, not five).
SPIPlanPtr plan_flush[2] = {nullptr, nullptr};
SPIPlanPtr plan_insert[2] = {nullptr, nullptr};
SPIPlanPtr plan_update[2] = {nullptr, nullptr};
SPIPlanPtr plan_update_bucketed[2] = {nullptr, nullptr};
SPIPlanPtr plan_fold = nullptr;

// The rows of the arrays, unnested in the select list, in step (ProjectSet): in FROM, each
// unnest would first copy its array into a tuplestore of its own, a tuple per array and row. The
// fifth, when stamped, is each key's stamp (Entry::last_write): written_at never goes back.
#define SC_FLUSH_ROWS4                                                                           \
  "SELECT pg_catalog.unnest($1::pg_catalog.int4[]), pg_catalog.unnest($2::pg_catalog.int8[]), " \
  "pg_catalog.unnest($3::pg_catalog.timestamptz[]), pg_catalog.unnest($4::pg_catalog.int8[])"
#define SC_FLUSH_ROWS5 SC_FLUSH_ROWS4 ", pg_catalog.unnest($5::pg_catalog.timestamptz[])"
#define SC_UPSERT                                                                                 \
  " ON CONFLICT ON CONSTRAINT totals_counter_key_bucket DO UPDATE "                              \
  "SET value = t.value OPERATOR(pg_catalog.+) excluded.value, updated_at = pg_catalog.now(), "   \
  "written_at = GREATEST(t.written_at, excluded.written_at)"

const char* const kFlushSql[2] = {
    "INSERT INTO slotted_counter.totals AS t (counter, key, bucket, value) " SC_FLUSH_ROWS4
        SC_UPSERT,
    "INSERT INTO slotted_counter.totals AS t (counter, key, bucket, value, written_at) "
    SC_FLUSH_ROWS5 SC_UPSERT};

// Rows of fresh keys: a plain INSERT skips the upsert's speculative insertion (an index probe
// before the insert, a confirmation after it), about 40% of a new row's cost.
const char* const kInsertSql[2] = {
    "INSERT INTO slotted_counter.totals (counter, key, bucket, value) " SC_FLUSH_ROWS4,
    "INSERT INTO slotted_counter.totals (counter, key, bucket, value, written_at) "
    SC_FLUSH_ROWS5};

// Rows of keys flushed before, which mostly have their row: an UPDATE joined on the unique index
// (a nested loop of index scans) skips the upsert's arbiter probe, a new index scan per row, and
// its tuple lock, a second WAL record per row. An unbucketed key's bucket is NULL, which `=`
// never matches and `IS NOT DISTINCT FROM` cannot find through the index: two statements.
#define SC_FLUSH_UPDATE(bucket_rows, bucket_match, written, stamp_rows)                          \
  "UPDATE slotted_counter.totals t SET value = t.value OPERATOR(pg_catalog.+) u.delta, "       \
  "updated_at = pg_catalog.now(), written_at = GREATEST(t.written_at, " written ") "           \
  "FROM (SELECT pg_catalog.unnest($1::pg_catalog.int4[]) AS c, "                                 \
  "pg_catalog.unnest($2::pg_catalog.int8[]) AS k, " bucket_rows stamp_rows                       \
  "pg_catalog.unnest($4::pg_catalog.int8[]) AS delta) u "                                        \
  "WHERE t.counter OPERATOR(pg_catalog.=) u.c AND t.key OPERATOR(pg_catalog.=) u.k "            \
  "AND " bucket_match
#define SC_BUCKET_ROWS "pg_catalog.unnest($3::pg_catalog.timestamptz[]) AS b, "
#define SC_BUCKET_MATCH "t.bucket OPERATOR(pg_catalog.=) u.b"
#define SC_STAMP_ROWS "pg_catalog.unnest($5::pg_catalog.timestamptz[]) AS w, "

const char* const kUpdateSql[2] = {
    SC_FLUSH_UPDATE("", "t.bucket IS NULL", "pg_catalog.now()", ""),
    SC_FLUSH_UPDATE("", "t.bucket IS NULL", "u.w", SC_STAMP_ROWS)};
const char* const kUpdateBucketedSql[2] = {
    SC_FLUSH_UPDATE(SC_BUCKET_ROWS, SC_BUCKET_MATCH, "pg_catalog.now()", ""),
    SC_FLUSH_UPDATE(SC_BUCKET_ROWS, SC_BUCKET_MATCH, "u.w", SC_STAMP_ROWS)};

// One transaction's deltas may touch a key that another's also touched: sum them per key.
const char* const kFoldSql =
    "WITH folded AS (DELETE FROM slotted_counter.deltas "
    "WHERE counter OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int4[]) "
    "RETURNING counter, key, bucket, delta, written_at) "
    "INSERT INTO slotted_counter.totals AS t (counter, key, bucket, value, written_at) "
    "SELECT counter, key, bucket, pg_catalog.sum(delta)::pg_catalog.int8, "
    "pg_catalog.max(written_at) FROM folded GROUP BY counter, key, bucket "
    "ON CONFLICT ON CONSTRAINT totals_counter_key_bucket DO UPDATE "
    "SET value = t.value OPERATOR(pg_catalog.+) excluded.value, updated_at = pg_catalog.now(), "
    "written_at = GREATEST(t.written_at, excluded.written_at)";
// The same, returning each row it wrote, when the database has rank indexes (FoldDeltas).
SPIPlanPtr plan_fold_returning = nullptr;

// Deltas of a counter whose drop committed. (A counter being dropped is still visible, and the
// deltas of a counter created by an uncommitted transaction are uncommitted too.)
const char* const kOrphanSql =
    "DELETE FROM slotted_counter.deltas d WHERE NOT EXISTS (SELECT FROM slotted_counter.counters c "
    "WHERE c.id OPERATOR(pg_catalog.=) d.counter)";

// The slot whose totals writers this process counts itself among (shmem.hpp), while it does.
DatabaseSlot* totals_write_slot = nullptr;

const char* const kAttachmentsDueSql =
    "SELECT pg_catalog.min(" SC_ATTACHMENT_DUE_AT ") FROM slotted_counter.attachments";

// When the first attachment of this database is due; DT_NOEND if there is none.
TimestampTz AttachmentsDue() {
  TimestampTz due = DT_NOEND;
  int rc = SPI_execute(kAttachmentsDueSql, true, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1)
    elog(ERROR, "reading slotted_counter.attachments failed: %d", rc);
  bool isnull;
  Datum value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  if (!isnull) due = DatumGetTimestampTz(value);
  return due;
}

// The ids of this database's counters that this flush locked FOR KEY SHARE, sorted, and in
// *skipped_ids (sorted) those it could not lock: a transaction is dropping them or their buckets,
// so this flush writes and folds nothing of theirs.
int32* LockLiveCounters(int* count, int32** skipped_ids, int* nskipped) {
  // One statement, so that the locked and the skipped come from one snapshot.
  int rc = SPI_execute(
      "WITH locked AS (SELECT id FROM slotted_counter.counters FOR KEY SHARE SKIP LOCKED) "
      "SELECT c.id, l.id IS NOT NULL FROM slotted_counter.counters c "
      "LEFT JOIN locked l ON l.id OPERATOR(pg_catalog.=) c.id ORDER BY 1",
      false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counters failed: %d", rc);
  int n = int(SPI_processed);
  // In the work context: the skipped ids are published after the transaction (and SPI's memory)
  // ended.
  auto* ids = static_cast<int32*>(MemoryContextAlloc(work_context, sizeof(int32) * (n + 1)));
  auto* skipped = static_cast<int32*>(MemoryContextAlloc(work_context, sizeof(int32) * (n + 1)));
  *count = *nskipped = 0;
  for (int i = 0; i < n; i++) {
    bool isnull;
    int32 id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)))
      ids[(*count)++] = id;
    else
      skipped[(*nskipped)++] = id;
  }
  *skipped_ids = skipped;
  return ids;
}

// The buckets of db that committing transactions dropped and have not yet purged from the
// buffer. Read after the counters are locked: a drop holds its counter FOR UPDATE until it
// commits, and registers before that.
int BucketsBeingDropped(Oid db, BucketDrop* out) {
  int n = 0;
  SpinLockAcquire(&shared->bucket_drops_mutex);
  for (const BucketDrop& drop : shared->bucket_drops)
    if (drop.db == db) out[n++] = drop;
  SpinLockRelease(&shared->bucket_drops_mutex);
  return n;
}

bool BeingDropped(const CounterKey& k, const BucketDrop* drops, int ndrops) {
  for (int i = 0; i < ndrops; i++)
    if (drops[i].counter == k.counter && k.bucket != kNoBucket && k.bucket < drops[i].before)
      return true;
  return false;
}

// What a flush may write: the entries of the counters it locked, but those whose buckets are
// being dropped.
struct FlushScope {
  const int32* ids;
  int nids;
  const BucketDrop* drops;
  int ndrops;

  bool operator()(const Entry& e) const {
    return std::binary_search(ids, ids + nids, e.id.counter) &&
           !(ndrops > 0 && BeingDropped(e.id, drops, ndrops));
  }
};

// Claims the dirty entries of db whose counter is in ids (protocol.hpp: claim): those its slot's
// ring names (linear in the entries that became dirty), or, after the ring overflowed, every
// entry of the buffer (linear in its size). Entries left for a later flush go back in the ring.
// Not inlined: the flush that calls it catches errors, and its locals must not live across that.
pg_noinline FlushItem* CollectDirty(Oid db, DatabaseSlot* slot, const int32* ids, int nids,
                                    int64* count) {
  BucketDrop drops[kMaxBucketDrops];
  FlushScope scope{ids, nids, drops, BucketsBeingDropped(db, drops)};
  auto table = Table();
  // A safety net under the ring: every kFullScanMs (and for the last flush before the flusher
  // exits) the flush scans the whole buffer anyway, so that a dirty entry the ring missed would
  // be written late, never lost. It costs one pass over the buffer per interval, not per flush.
  TimestampTz now = GetCurrentTimestamp();
  if (slot != nullptr && (full_scan_next || last_full_scan == 0 ||
                          TimestampDifferenceExceeds(last_full_scan, now, kFullScanMs)))
    MarkDirtyUntracked(slot);
  // Allocate first, then take the ring whole, so that no failure can drop a ref once taken.
  SpinMutex ring_mutex{slot != nullptr ? &slot->dirty_mutex : nullptr};
  bool overflowed = slot == nullptr || RingOverflowed(slot->dirty, ring_mutex);
  int64 ring = slot != nullptr ? slot->dirty.capacity : 0;
  int64 space = overflowed ? Max(int64(table.table().used()) + 1, ring) : ring;
  auto* refs =
      static_cast<DirtyRef*>(MemoryContextAlloc(work_context, sizeof(DirtyRef) * (ring + 1)));
  auto* items = static_cast<FlushItem*>(
      MemoryContextAllocHuge(work_context, sizeof(FlushItem) * (space + 1)));
  int nrefs = 0;
  bool scan_all = true;
  if (slot != nullptr) nrefs = RingTake(slot->dirty, ring_mutex, overflowed, refs, &scan_all);
  int64 n = 0;
  auto taken = [&](const Claim& claim, const Entry& e) {
    items[n++] = FlushItem{claim, e.id.counter, e.id.key, e.id.bucket,
                           e.flushed.load(std::memory_order_relaxed) == 0};
  };
  auto left = [&](uint32 index, uint32 generation) {
    if (slot != nullptr) NoteDirty(slot, index, generation);
  };
  if (scan_all) {
    last_full_scan = now;
    // Entries linked during the scan can fill the array: the next flush scans again.
    table.ClaimAll(db, scope, [&] { return n < space; }, taken, left, [&](const Entry& e) {
      if (slot != nullptr && !CounterTable::Clean(e)) MarkDirtyUntracked(slot);
    });
  } else {
    table.ClaimNoted(db, refs, nrefs, scope, taken, left);
  }
  *count = n;
  return items;
}

// After the flush's transaction ended (protocol.hpp: settle). An entry still dirty (the flush
// failed, or it was counted into meanwhile) goes back into the ring.
// stored_stamp: what the flush stored as written_at for the claims that took no stamp. After a
// committed flush, the rank indexes of its counters (shared/rank_indexes.hpp) learn the values
// the rows now hold (the items are in counter order).
void SettleFlushed(DatabaseSlot* slot, Oid db, const FlushItem* items, int64 n, bool committed,
                   TimestampTz stored_stamp) {
  auto table = Table();
  bool ranked = committed && AnyRankIndex(db);
  RankUpdate* updates = ranked ? static_cast<RankUpdate*>(
                                     MemoryContextAllocHuge(work_context, sizeof(RankUpdate) * (n + 1)))
                               : nullptr;
  int nupdates = 0;
  int32 last_counter = 0;
  bool last_indexed = false;
  for (int64 i = 0; i < n; i++) {
    const Claim& claim = items[i].claim;
    int64 stored = 0;
    bool indexed = false;
    if (ranked && items[i].bucket == kNoBucket) {
      if (items[i].counter != last_counter) {
        last_counter = items[i].counter;
        last_indexed = RankIndexed(db, last_counter);
      }
      indexed = last_indexed;
    }
    if (table.SettleClaim(claim, committed, stored_stamp, indexed ? &stored : nullptr) &&
        slot != nullptr)
      NoteDirty(slot, claim.index, claim.generation);
    if (indexed) updates[nupdates++] = RankUpdate{items[i].counter, items[i].key, stored};
  }
  if (nupdates > 0) ApplyRankUpdates(db, updates, nupdates);
}

// How a batch is written: upserts, which cannot fail on a key's row being there or not; plain
// INSERTs (fresh keys), which fail with 23505 on a key that has a row; UPDATEs (keys with rows),
// which fail with 02000 on a key that has none.
enum class Statement { kUpsert, kInsert, kUpdate };

bool Unbucketed(const FlushItem& item) { return item.bucket == kNoBucket; }

void WriteBatch(const FlushItem* items, int64 n, Statement write) {
  bool stamped = std::any_of(items, items + n,
                             [](const FlushItem& item) { return item.claim.stamped; });
  SPIPlanPtr plan = nullptr;
  int expected_rc = SPI_OK_INSERT;
  switch (write) {
    case Statement::kUpsert:
      plan = KeyArrayPlan(&plan_flush[stamped], kFlushSql[stamped]);
      break;
    case Statement::kInsert:
      plan = KeyArrayPlan(&plan_insert[stamped], kInsertSql[stamped]);
      break;
    case Statement::kUpdate:
      plan = Unbucketed(items[0])
                 ? KeyArrayPlan(&plan_update[stamped], kUpdateSql[stamped])
                 : KeyArrayPlan(&plan_update_bucketed[stamped], kUpdateBucketedSql[stamped]);
      expected_rc = SPI_OK_UPDATE;
      break;
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
  // The items are distinct keys, so each row the UPDATE found is one item's.
  if (write == Statement::kUpdate && int64(SPI_processed) != n)
    ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
                    errmsg("a key flushed before has no row in slotted_counter.totals")));
}

// Writes the deltas of items (n of them) in batches of at most kBatch. An UPDATE's batch holds
// either unbucketed or bucketed keys (its statement differs). Each batch's arrays are freed
// before the next: memory the process already has, not a million keys' worth touched anew.
void WriteBatches(const FlushItem* items, int64 n, Statement write) {
  // UPDATEs are planned as index lookups in a nested loop, whatever the statistics of totals
  // say: with none yet (a table a flush just grew), `bucket IS NULL` looks rare and a merge join
  // over a sort of the whole table cheaper, once per batch; a plan cached while the table was
  // tiny would scan it whole. Set as a function's SET clause sets them, for these statements
  // (planned when executed); an error restores them with the (sub)transaction's abort.
  int nest_level = 0;
  if (write == Statement::kUpdate)
    nest_level = PlannerSettingsOff({"enable_hashjoin", "enable_mergejoin", "enable_seqscan"});
  MemoryContext batch_context =
      AllocSetContextCreate(CurrentMemoryContext, "slotted_counter flush batch",
                            ALLOCSET_DEFAULT_SIZES);
  MemoryContext outer = MemoryContextSwitchTo(batch_context);
  for (int64 i = 0; i < n;) {
    int64 size = std::min<int64>(kBatch, n - i);
    if (write == Statement::kUpdate)
      size = std::find_if(items + i, items + i + size,
                          [&](const FlushItem& item) {
                            return Unbucketed(item) != Unbucketed(items[i]);
                          }) -
             (items + i);
    WriteBatch(items + i, size, write);
    MemoryContextReset(batch_context);
    i += size;
  }
  MemoryContextSwitchTo(outer);
  MemoryContextDelete(batch_context);
  if (write == Statement::kUpdate) PlannerSettingsBack(nest_level);
}

// Writes items (n of them) with the cheaper statement that fails if a key's row is not as
// expected, in one subtransaction (one, not one per batch: more than 64 subtransactions would
// overflow this backend's cache of them, which slows every other backend's snapshots). If it
// failed that way (the code expected of it), the subtransaction is rolled back and every item is
// written again as an upsert. Any other error goes to the caller.
void WriteExpecting(const FlushItem* items, int64 n, Statement write, int expected_error) {
  if (n == 0) return;
  ErrorData* error = InSubtransaction([&] { WriteBatches(items, n, write); });
  if (error == nullptr) return;
  if (error->sqlerrcode != expected_error) ReThrowError(error);
  FreeErrorData(error);
  WriteBatches(items, n, Statement::kUpsert);
}

// Moves the committed deltas of the locked live counters into totals, and deletes the deltas of
// counters that no longer exist; returns the number of totals rows written. With rank indexes in
// db, *updates (in the work context) receives the rows of their counters, to apply once the
// flush committed.
int64 FoldDeltas(Oid db, const int32* ids, int nids, RankUpdate** updates, int* nupdates) {
  static const Oid type = INT4ARRAYOID;
  bool ranked = AnyRankIndex(db);
  SPIPlanPtr plan =
      ranked ? KeptPlan(&plan_fold_returning,
                        psprintf("%s RETURNING t.counter, t.key, t.bucket IS NULL, t.value",
                                 kFoldSql),
                        1, &type)
             : KeptPlan(&plan_fold, kFoldSql, 1, &type);
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nids + 1)));
  for (int i = 0; i < nids; i++) datums[i] = Int32GetDatum(ids[i]);
  Datum arg = PointerGetDatum(construct_array(datums, nids, INT4OID, 4, true, TYPALIGN_INT));
  int rc = SPI_execute_plan(plan, &arg, nullptr, false, 0);
  if (rc != (ranked ? SPI_OK_INSERT_RETURNING : SPI_OK_INSERT))
    elog(ERROR, "folding slotted_counter.deltas failed: %d", rc);
  int64 rows = int64(SPI_processed);
  *nupdates = 0;
  if (ranked) {
    *updates = static_cast<RankUpdate*>(
        MemoryContextAllocHuge(work_context, sizeof(RankUpdate) * (SPI_processed + 1)));
    for (uint64 r = 0; r < SPI_processed; r++) {
      bool isnull;
      HeapTuple tup = SPI_tuptable->vals[r];
      int32 counter = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
      if (!DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull)) ||
          !RankIndexed(db, counter))
        continue;
      (*updates)[(*nupdates)++] = RankUpdate{
          counter, DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull)),
          DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull))};
    }
    std::sort(*updates, *updates + *nupdates,
              [](const RankUpdate& a, const RankUpdate& b) { return a.counter < b.counter; });
  }
  rc = SPI_execute(kOrphanSql, false, 0);
  if (rc != SPI_OK_DELETE) elog(ERROR, "deleting orphan deltas failed: %d", rc);
  return rows;
}

// The items with rows first, unbucketed before bucketed, then the fresh ones; each in key order
// (index order).
bool ItemOrder(const FlushItem& a, const FlushItem& b) {
  if (a.fresh != b.fresh) return b.fresh;
  if (Unbucketed(a) != Unbucketed(b)) return Unbucketed(a);
  if (a.counter != b.counter) return a.counter < b.counter;
  if (a.key != b.key) return a.key < b.key;
  return a.bucket < b.bucket;
}

}  // namespace

// Every flusher transaction writes totals: it counts itself among the writers before it starts,
// so that its now(), the stamp of the rows it writes, is not before the watermark an attachment
// run reads (attach_run.cpp).
void BeginWork(Oid db) {
  totals_write_slot = FindSlot(db);
  if (totals_write_slot != nullptr) OpenTotalsWrite(totals_write_slot);
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  SPI_connect();
  PushActiveSnapshot(GetTransactionSnapshot());
}

void EndWork() {
  SPI_finish();
  PopActiveSnapshot();
  CommitTransactionCommand();
  AbandonTotalsWrite();
}

// A background worker reports its statistics itself; autovacuum needs them to vacuum the dead
// versions each flush leaves in the values table. Called only after the outcome of a committed
// transaction is settled: nothing that fails here may make it look uncommitted.
void ReportStatistics() { pgstat_report_stat(true); }

MemoryContext WorkContext() {
  if (work_context == nullptr)
    work_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter flush",
                                         ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(work_context);
  return work_context;
}

void AbandonTotalsWrite() {
  if (totals_write_slot != nullptr) CloseTotalsWrite(totals_write_slot);
  totals_write_slot = nullptr;
}

// The fold epoch this flush takes (core/fold_epochs.hpp); moves it on.
pg_noinline uint32 TakeFoldEpoch(DatabaseSlot* slot) { return TakeFoldEpoch(slot->fold); }

namespace {

// Rows this flusher added to totals since it last analyzed the table (at most: a folded row may
// have had its row already), and how many rows the table had then.
int64 rows_added_since_analyze = 0;
double rows_at_analyze = 0;

}  // namespace

void AnalyzeIfGrown() {
  if (rows_added_since_analyze < 1000 || rows_added_since_analyze < rows_at_analyze / 2) return;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    SPI_connect();
    PushActiveSnapshot(GetTransactionSnapshot());
    if (SPI_execute("ANALYZE slotted_counter.totals", false, 0) != SPI_OK_UTILITY)
      elog(ERROR, "ANALYZE slotted_counter.totals failed");
    if (SPI_execute("SELECT reltuples FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) "
                    "'slotted_counter.totals'::pg_catalog.regclass",
                    true, 1) == SPI_OK_SELECT &&
        SPI_processed == 1) {
      bool isnull;
      rows_at_analyze = double(DatumGetFloat4(
          SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)));
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    rows_added_since_analyze = 0;
  }
  PG_CATCH();
  {
    AbortAndLog(context, "analyze slotted_counter.totals");
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

namespace {

// The request ids a flush took, written with the increments it writes (an id known before, whose
// row's time was past the window then, takes the row over).
SPIPlanPtr plan_request_ids = nullptr;

void WriteRequestIds(const TakenRequestId* taken, int n) {
  if (n == 0) return;
  Datum *counters = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *ids = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *keys = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *buckets = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *results = static_cast<Datum*>(palloc(sizeof(Datum) * n)),
        *times = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  bool* bucket_nulls = static_cast<bool*>(palloc(sizeof(bool) * n));
  for (int i = 0; i < n; i++) {
    counters[i] = Int32GetDatum(taken[i].counter);
    ids[i] = CStringGetTextDatum(taken[i].id);
    keys[i] = Int64GetDatum(taken[i].key);
    buckets[i] = Int64GetDatum(taken[i].bucket);
    bucket_nulls[i] = taken[i].bucket == kNoBucket;
    results[i] = Int64GetDatum(taken[i].result);
    times[i] = TimestampTzGetDatum(taken[i].applied_at);
  }
  int dims[1] = {n}, lbs[1] = {1};
  Datum args[6] = {
      PointerGetDatum(construct_array(counters, n, INT4OID, 4, true, TYPALIGN_INT)),
      PointerGetDatum(construct_array(ids, n, TEXTOID, -1, false, TYPALIGN_INT)),
      PointerGetDatum(construct_array(keys, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_md_array(buckets, bucket_nulls, 1, dims, lbs, TIMESTAMPTZOID, 8,
                                         true, TYPALIGN_DOUBLE)),
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

int64 FlushDatabase(Oid db, TimestampTz* attachments_due) {
  WorkContext();
  // Every commit tagged with this epoch (or an earlier one) is visible to the fold below: a
  // commit reads the epoch only after it became visible (shmem.hpp: fold epochs).
  // The flusher's own slot, or the one it just left at shutdown.
  DatabaseSlot* slot = FindSlot(db);
  const volatile uint32 epoch = slot != nullptr ? TakeFoldEpoch(slot) : 0;
  BeginWork(db);
  // StampToStore's time for the writes that carry none.
  const volatile TimestampTz stored_stamp = GetCurrentTransactionStartTimestamp();
  int nids, nskipped;
  int32* skipped;
  int32* ids = LockLiveCounters(&nids, &skipped, &nskipped);
  int64 n;
  // The request ids of buffered sc_incr_once calls whose increments this flush claims, and only
  // those (request_ids.hpp: the apply locks).
  RequestIdTable* request_ids = shared->request_ids;
  TakenRequestId* taken;
  LWLockAcquire(ApplyLockOf(request_ids, db), LW_EXCLUSIVE);
  // In the work context: they are settled after the transaction (and SPI's memory) ended.
  MemoryContext caller = MemoryContextSwitchTo(work_context);
  int ntaken = TakePendingRequestIds(request_ids, db, ids, nids, &taken);
  MemoryContextSwitchTo(caller);
  FlushItem* items = CollectDirty(db, slot, ids, nids, &n);
  LWLockRelease(ApplyLockOf(request_ids, db));
  int64 folded = 0;
  int64 with_rows = 0;
  RankUpdate* folded_updates = nullptr;
  int nfolded_updates = 0;
  volatile bool window_open = false;
  PG_TRY();
  {
    std::sort(items, items + n, ItemOrder);
    with_rows = std::partition_point(items, items + n,
                                     [](const FlushItem& item) { return !item.fresh; }) -
                items;
    WriteExpecting(items, with_rows, Statement::kUpdate, ERRCODE_NO_DATA_FOUND);
    WriteExpecting(items + with_rows, n - with_rows, Statement::kInsert, ERRCODE_UNIQUE_VIOLATION);
    folded = FoldDeltas(db, ids, nids, &folded_updates, &nfolded_updates);
    WriteRequestIds(taken, ntaken);
    *attachments_due = AttachmentsDue();
    // From the commit to the end of the settle, readers of totals wait (core/commit_window.hpp).
    window_open = true;
    OpenWindow(CommitWindowOf(db));
    EndWork();
  }
  PG_CATCH();
  {
    SettleFlushed(slot, db, items, n, false, stored_stamp);
    if (window_open) CloseWindow(CommitWindowOf(db));
    SettleRequestIds(request_ids, taken, ntaken, false);
    PG_RE_THROW();
  }
  PG_END_TRY();
  SettleFlushed(slot, db, items, n, true, stored_stamp);
  CloseWindow(CommitWindowOf(db));
  if (nfolded_updates > 0) ApplyRankUpdates(db, folded_updates, nfolded_updates);
  SettleRequestIds(request_ids, taken, ntaken, true);
  // Folded: the entries committed into up to this epoch may leave the buffer, but those of the
  // counters this flush skipped.
  if (slot != nullptr) PublishFold(slot, epoch, skipped, nskipped);
  ReportStatistics();
  rows_added_since_analyze += n - with_rows + folded;
  return n + folded;
}

}  // namespace sc
