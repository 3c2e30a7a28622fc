// flush_txn.cpp: a flusher transaction that writes slotted_counter.key_values (a step of a flush, a
// write-through), and what each step reads first: the counters it may write, the bucket drops in
// progress, when the attachments are due; and the flusher's ANALYZE of the grown table.
//
// A flusher transaction counts itself among the writers of its database's key_values before it
// starts (shmem.hpp: OpenTotalsWrite), so that its now(), the stamp of the rows it writes, is not
// before the watermark an attachment run reads (attach_run.cpp).
#include <algorithm>

#include "functions/attach.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

// The slot whose key_values writers this process counts itself among (shmem.hpp), while it does.
DatabaseSlot* totals_write_slot = nullptr;

// Outlives the flusher's transactions (SPI_finish frees what was allocated inside them).
MemoryContext work_context = nullptr;

// Rows this flusher added to key_values since it last analyzed the table (at most: a folded row may
// have had its row already), and how many rows the table had then.
int64 rows_added_since_analyze = 0;
double rows_at_analyze = 0;

const char* const kAttachmentsDueSql =
    "SELECT pg_catalog.min(" SC_ATTACHMENT_DUE_AT ") FROM slotted_counter.attachments";

bool BeingDropped(const CounterKey& k, const BucketDrop* drops, int ndrops) {
  for (int i = 0; i < ndrops; i++)
    if (drops[i].counter == k.counter && k.bucket != kNoBucket && k.bucket < drops[i].before)
      return true;
  return false;
}

}  // namespace

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

void AbandonTotalsWrite() {
  if (totals_write_slot != nullptr) CloseTotalsWrite(totals_write_slot);
  totals_write_slot = nullptr;
}

// A background worker reports its statistics itself; autovacuum needs them to vacuum the dead
// versions each flush leaves in the values table. Called only after the outcome of a committed
// transaction is settled: nothing that fails here may make it look uncommitted.
void ReportStatistics() { pgstat_report_stat(true); }

MemoryContext WorkContext() {
  if (work_context == nullptr)
    work_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter write-through",
                                         ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(work_context);
  return work_context;
}

int32* LockLiveCounters(MemoryContext context, int* count, int32** skipped_ids, int* nskipped) {
  // One statement, so that the locked and the skipped come from one snapshot.
  int rc = SPI_execute(
      "WITH locked AS (SELECT id FROM slotted_counter.counters FOR KEY SHARE SKIP LOCKED) "
      "SELECT c.id, l.id IS NOT NULL FROM slotted_counter.counters c "
      "LEFT JOIN locked l ON l.id OPERATOR(pg_catalog.=) c.id ORDER BY 1",
      false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counters failed: %d", rc);
  int n = int(SPI_processed);
  auto* ids = static_cast<int32*>(MemoryContextAlloc(context, sizeof(int32) * (n + 1)));
  auto* skipped = static_cast<int32*>(MemoryContextAlloc(context, sizeof(int32) * (n + 1)));
  *count = *nskipped = 0;
  for (int i = 0; i < n; i++) {
    bool isnull;
    int32 id =
        DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)))
      ids[(*count)++] = id;
    else
      skipped[(*nskipped)++] = id;
  }
  *skipped_ids = skipped;
  return ids;
}

void FlushScope::Read(Oid db, const int32* locked, int nlocked) {
  ids = locked;
  nids = nlocked;
  ndrops = 0;
  SpinLockAcquire(&shared->bucket_drops_mutex);
  for (const BucketDrop& drop : shared->bucket_drops)
    if (drop.db == db) drops[ndrops++] = drop;
  SpinLockRelease(&shared->bucket_drops_mutex);
}

bool FlushScope::operator()(const Entry& e) const {
  return std::binary_search(ids, ids + nids, e.id.counter) &&
         !(ndrops > 0 && BeingDropped(e.id, drops, ndrops));
}

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

void NoteRowsAdded(int64 rows) { rows_added_since_analyze += rows; }

void AnalyzeIfGrown() {
  if (rows_added_since_analyze < 1000 || rows_added_since_analyze < rows_at_analyze / 2) return;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    SPI_connect();
    PushActiveSnapshot(GetTransactionSnapshot());
    if (SPI_execute("ANALYZE slotted_counter.key_values", false, 0) != SPI_OK_UTILITY)
      elog(ERROR, "ANALYZE slotted_counter.key_values failed");
    if (SPI_execute("SELECT reltuples FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) "
                    "'slotted_counter.key_values'::pg_catalog.regclass",
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
    AbortAndLog(context, "analyze slotted_counter.key_values");
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
}

}  // namespace sc
