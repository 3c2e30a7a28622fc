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

// Applies the pending write-through requests of db in one transaction; returns how many were
// answered. Same calling conditions.
int ServeWriteThroughs(Oid db);

}  // namespace sc
