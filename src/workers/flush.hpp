// flush.hpp: what the flusher writes to slotted_counter.key_values.
#pragma once

#include "core/counter_table.hpp"
#include "pg.hpp"

namespace sc {

// Writes every dirty value of database db to the values table, and folds the committed deltas
// of transactional counters into it, in steps that are transactions of their own (flush.cpp);
// returns the number of rows written, and in *attachments_due when the first attachment is due
// (DT_NOEND if there is none). between_steps(db), if given, runs between two steps (the flusher
// answers write-throughs there). Must run in db's flusher, outside a transaction; may throw
// (ereport), having settled every step it began.
int64 FlushDatabase(Oid db, TimestampTz* attachments_due, void (*between_steps)(Oid db));

// The fold of FlushDatabase alone, writing no buffered value: a new flusher's first pass, so that
// loads stop reading slotted_counter.deltas (core/fold_epochs.hpp) without waiting for a flush
// interval. Returns the rows written; as FlushDatabase otherwise.
int64 FoldDatabase(Oid db);

// Analyzes key_values once this flusher has added half as many rows as it had when last analyzed
// (and at least 1,000): the plans of the flush's statements (and of reads) rely on its size, and a
// table that grew from a few rows to thousands in seconds, faster than autovacuum analyzes it,
// made a flush join every row of it to every key of a batch. In the flusher, after a flush was
// answered, outside a transaction; an error is logged.
void AnalyzeIfGrown();

// After a flusher transaction failed (and was aborted): it no longer writes key_values.
void AbandonTotalsWrite();

// Set by the flusher before its last flush: that flush scans the whole buffer (flush.cpp).
extern bool full_scan_next;

// A flusher transaction that writes key_values (flush.cpp, write_through.cpp; flush_txn.cpp):
// BeginWork counts this process among the writers of db's key_values (shmem.hpp: OpenTotalsWrite),
// starts a transaction, connects SPI and pushes a snapshot; EndWork commits and counts it out.
void BeginWork(Oid db);
void EndWork();
// The write-throughs' memory that outlives their transactions, reset (for each round).
MemoryContext WorkContext();
// The written_at a write with `stamp` gives its row: a write with no stamp (kNoWrite) counts as
// written by the current transaction.
inline TimestampTz StampToStore(int64 stamp) {
  return stamp > kNoWrite ? TimestampTz(stamp) : GetCurrentTransactionStartTimestamp();
}
// Reports this worker's table statistics (autovacuum needs them); after a commit.
void ReportStatistics();

}  // namespace sc
