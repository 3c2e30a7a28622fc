// flush.cpp: a flush, what the flusher writes to slotted_counter.key_values, in steps that are
// transactions of their own.
//
// What a flush writes: every entry of its database that was dirty when it began (its backlog),
// then the fold of transactional deltas (fold.cpp). It finds the dirty entries in its slot's
// ring, which names those that turned dirty since the last take (shmem.hpp: DatabaseSlot::dirty),
// or, when the ring overflowed (and every 10 s anyway, a safety net), by scanning the whole
// buffer; a scan puts the keys of the counters with the fewest dirty keys first, so that a bulk
// load of one counter goes last.
//
// Steps. The flush writes at most kStepKeys keys per transaction: in the step's transaction it
// locks the counters FOR KEY SHARE (skipping those a transaction is dropping, so a drop waits for
// the step that writes its keys), claims the step's entries (protocol.hpp: claim; in_flush, so no
// eviction takes them) and the request ids of buffered sc_incr_once calls made on them, writes
// each entry's delta (value - flushed: flush_write.cpp) and the ids, then the rows of the text
// keys' ids that backends gave (text_ids.hpp: every one given before the step's claims), commits,
// and only then advances each entry's flushed by the delta it wrote (checking the entry's
// generation: a drop may have freed it meanwhile) and marks those ids written. A failed step
// advances nothing, so it loses nothing and counts nothing twice; a crash before the advance
// resets the buffer with everything else in shared memory. Claims live only within their step's transaction, as the counter locks do.
//
// What a crash loses. Every flush_interval, even in the middle of a long flush (a bulk load of
// millions of keys, a fold of many large transactions), the flusher takes what turned dirty since
// (the ring: hot keys, re-noted when their step settled) and writes it in the steps that
// alternate with the backlog's. So a buffered increment waits for at most about one interval and
// a few steps before it commits, however long the flush, but for the keys of a load that dirties
// more keys per interval than steps can write (they go at the rate the table takes them).
//
// Nothing fails after a step's commit: what the settle and the rank indexes need is allocated
// before it. Should an error come there anyway (slotted_counter.fault_point injects one in the
// tests), the step decides from its transaction's status in the commit log, not from where the
// error came, whether to settle the claims and ids as committed, and closes the commit window it
// opened (core/commit_window.hpp: readers of key_values wait from the commit to the end of the
// settle).
#include <algorithm>

#include "faults.hpp"
#include "settings.hpp"
#include "buffer/buffer.hpp"
#include "buffer/rank_indexes.hpp"
#include "definitions/sketch_rows.hpp"
#include "spi.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"
#include "workers/text_ids.hpp"

namespace sc {

bool full_scan_next = false;

namespace {

// Keys one step claims and writes: a fraction of a second of writes, and a step's transaction
// that does not grow with the flush.
constexpr int64 kStepKeys = 50000;
constexpr int kFullScanMs = 10000;

TimestampTz last_full_scan = 0;

// flush_context: the flush's rounds and fold pass, reset as each flush begins; step_context:
// what one step allocates outside SPI (its claims, its ids, its rank updates), reset per step.
MemoryContext flush_context = nullptr;
MemoryContext step_context = nullptr;

// Dirty entries to write, in order: a take of the ring or a scan.
struct Round {
  DirtyRef* refs;
  int64 count;
  int64 next;
};

// A dirty entry found by a scan, with its counter's number of dirty entries (the scan's order).
struct Found {
  DirtyRef ref;
  int32 counter;
  int64 dirty_of_counter;
};

// Every dirty entry of db not claimed by another flush, the counters with the fewest first. An
// entry linked during the scan that finds the array full is left for the next flush's scan.
Round ScanDirty(Oid db, DatabaseSlot* slot) {
  auto table = Table();
  int64 space = int64(table.table().used()) + 1;
  auto* found =
      static_cast<Found*>(MemoryContextAllocHuge(flush_context, sizeof(Found) * space));
  int64 n = 0;
  for (uint32 p = 0; p < kPartitions; p++)
    table.ForEachResident(p, [&](uint32 index, const Entry& e) {
      if (e.id.db != db || IsSum(e.id) || CounterTable::Clean(e) ||
          e.in_flush.load(std::memory_order_relaxed) != 0)
        return;
      if (n == space) {
        if (slot != nullptr) MarkDirtyUntracked(slot);
        return;
      }
      found[n++] = Found{{index, e.generation.load(std::memory_order_relaxed)}, e.id.counter, 0};
    });
  std::sort(found, found + n, [](const Found& a, const Found& b) { return a.counter < b.counter; });
  for (int64 i = 0; i < n;) {
    int64 end = i;
    while (end < n && found[end].counter == found[i].counter) end++;
    for (int64 j = i; j < end; j++) found[j].dirty_of_counter = end - i;
    i = end;
  }
  std::stable_sort(found, found + n, [](const Found& a, const Found& b) {
    return a.dirty_of_counter != b.dirty_of_counter ? a.dirty_of_counter < b.dirty_of_counter
                                                    : a.counter < b.counter;
  });
  auto* refs = static_cast<DirtyRef*>(
      MemoryContextAllocHuge(flush_context, sizeof(DirtyRef) * (n + 1)));
  for (int64 i = 0; i < n; i++) refs[i] = found[i].ref;
  pfree(found);
  return Round{refs, n, 0};
}

// The entries of db that turned dirty since the last take: the slot's ring, or a scan of the
// whole buffer when the ring overflowed (or a scan is due: the safety net under the ring, every
// kFullScanMs and before the flusher exits, so that a dirty entry the ring missed would be
// written late, never lost; one pass over the buffer per 10 s, not per flush).
Round TakeRound(Oid db, DatabaseSlot* slot) {
  TimestampTz now = GetCurrentTimestamp();
  if (slot != nullptr && (full_scan_next || last_full_scan == 0 ||
                          TimestampDifferenceExceeds(last_full_scan, now, kFullScanMs)))
    MarkDirtyUntracked(slot);
  full_scan_next = false;
  if (slot == nullptr) return ScanDirty(db, slot);
  // Allocate first, then take the ring whole, so that no failure can drop a ref once taken.
  SpinMutex ring_mutex{&slot->dirty_mutex};
  bool overflowed = RingOverflowed(slot->dirty, ring_mutex);
  auto* refs = static_cast<DirtyRef*>(
      MemoryContextAlloc(flush_context, sizeof(DirtyRef) * (slot->dirty.capacity + 1)));
  bool scan_all = false;
  int n = RingTake(slot->dirty, ring_mutex, overflowed, refs, &scan_all);
  if (!scan_all) return Round{refs, n, 0};
  last_full_scan = now;
  pfree(refs);
  return ScanDirty(db, slot);
}

// The refs of a round that no step claimed go back to the ring, to be taken again (behind the
// entries noted since, the hot keys that the settles of the last steps noted again); too many
// for the ring, the next take scans the buffer instead. The round's memory is freed.
void GiveBack(Round* round, DatabaseSlot* slot) {
  if (slot != nullptr && round->next < round->count) {
    if (round->count - round->next <= int64(slot->dirty.capacity))
      for (int64 i = round->next; i < round->count; i++)
        NoteDirty(slot, round->refs[i].index, round->refs[i].generation);
    else
      MarkDirtyUntracked(slot);
  }
  if (round->refs != nullptr) pfree(round->refs);
  *round = Round{nullptr, 0, 0};
}

// The keys of the claimed items, sorted: the request ids a step takes are those of its keys.
CounterKey* KeysOf(Oid db, const FlushItem* items, int64 n) {
  auto* keys = static_cast<CounterKey*>(palloc(sizeof(CounterKey) * (n + 1)));
  for (int64 i = 0; i < n; i++)
    keys[i] = CounterKey{uint32(db), items[i].counter, items[i].key, items[i].bucket};
  std::sort(keys, keys + n, KeyBefore);
  return keys;
}

// After the step's transaction ended (protocol.hpp: settle): an entry still dirty (the step
// failed, or it was counted into meanwhile) goes back into the ring. stored_stamp: what the step
// stored as written_at for the claims that took no stamp. After a committed step, `updates`
// (room for n, allocated before the commit) receives what the rows of the counters with a rank
// index now hold. Allocates nothing, fails in nothing.
int SettleItems(DatabaseSlot* slot, Oid db, const FlushItem* items, int64 n, bool committed,
                TimestampTz stored_stamp, RankUpdate* updates) {
  auto table = Table();
  int nupdates = 0;
  int32 last_counter = 0;
  bool last_indexed = false;
  for (int64 i = 0; i < n; i++) {
    const Claim& claim = items[i].claim;
    int64 stored = 0;
    bool indexed = false;
    if (committed && updates != nullptr && items[i].bucket == kNoBucket) {
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
  return nupdates;
}

// Whether key's entry holds nothing unflushed: not resident (it was clean when evicted), or
// clean and claimed by no flush. Then the request id of an increment made on it may be written
// now: the increment is in the table already (or was 0).
bool KeySettled(const CounterKey& key) {
  bool settled = true;
  Table().WithResident(key, HashCounterKey(key), [&](uint32, const Entry& e) {
    settled = CounterTable::Clean(e) && e.in_flush.load(std::memory_order_acquire) == 0;
  });
  return settled;
}

// What one step claimed and took, and how far its end got: read by its error path.
struct Step {
  FlushItem* items;
  int64 n;
  TakenRequestId* taken;
  int ntaken;
  RankUpdate* updates;       // room for n, when the database has rank indexes
  UnwrittenKeys unwritten;   // the ids given by backends whose rows it wrote
  TransactionId xid;         // the step's transaction, once it wrote
  TimestampTz stored_stamp;
  bool window_open;
  bool settled;
};

// Claims the entries the refs name that this step may write, and the request ids of buffered
// sc_incr_once calls on them (request_ids.hpp: the apply locks), in step_context.
void ClaimStep(Oid db, DatabaseSlot* slot, const DirtyRef* refs, int64 nrefs,
               const FlushScope& scope, Step* step) {
  RequestIdTable* request_ids = shared->request_ids;
  MemoryContext caller = MemoryContextSwitchTo(step_context);
  auto* items = static_cast<FlushItem*>(palloc(sizeof(FlushItem) * (nrefs + 1)));
  int64 n = 0;
  auto taken = [&](const Claim& claim, const Entry& e) {
    items[n++] = FlushItem{claim, e.id.counter, e.id.key, e.id.bucket,
                           e.flushed.load(std::memory_order_relaxed) == 0,
                           IsSketchEntry(claim.index, claim.generation)};
  };
  auto left = [&](uint32 index, uint32 generation) {
    if (slot != nullptr) NoteDirty(slot, index, generation);
  };
  LWLockAcquire(ApplyLockOf(request_ids, db), LW_EXCLUSIVE);
  Table().ClaimNoted(db, refs, int(nrefs), scope, taken, left);
  step->items = items;
  step->n = n;
  // Taken while the claims are made, under the same lock: the ids this step writes are those whose
  // increments it writes, and those whose increments are in the table already.
  CounterKey* keys = n > 0 ? KeysOf(db, items, n) : nullptr;
  step->ntaken = TakePendingRequestIds(request_ids, db, keys, int(n), KeySettled, &step->taken);
  LWLockRelease(ApplyLockOf(request_ids, db));
  if (n > 0 && AnyRankIndex(db))
    step->updates = static_cast<RankUpdate*>(palloc(sizeof(RankUpdate) * (n + 1)));
  MemoryContextSwitchTo(caller);
}

// Settles what the step claimed and took, once: as committed if its transaction committed.
void SettleStep(Oid db, DatabaseSlot* slot, Step* step, bool committed) {
  if (step->settled) return;
  if (committed) MarkKeysWritten(db, step->unwritten);
  int nupdates = SettleItems(slot, db, step->items, step->n, committed, step->stored_stamp,
                             committed ? step->updates : nullptr);
  if (step->window_open) CloseWindow(CommitWindowOf(db));
  step->window_open = false;
  SettleRequestIds(shared->request_ids, step->taken, step->ntaken, committed);
  step->settled = true;
  if (nupdates > 0) ApplyRankUpdates(db, step->updates, nupdates);
}

// One step in a transaction of its own: the entries refs names (nrefs of them, maybe none) and,
// with a fold pass, the pass's next pages. Returns the rows written; *folded: the pass is
// complete (then *attachments_due says when the first attachment is due). May throw (ereport),
// having settled everything it claimed as its transaction's outcome says.
pg_noinline int64 RunStep(Oid db, DatabaseSlot* slot, const DirtyRef* refs, int64 nrefs,
                          FoldPass* fold, bool* folded, TimestampTz* attachments_due) {
  MemoryContextReset(step_context);
  // In memory, not in a local that the error path could read stale after the longjmp.
  auto* s = static_cast<Step*>(MemoryContextAllocZero(step_context, sizeof(Step)));
  RankUpdate* fold_updates = nullptr;
  int nfold_updates = 0;
  int64 fresh = 0;
  int64 folded_before = fold != nullptr ? fold->rows : 0;
  bool complete = false;
  BeginWork(db);
  PG_TRY();
  {
    s->stored_stamp = GetCurrentTransactionStartTimestamp();
    int nids, nskipped;
    int32* skipped;
    int32* ids = LockLiveCounters(step_context, &nids, &skipped, &nskipped);
    FlushScope scope;
    scope.Read(db, ids, nids);
    ClaimStep(db, slot, refs, nrefs, scope, s);
    int64 sketches = PartitionSketchItems(s->items, s->n);
    fresh = WriteItems(s->items, s->n - sketches);
    WriteSketchItems(db, s->items + s->n - sketches, sketches, s->stored_stamp);
    WriteRequestIds(s->taken, s->ntaken);
    if (fold != nullptr) {
      complete = FoldInTransaction(db, fold, ids, nids, skipped, nskipped, step_context,
                                   &fold_updates, &nfold_updates);
      // The transactional distinct counters' commits, with the fold's first step.
      if (!fold->started_sketches) {
        fold->rows += FoldSketchDeltas(ids, nids);
        fold->started_sketches = true;
      }
      if (complete) *attachments_due = AttachmentsDue();
    }
    // Last: every id given before the values this step claimed is found unwritten now (or was
    // written before), and goes in with them.
    s->unwritten = WriteUnwrittenKeys(db, ids, nids, step_context);
    s->xid = GetTopTransactionIdIfAny();
    // From the commit to the end of the settle, readers of key_values wait
    // (core/commit_window.hpp).
    if (s->n > 0) {
      s->window_open = true;
      OpenWindow(CommitWindowOf(db));
    }
    EndWork();
    SC_FAULT_POINT("flush-after-commit");
    SettleStep(db, slot, s, true);
  }
  PG_CATCH();
  {
    // Committed or not, as the commit log says: an error after the commit (none is expected)
    // must not undo what the table holds.
    bool committed = TransactionIdIsValid(s->xid) && TransactionIdDidCommit(s->xid);
    SettleStep(db, slot, s, committed);
    PG_RE_THROW();
  }
  PG_END_TRY();
  if (nfold_updates > 0) ApplyRankUpdates(db, fold_updates, nfold_updates);
  ReportStatistics();
  *folded = complete;
  int64 fold_rows = fold != nullptr ? fold->rows - folded_before : 0;
  NoteRowsAdded(fresh + fold_rows);
  return s->n + fold_rows;
}

}  // namespace

namespace {

void ResetContexts() {
  if (flush_context == nullptr) {
    flush_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter flush",
                                          ALLOCSET_DEFAULT_SIZES);
    step_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter flush step",
                                         ALLOCSET_DEFAULT_SIZES);
  }
  MemoryContextReset(flush_context);
}

}  // namespace

int64 FoldDatabase(Oid db) {
  ResetContexts();
  DatabaseSlot* slot = FindSlot(db);
  FoldPass fold;
  BeginFold(&fold, slot, flush_context);
  bool complete = false;
  TimestampTz attachments_due = DT_NOEND;
  int64 rows = 0;
  // Steps until the pass is complete (a fold of many pages takes several).
  while (!complete) rows += RunStep(db, slot, nullptr, 0, &fold, &complete, &attachments_due);
  EndFold(&fold, slot);
  return rows;
}

int64 FlushDatabase(Oid db, TimestampTz* attachments_due, void (*between_steps)(Oid db)) {
  ResetContexts();
  // The flusher's own slot, or the one it just left at shutdown.
  DatabaseSlot* slot = FindSlot(db);
  // Every commit tagged with the fold's epoch (or an earlier one) is visible to its first step:
  // taken before any step (core/fold_epochs.hpp).
  FoldPass fold;
  BeginFold(&fold, slot, flush_context);
  Round backlog{nullptr, 0, 0};
  Round recent{nullptr, 0, 0};
  TimestampTz taken_at = GetCurrentTimestamp();
  bool folded = false;
  bool recent_turn = true;
  int64 rows = 0;
  PG_TRY();
  {
    backlog = TakeRound(db, slot);
    auto older_work = [&] { return backlog.next < backlog.count || !folded; };
    while (older_work() || recent.next < recent.count) {
      // Every interval, what turned dirty since goes in the steps that alternate with the
      // backlog's and the fold's (see the top), and what the last take did not get to goes back
      // behind it; nothing is taken once the backlog and the fold are done, so the flush ends.
      int interval = settings.flush_interval;
      if (older_work() && interval > 0 &&
          TimestampDifferenceExceeds(taken_at, GetCurrentTimestamp(), interval)) {
        taken_at = GetCurrentTimestamp();
        GiveBack(&recent, slot);
        recent = TakeRound(db, slot);
      }
      bool take_recent = recent.next < recent.count && (recent_turn || !older_work());
      Round& round = take_recent ? recent : backlog;
      recent_turn = !take_recent;
      int64 nrefs = Min(kStepKeys, round.count - round.next);
      const DirtyRef* refs = round.refs + round.next;
      round.next += nrefs;
      // The fold joins the backlog's last step (a small flush is one transaction).
      bool with_fold = !take_recent && round.next >= round.count && !folded;
      bool complete = false;
      rows += RunStep(db, slot, refs, nrefs, with_fold ? &fold : nullptr, &complete,
                      attachments_due);
      folded = folded || complete;
      if (between_steps != nullptr && (older_work() || recent.next < recent.count))
        between_steps(db);
    }
  }
  PG_CATCH();
  {
    // Whatever the rounds had not claimed yet stays dirty: the next flush scans for it.
    if (slot != nullptr) MarkDirtyUntracked(slot);
    PG_RE_THROW();
  }
  PG_END_TRY();
  EndFold(&fold, slot);
  return rows;
}

}  // namespace sc
