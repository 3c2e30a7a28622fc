// flush.hpp: what the flusher writes to slotted_counter.totals.
#pragma once

#include "pg.hpp"

namespace sc {

// Writes every dirty value of database db to the values table in one transaction; returns the
// number of rows written, and in *attachments_due when the first attachment is due (DT_NOEND if
// there is none). Must run in db's flusher, outside a transaction; may throw (ereport).
int64 FlushDatabase(Oid db, TimestampTz* attachments_due);

// After a flusher transaction failed (and was aborted): it no longer writes totals.
void AbandonTotalsWrite();

// Set by the flusher before its last flush: that flush scans the whole buffer (flush.cpp).
extern bool full_scan_next;

// A flusher transaction that writes totals (flush.cpp, write_through.cpp): BeginWork counts this
// process among the writers of db's totals (shmem.hpp: OpenTotalsWrite), starts a transaction,
// connects SPI and pushes a snapshot; EndWork commits and counts it out.
void BeginWork(Oid db);
void EndWork();
// The flusher's memory that outlives its transactions, reset (for each round).
MemoryContext WorkContext();
// Reports this worker's table statistics (autovacuum needs them); after a commit.
void ReportStatistics();

}  // namespace sc
