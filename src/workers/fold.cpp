// fold.cpp: the fold of transactional deltas (slotted_counter.deltas) into key_values, in steps.
//
// Each commit of transactional increments inserts its deltas; a flush moves them into key_values,
// which bounds their storage. A value read from the tables is key_values plus deltas in one
// snapshot, so a fold changes no value. A pass takes the slot's fold epoch first
// (core/fold_epochs.hpp): every commit tagged with that epoch or an earlier one is visible to its
// first step's snapshot, so its deltas lie in the pages the table had then. The pass walks those
// pages in steps of at most kFoldPages, each step one statement (DELETE ... RETURNING, grouped into
// an upsert of key_values) in a transaction of the flush's, so that no step's transaction grows
// with the table and a long fold never keeps the buffered values of other steps waiting
// (flush.cpp). Once the last step committed, the entries committed up to the epoch may leave the
// buffer (EndFold), but those of the counters a step had to skip (locked by a transaction dropping
// them or their buckets).
#include <algorithm>

#include "buffer/rank_indexes.hpp"
#include "spi.hpp"
#include "transactions/fold_sql.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

// Pages of slotted_counter.deltas one step reads: about 60,000 deltas.
constexpr BlockNumber kFoldPages = 512;

SPIPlanPtr plan_fold = nullptr;
// The same, returning each row it wrote, when the database has rank indexes.
SPIPlanPtr plan_fold_returning = nullptr;

// Deltas of a counter whose drop committed. (A counter being dropped is still visible, and the
// deltas of a counter created by an uncommitted transaction are uncommitted too.)
const char* const kOrphanSql =
    "DELETE FROM slotted_counter.deltas d WHERE NOT EXISTS (SELECT FROM slotted_counter.counters c "
    "WHERE c.id OPERATOR(pg_catalog.=) d.counter)";

BlockNumber DeltaPages() {
  int rc = SPI_execute(
      "SELECT pg_catalog.pg_relation_size('slotted_counter.deltas'::pg_catalog.regclass) "
      "OPERATOR(pg_catalog./) pg_catalog.current_setting('block_size')::pg_catalog.int8",
      true, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1)
    elog(ERROR, "reading the size of slotted_counter.deltas failed: %d", rc);
  bool isnull;
  return BlockNumber(
      DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)));
}

Datum PageStart(BlockNumber page) {
  auto* tid = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData)));
  ItemPointerSet(tid, page, 0);
  return PointerGetDatum(tid);
}

// Adds the counters a step skipped to the pass's (sorted, each once).
void NoteSkipped(FoldPass* pass, const int32* skipped, int nskipped) {
  if (nskipped == 0) return;
  if (pass->nskipped + nskipped > pass->capacity) {
    int capacity = Max(2 * pass->capacity, pass->nskipped + nskipped);
    auto* grown =
        static_cast<int32*>(MemoryContextAlloc(pass->context, sizeof(int32) * capacity));
    if (pass->nskipped > 0) memcpy(grown, pass->skipped, sizeof(int32) * pass->nskipped);
    pass->skipped = grown;
    pass->capacity = capacity;
  }
  memcpy(pass->skipped + pass->nskipped, skipped, sizeof(int32) * nskipped);
  int32* end = pass->skipped + pass->nskipped + nskipped;
  std::sort(pass->skipped, end);
  pass->nskipped = int(std::unique(pass->skipped, end) - pass->skipped);
}

}  // namespace

void BeginFold(FoldPass* pass, DatabaseSlot* slot, MemoryContext context) {
  *pass = FoldPass{};
  pass->context = context;
  pass->epoch = slot != nullptr ? TakeFoldEpoch(slot->fold) : 0;
}

bool FoldInTransaction(Oid db, FoldPass* pass, const int32* ids, int nids, const int32* skipped,
                       int nskipped, MemoryContext step_context, RankUpdate** updates,
                       int* nupdates) {
  NoteSkipped(pass, skipped, nskipped);
  if (!pass->started) {
    pass->end = DeltaPages();
    pass->started = true;
  }
  *nupdates = 0;
  if (pass->next < pass->end) {
    BlockNumber until = pass->end - pass->next > kFoldPages ? pass->next + kFoldPages : pass->end;
    static const Oid types[3] = {INT4ARRAYOID, TIDOID, TIDOID};
    bool ranked = AnyRankIndex(db);
    SPIPlanPtr plan =
        ranked ? KeptPlan(&plan_fold_returning,
                          SC_FOLD_SQL " RETURNING t.counter, t.key, "
                                      "t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ", t.value",
                          3, types)
               : KeptPlan(&plan_fold, SC_FOLD_SQL, 3, types);
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * (nids + 1)));
    for (int i = 0; i < nids; i++) datums[i] = Int32GetDatum(ids[i]);
    Datum args[3] = {
        PointerGetDatum(construct_array(datums, nids, INT4OID, 4, true, TYPALIGN_INT)),
        PageStart(pass->next), PageStart(until)};
    int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
    if (rc != (ranked ? SPI_OK_INSERT_RETURNING : SPI_OK_INSERT))
      elog(ERROR, "folding slotted_counter.deltas failed: %d", rc);
    pass->rows += int64(SPI_processed);
    // The updates of the rank indexes, outside SPI's memory: applied once the step committed.
    if (ranked) {
      *updates = static_cast<RankUpdate*>(
          MemoryContextAllocHuge(step_context, sizeof(RankUpdate) * (SPI_processed + 1)));
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
    pass->next = until;
  }
  if (pass->next < pass->end) return false;
  if (SPI_execute(kOrphanSql, false, 0) != SPI_OK_DELETE)
    elog(ERROR, "deleting orphan deltas failed");
  return true;
}

void EndFold(FoldPass* pass, DatabaseSlot* slot) {
  if (slot != nullptr) PublishFold(slot, pass->epoch, pass->skipped, pass->nskipped);
}

}  // namespace sc
