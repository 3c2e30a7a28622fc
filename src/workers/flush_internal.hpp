// flush_internal.hpp: the parts of a flush that its files share (flush.cpp: rounds and chunks;
// flush_write.cpp: the statements that write a chunk; flush_copy.cpp: its fresh keys' rows by
// COPY; fold.cpp: the fold of transactional deltas; flush_txn.cpp: a flusher transaction and what
// each one reads first).
#pragma once

#include "core/counter_table.hpp"
#include "definitions/key_values_rows.hpp"
#include "pg.hpp"
#include "shared/request_ids.hpp"
#include "shared/shmem.hpp"
#include "tid.hpp"

namespace sc {

// One claimed entry (protocol.hpp: Claim) and the row its delta goes to. fresh: the entry holds
// nothing flushed (flushed = 0: a key new to the buffer and the table, or one whose row holds 0),
// so its row most likely does not exist. sketch: a distinct counter's key, whose sketch is
// written (flush_sketches.cpp) rather than its delta.
struct FlushItem {
  Claim claim;
  int32 counter;
  int64 key;
  int64 bucket;
  bool fresh;
  bool sketch;
};

// ---- flush_txn.cpp ----

// The ids of this database's counters that the current transaction locked FOR KEY SHARE, sorted,
// and in *skipped_ids (sorted) those it could not lock: a transaction is dropping them or their
// buckets, so nothing of theirs is written or folded now. Both in `context`.
int32* LockLiveCounters(MemoryContext context, int* count, int32** skipped_ids, int* nskipped);

// What a transaction of the flush may write: the entries of the counters it locked, but those
// whose buckets a committing transaction dropped and has not yet purged from the buffer (read
// after the counters were locked: a drop holds its counter FOR UPDATE until it commits, and
// registers before that).
struct FlushScope {
  const int32* ids;
  int nids;
  BucketDrop drops[kMaxBucketDrops];
  int ndrops;

  void Read(Oid db, const int32* locked, int nlocked);
  bool operator()(const Entry& e) const;
};

// When the first attachment of this database is due; DT_NOEND if there is none. Inside SPI.
TimestampTz AttachmentsDue();

// Rows this flusher added to key_values (for AnalyzeIfGrown).
void NoteRowsAdded(int64 rows);

// ---- flush_write.cpp ----

// Writes the deltas of the claimed items (n of them, sorted here into index order): the keys
// with rows with UPDATEs, the fresh ones with INSERTs, each kind redone as upserts if a row was
// not as expected. Returns how many were fresh (rows most likely added). Inside SPI.
int64 WriteItems(FlushItem* items, int64 n);

// The request ids taken with the items, written in the same transaction. Inside SPI.
void WriteRequestIds(const TakenRequestId* taken, int n);

// ---- flush_sketches.cpp ----

// Moves the items of distinct counters' keys (item.sketch) to the end of items (n of them);
// returns how many there are.
int64 PartitionSketchItems(FlushItem* items, int64 n);
// Writes the sketches of the claimed items (n of them, all of distinct counters' keys of db) to
// key_sketches, and their estimates to key_values (definitions/sketch_rows.hpp), with written_at
// each claim's stamp, or stored_stamp for a claim that took none. Inside SPI.
void WriteSketchItems(Oid db, const FlushItem* items, int64 n, TimestampTz stored_stamp);

// ---- flush_insert.cpp ----

// Inserts the rows of items (n of them, fresh keys) into key_values below the executor, with
// written_at from each item's stamp if `stamped`, else now(), and adds their deltas to the sums
// and their keys to the filter of stored keys, as the table's triggers would; fails with 23505 on
// a key that has a row. Each item's claim.row: where its row went (0 if by COPY). By COPY
// (CopyFreshRows) if the table's columns are not as made. Inside SPI, in the flush's transaction.
void InsertFreshRows(FlushItem* items, int64 n, bool stamped);

// ---- flush_update.cpp ----

// Updates the rows of items (n of them, keys with rows) found where the flush last wrote them
// (claim.row) below the executor, adding each delta to the value as the statement's UPDATE would,
// and the deltas to the sums. An item whose row was not found there, or that a concurrent
// transaction changed, is left to the statement: its claim.row becomes 0. Returns how many were
// updated, moved before the others (each part in its order), each with claim.row where its row
// is now. Inside SPI, in the flush's transaction.
int64 UpdateRowsInPlace(FlushItem* items, int64 n);

// What the table's row triggers would have done for items (n of them) written by a statement
// under KeepingSums (definitions/sums.hpp) or below the executor, each a row whose value moved by
// its delta: the deltas to the sums and, if `inserted` (some may have been), the keys to the
// filter of stored keys. After the statements, in their subtransaction.
void KeepItemSums(const FlushItem* items, int64 n, bool inserted);

// ---- flush_copy.cpp ----

// Inserts the rows of items (n of them, fresh keys) into key_values by COPY's bulk insertion (its
// triggers keep the sums and the filter), with written_at from each item's stamp if `stamped`,
// else now(); fails with 23505 on a key that has a row. Inside SPI, in the flush's transaction.
void CopyFreshRows(const FlushItem* items, int64 n, bool stamped);
// Inserts the rows of request ids (n of them) into slotted_counter.requests the same way; fails
// with 23505 on an id that has a row. Each id's text must be in the client encoding.
void CopyRequestIds(const TakenRequestId* taken, int64 n);
// A row of slotted_counter.keys: an id a backend gave a text (workers/text_ids.hpp).
struct KeyRow {
  int32 counter;
  int64 id;
  const char* text;
  int len;
};
// Inserts n rows into slotted_counter.keys the same way; fails with 23505 on a row there
// already. Each text must be in the client encoding.
void CopyKeyRows(const KeyRow* rows, int64 n);

// ---- fold.cpp ----

struct RankUpdate;

// A pass of the fold of transactional deltas (slotted_counter.deltas) into key_values: the pages
// the deltas it must fold can lie in, walked a bounded number at a time, each step in a transaction
// of the flush's.
struct FoldPass {
  uint32 epoch;             // the fold epoch the pass took (core/fold_epochs.hpp)
  bool started;             // the first step read `end`
  BlockNumber next;         // the first page of the next step
  BlockNumber end;          // the pages the first step's snapshot could find deltas in
  MemoryContext context;    // the pass's own memory (skipped), for the whole flush
  int32* skipped;           // counters a step could not lock (sorted, each once)
  int nskipped;
  int capacity;
  int64 rows;               // key_values rows written
  bool started_sketches;    // sketch_deltas folded (definitions/sketch_rows.hpp), by its first step
};

// Begins a pass whose memory is in `context`: takes the fold epoch of the slot (none without one).
void BeginFold(FoldPass* pass, DatabaseSlot* slot, MemoryContext context);
// One step, in the current transaction (inside SPI), which locked the counters ids and skipped
// the others: folds the deltas of ids on the next pages and, in the last step, deletes those of
// dropped counters. With rank indexes in db, *updates (in step_context) receives the rows the
// step wrote of their counters, to apply once it committed. True once the pass is complete.
bool FoldInTransaction(Oid db, FoldPass* pass, const int32* ids, int nids, const int32* skipped,
                       int nskipped, MemoryContext step_context, RankUpdate** updates,
                       int* nupdates);
// After the last step committed: the entries committed up to the pass's epoch may leave the
// buffer (but those of the counters a step skipped).
void EndFold(FoldPass* pass, DatabaseSlot* slot);

}  // namespace sc
