// write_through.cpp: the flusher's half of a write-through, an increment written to
// slotted_counter.key_values by the flusher when the buffer has no room (the request and the
// requester's half: shared/write_through.hpp).
//
// The flusher serves
// every pending request of its database in one transaction, a subtransaction each, and answers
// after that transaction ended.
#include "workers/write_through.hpp"

#include <algorithm>

#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"
#include "workers/text_ids.hpp"
#include "definitions/text_keys.hpp"
#include "spi.hpp"
#include "shared/flusher_slots.hpp"
#include "buffer/rank_indexes.hpp"

namespace sc {

namespace {

SPIPlanPtr plan_write_through = nullptr;

// $5 is the write's stamp, $6 its counter's cutoff: a row last written at or before it holds an
// expired value, which the delta replaces (definitions/expiry.hpp).
#define SC_THROUGH_CONFLICT                                                                       \
  "ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE "                            \
  "SET value = CASE WHEN t.written_at OPERATOR(pg_catalog.<=) $6 THEN excluded.value "            \
  "ELSE t.value OPERATOR(pg_catalog.+) excluded.value END, updated_at = pg_catalog.now(), "       \
  "written_at = GREATEST(t.written_at, excluded.written_at) "

const char* const kWriteThroughSql =
    "WITH live AS (SELECT id FROM slotted_counter.counters "
    "WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE) "
    "INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value, written_at) "
    "SELECT $1, $2, $3, $4, $5 FROM live " SC_THROUGH_CONFLICT "RETURNING value";

// A batch written through (WriteThroughRequest::nbatch): one counter, one bucket, distinct keys.
const char* const kBatchThroughSql =
    "WITH live AS (SELECT id FROM slotted_counter.counters "
    "WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE) "
    "INSERT INTO slotted_counter.key_values AS t (counter, key, bucket, value, written_at) "
    "SELECT $1, k.key, $3, k.delta, $5 FROM live, ROWS FROM "
    "(pg_catalog.unnest($2::pg_catalog.int8[]), pg_catalog.unnest($4::pg_catalog.int8[])) "
    "AS k(key, delta) " SC_THROUGH_CONFLICT "RETURNING key, value";

SPIPlanPtr plan_batch_through = nullptr;

// A batch is written in chunks of this many keys; its requester's cancel is honoured between
// two of them.
constexpr int kThroughChunk = 10000;

// Raises 57014 if the batch's requester asked to give it up (WriteThroughRequest::cancel).
void CheckBatchCancel(int i) {
  if (Requests().CancelRequested(i))
    ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                    errmsg("the batch written through was cancelled by its requester")));
}

// Writes the keys of a batch request (in its requester's segment) and puts their new values
// there; false if the counter was dropped. Inside the serving subtransaction, whose resource
// owner detaches the segment on an error, which rolls back every chunk written.
bool WriteBatchThrough(int i) {
  const ThroughRequest* r = &shared->requests[i].request;
  dsm_segment* segment = dsm_attach(r->batch);
  if (segment == nullptr) elog(ERROR, "the segment of a batch written through is gone");
  auto* items = static_cast<ThroughItem*>(dsm_segment_address(segment));
  int m = r->nbatch;
  static const Oid types[6] = {INT4OID,      INT8ARRAYOID,   TIMESTAMPTZOID,
                               INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
  SPIPlanPtr plan = KeptPlan(&plan_batch_through, kBatchThroughSql, 6, types, PlanChoice::kCustom);
  Datum* keys = static_cast<Datum*>(palloc(sizeof(Datum) * Min(m, kThroughChunk)));
  Datum* deltas = static_cast<Datum*>(palloc(sizeof(Datum) * Min(m, kThroughChunk)));
  bool done = true;
  for (int first = 0; done && first < m; first += kThroughChunk) {
    CheckBatchCancel(i);
    int count = Min(m - first, kThroughChunk);
    for (int j = 0; j < count; j++) {
      keys[j] = Int64GetDatum(items[first + j].key);
      deltas[j] = Int64GetDatum(items[first + j].delta);
    }
    ArrayType* key_array = construct_array(keys, count, INT8OID, 8, true, TYPALIGN_DOUBLE);
    ArrayType* delta_array = construct_array(deltas, count, INT8OID, 8, true, TYPALIGN_DOUBLE);
    Datum args[6] = {Int32GetDatum(r->key.counter), PointerGetDatum(key_array),
                     TimestampTzGetDatum(r->key.bucket), PointerGetDatum(delta_array),
                     TimestampTzGetDatum(StampToStore(r->write.stamp)),
                     TimestampTzGetDatum(r->write.cutoff)};
    int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
    if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "write-through failed: %d", rc);
    done = SPI_processed == uint64(count);
    for (uint64 row = 0; done && row < SPI_processed; row++) {
      bool isnull;
      int64 key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1,
                                              &isnull));
      ThroughItem* item = FindThroughItem(items + first, count, key);
      if (item != nullptr)
        item->result = DatumGetInt64(
            SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 2, &isnull));
    }
    SPI_freetuptable(SPI_tuptable);
    pfree(key_array);
    pfree(delta_array);
  }
  dsm_detach(segment);
  return done;
}

SPIPlanPtr plan_intern = nullptr;
SPIPlanPtr plan_creator = nullptr;

// Gives each text its id: the one it has, or a new one. The flusher is the only writer of
// slotted_counter.keys, so the insert races with nobody; the keys already there are found by the
// statement's snapshot, which does not see the rows its own insert adds, so each text is
// answered once, each by its unique index entry whatever the statistics say: planned once (a
// plan made for each request's texts cost twenty times its run, and made the flusher the bound
// of new text keys). A counter's row is not required: its creator may still be in the
// transaction that made it (see kCreatorSql). A text that a backend gave an id of its own that is
// not written yet (workers/text_ids.hpp) is written with that id ($3; NULL for the others): a
// backend gives none while this runs (BeginKeysWrite), so none is given in between.
const char* const kInternSql =
    "WITH k AS (SELECT t.key, t.given, t.i FROM ROWS FROM (pg_catalog.unnest("
    "$2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.int8[])) "
    "WITH ORDINALITY AS t(key, given, i)), "
    "ins AS (INSERT INTO slotted_counter.keys AS x (counter, id, key) "
    "SELECT $1, COALESCE(k.given, "
    "pg_catalog.nextval('slotted_counter.keys_id_seq'::pg_catalog.regclass)), k.key "
    "FROM k ORDER BY k.key "
    "ON CONFLICT ON CONSTRAINT keys_counter_key DO NOTHING RETURNING x.key, x.id) "
    "SELECT k.i, COALESCE(ins.id, (SELECT o.id FROM slotted_counter.keys o "
    "WHERE o.counter OPERATOR(pg_catalog.=) $1 AND o.key OPERATOR(pg_catalog.=) k.key)) "
    "FROM k LEFT JOIN ins ON ins.key OPERATOR(pg_catalog.=) k.key";

// A counter that its requester's (sub)transaction created: if that aborts, the retention pass
// deletes the ids given to the counter that never was (definitions/text_keys.hpp).
const char* const kCreatorSql =
    "INSERT INTO slotted_counter.key_creators (counter, creator) "
    "VALUES ($1, $2::pg_catalog.text::pg_catalog.xid8) ON CONFLICT (counter) DO NOTHING";

// Gives ids to the texts of an intern request (in the request's own room, or in its requester's
// segment) and puts them there; false if the requester's segment is gone (it was cancelled and
// left). Inside the serving subtransaction. The ids that backends had given some of the texts
// are added to *honored (room for every text of the round, in the round's memory), to be marked
// written after the commit.
bool InternTexts(Oid db, int i, UnwrittenKeys* honored) {
  const ThroughRequest* r = &shared->requests[i].request;
  dsm_segment* segment = r->batch != 0 ? dsm_attach(r->batch) : nullptr;
  if (r->batch != 0 && segment == nullptr) return false;
  char* base = segment != nullptr ? static_cast<char*>(dsm_segment_address(segment))
                                  : shared->requests[i].inline_intern;
  auto* items = reinterpret_cast<InternItem*>(base);
  int n = r->nbatch;
  auto* texts = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* given = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  auto* given_nulls = static_cast<bool*>(palloc(sizeof(bool) * n));
  for (int j = 0; j < n; j++) {
    const char* text = base + items[j].offset;
    int len = int(items[j].len);
    texts[j] = PointerGetDatum(cstring_to_text_with_len(text, len));
    int64 id = GivenTextId(db, r->key.counter, text, len);
    given[j] = Int64GetDatum(id);
    given_nulls[j] = id == 0;
    if (id != 0) {
      UnwrittenKey& k = honored->keys[honored->n++];
      k.hash = TextKeyHash(r->key.counter, text, len);
      k.id = id;
      k.counter = r->key.counter;
      k.len = 0;
    }
  }
  ArrayType* array = construct_array(texts, n, TEXTOID, -1, false, TYPALIGN_INT);
  int dims[1] = {n};
  int lbs[1] = {1};
  ArrayType* given_array = construct_md_array(given, given_nulls, 1, dims, lbs, INT8OID, 8,
                                              FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
  static const Oid types[3] = {INT4OID, TEXTARRAYOID, INT8ARRAYOID};
  SPIPlanPtr plan = KeptPlan(&plan_intern, kInternSql, 3, types, PlanChoice::kGeneric);
  Datum args[3] = {Int32GetDatum(r->key.counter), PointerGetDatum(array),
                   PointerGetDatum(given_array)};
  // Planned (once, and again after an invalidation of keys) without sequential scans: a plan
  // made while keys was a page or two would keep scanning it whole for each known text.
  int nest_level = PlannerSettingsOff({"enable_seqscan"});
  int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
  PlannerSettingsBack(nest_level);
  if (rc != SPI_OK_SELECT || SPI_processed != uint64(n))
    elog(ERROR, "giving ids to text keys failed: %d", rc);
  for (uint64 row = 0; row < SPI_processed; row++) {
    bool isnull;
    int64 place = DatumGetInt64(
        SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));
    int64 id = DatumGetInt64(
        SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 2, &isnull));
    if (isnull || place < 1 || place > n) elog(ERROR, "a text key was given no id");
    items[place - 1].id = id;
  }
  SPI_freetuptable(SPI_tuptable);
  if (r->creator != 0) {
    static const Oid creator_types[2] = {INT4OID, TEXTOID};
    Datum creator_args[2] = {Int32GetDatum(r->key.counter),
                             CStringGetTextDatum(psprintf(UINT64_FORMAT, r->creator))};
    if (SPI_execute_plan(KeptPlan(&plan_creator, kCreatorSql, 2, creator_types), creator_args,
                         nullptr, false, 0) != SPI_OK_INSERT)
      elog(ERROR, "recording the creator of a counter failed");
  }
  if (segment != nullptr) dsm_detach(segment);
  return true;
}

SPIPlanPtr plan_reserve = nullptr;

// The first id of n that the sequence gives at once: one nextval, then a setval past the others.
// Asynchronous commit: a value that uses one of them is written by a later flusher transaction,
// whose commit makes this one durable with it.
const char* const kReserveSql =
    "SELECT pg_catalog.setval('slotted_counter.keys_id_seq'::pg_catalog.regclass, "
    "pg_catalog.nextval('slotted_counter.keys_id_seq'::pg_catalog.regclass) "
    "OPERATOR(pg_catalog.+) $1 OPERATOR(pg_catalog.-) 1)";

}  // namespace

void ReserveTextIds(Oid db, bool after_requests) {
  DatabaseSlot* slot = FindSlot(db);
  if (slot == nullptr) return;
  SpinMutex mutex{&slot->ids_mutex};
  // Read before the transaction: a range of a sequence that a drop of the extension took with it
  // carries the epoch that drop moved on from.
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  int64 n = TextIdsWanted(slot->text_ids, mutex, db, epoch, after_requests);
  if (n == 0) return;
  BeginWork(db);
  (void)set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
                          GUC_ACTION_LOCAL, true, 0, false);
  // Alone on the sequence until the commit: a flusher handing over may give ids by nextval
  // meanwhile, and none may fall between this nextval and its setval (ExclusiveLock conflicts
  // with the RowExclusiveLock that nextval holds to the end of its transaction).
  Oid sequence = get_relname_relid("keys_id_seq", get_namespace_oid("slotted_counter", false));
  if (!OidIsValid(sequence)) elog(ERROR, "slotted_counter.keys_id_seq is missing");
  LockRelationOid(sequence, ExclusiveLock);
  static const Oid types[1] = {INT8OID};
  Datum args[1] = {Int64GetDatum(n)};
  if (SPI_execute_plan(KeptPlan(&plan_reserve, kReserveSql, 1, types), args, nullptr, false, 1) !=
          SPI_OK_SELECT ||
      SPI_processed != 1)
    elog(ERROR, "reserving ids for text keys failed");
  bool isnull;
  int64 last = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                           &isnull));
  EndWork();
  RefillTextIds(slot->text_ids, mutex, db, last - n + 1, n, epoch);
}

// TextsGiven of slot written_slot when this flusher last wrote the ids backends gave between
// flushes.
DatabaseSlot* written_slot = nullptr;
uint64 written_at_given = 0;
MemoryContext given_context = nullptr;

void WriteGivenTextIds(Oid db) {
  DatabaseSlot* slot = FindSlot(db);
  if (slot == nullptr || !SharedKeysOn()) return;
  uint64 given = TextsGiven(slot->key_writes);
  uint64 between = GivenIdsBetweenWrites(uint64(shared->shared_key_sets) * kKeySetWays);
  if (slot == written_slot && given - written_at_given < between) return;
  if (given_context == nullptr)
    given_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter given ids",
                                          ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(given_context);
  BeginWork(db);
  (void)set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
                          GUC_ACTION_LOCAL, true, 0, false);
  int nids, nskipped;
  int32* skipped;
  int32* ids = LockLiveCounters(given_context, &nids, &skipped, &nskipped);
  UnwrittenKeys written = WriteUnwrittenKeys(db, ids, nids, given_context);
  EndWork();
  MarkKeysWritten(db, written);
  written_slot = slot;
  written_at_given = given;
}

int ServeWriteThroughs(Oid db) {
  auto requests = Requests();
  if (requests.open(db).load() == 0) return 0;
  MemoryContext caller = MemoryContextSwitchTo(WorkContext());
  auto* mine = static_cast<int*>(palloc(sizeof(int) * shared->max_requests));
  int n = requests.TakePending(db, MyProcPid, mine);
  if (n == 0) {
    MemoryContextSwitchTo(caller);
    return 0;
  }
  // Outcome per request: kRequestDone, kRequestFailed, or kRequestPending to retry later.
  auto* outcome = static_cast<uint32*>(palloc(sizeof(uint32) * n));
  auto* result = static_cast<int64*>(palloc0(sizeof(int64) * n));
  auto* code = static_cast<int*>(palloc0(sizeof(int) * n));
  // Ids alone need no wait for the WAL: a value that uses one is committed later, and its commit
  // (or its flush's) makes the WAL up to it durable, the ids' commit included.
  bool ids_only = true;
  int texts = 0;
  for (int j = 0; j < n; j++) {
    const ThroughRequest* r = &shared->requests[mine[j]].request;
    ids_only = ids_only && r->intern;
    if (r->intern) texts += r->nbatch;
  }
  // The ids backends gave texts that the intern requests name, and the counters of the values
  // written through (whose given ids are written with them), in this round's memory.
  UnwrittenKeys honored{static_cast<UnwrittenKey*>(palloc(sizeof(UnwrittenKey) * (texts + 1))), 0};
  auto* through_counters = static_cast<int32*>(palloc(sizeof(int32) * (n + 1)));
  int nthrough = 0;
  UnwrittenKeys given{nullptr, 0};
  MemoryContext round_context = CurrentMemoryContext;
  PG_TRY();
  {
    BeginWork(db);
    if (ids_only)
      (void)set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
                              GUC_ACTION_LOCAL, true, 0, false);
    static const Oid types[6] = {INT4OID, INT8OID,        TIMESTAMPTZOID,
                                 INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
    for (volatile int j = 0; j < n; j++) {
      // Taken: its fields stay as they are until this answers (write_through_request.hpp).
      const ThroughRequest* r = &shared->requests[mine[j]].request;
      Datum args[6] = {Int32GetDatum(r->key.counter), Int64GetDatum(r->key.key),
                       TimestampTzGetDatum(r->key.bucket), Int64GetDatum(r->delta),
                       TimestampTzGetDatum(StampToStore(r->write.stamp)),
                       TimestampTzGetDatum(r->write.cutoff)};
      int honored_before = honored.n;
      ErrorData* error = InSubtransaction([&] {
        // No row: the counter was dropped.
        bool done;
        if (r->intern) {
          done = InternTexts(db, mine[j], &honored);
          if (!done) code[j] = ERRCODE_QUERY_CANCELED;
        } else if (r->nbatch > 0) {
          done = WriteBatchThrough(mine[j]);
        } else {
          // Prepared only for such a request: a round of intern requests touches no
          // key_values, which a user's lock may hold.
          SPIPlanPtr plan = KeptPlan(&plan_write_through, kWriteThroughSql, 6, types);
          int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
          if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "write-through failed: %d", rc);
          done = SPI_processed == 1;
          bool isnull;
          if (done)
            result[j] = DatumGetInt64(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        }
        outcome[j] = done ? kRequestDone : kRequestFailed;
        if (!done && code[j] == 0) code[j] = ERRCODE_UNDEFINED_OBJECT;
      });
      // A request that failed wrote none of the ids it honored.
      if (error != nullptr || outcome[j] != kRequestDone) honored.n = honored_before;
      if (error == nullptr && outcome[j] == kRequestDone && !r->intern)
        through_counters[nthrough++] = r->key.counter;
      bool withdrawn = error != nullptr && requests.CancelRequested(mine[j]);
      if (error != nullptr &&
          (withdrawn || error->sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)) {
        outcome[j] = kRequestFailed;
        code[j] = withdrawn ? ERRCODE_QUERY_CANCELED : error->sqlerrcode;
        FreeErrorData(error);
      } else if (error != nullptr) {
        // A lock timeout or the like: keep the increment and try again on the next round.
        error->elevel = LOG;
        ThrowErrorData(error);
        outcome[j] = kRequestPending;
      }
    }
    // Values written through may use ids that backends gave: their rows go in this transaction.
    std::sort(through_counters, through_counters + nthrough);
    nthrough = int(std::unique(through_counters, through_counters + nthrough) - through_counters);
    given = WriteUnwrittenKeys(db, through_counters, nthrough, round_context);
    EndWork();
    EndKeysWrite();
  }
  PG_CATCH();
  {
    EndKeysWrite();
    for (int j = 0; j < n; j++) requests.GiveBack(mine[j]);
    PG_RE_THROW();
  }
  PG_END_TRY();

  // Committed: the rank indexes of their counters learn the rows written, once the requesters
  // are answered (read while the requests are still taken, so their fields are as they were). A
  // batch's keys go back to the tables: its index is built anew.
  auto* updates = static_cast<RankUpdate*>(palloc(sizeof(RankUpdate) * (n + 1)));
  auto* forgotten = static_cast<int32*>(palloc(sizeof(int32) * (n + 1)));
  int nupdates = 0, nforgotten = 0;
  for (int j = 0; j < n; j++) {
    const ThroughRequest* r = &shared->requests[mine[j]].request;
    if (outcome[j] != kRequestDone || r->intern || r->key.bucket != kNoBucket ||
        !RankIndexed(db, r->key.counter))
      continue;
    if (r->nbatch > 0)
      forgotten[nforgotten++] = r->key.counter;
    else
      updates[nupdates++] = RankUpdate{r->key.counter, r->key.key, result[j]};
  }
  MarkKeysWritten(db, honored);
  MarkKeysWritten(db, given);
  int served = 0;
  for (int j = 0; j < n; j++)
    served += requests.Finish(mine[j], RequestState(outcome[j]), result[j], code[j]);
  for (int j = 0; j < nforgotten; j++) ForgetRankIndex(db, forgotten[j]);
  if (nupdates > 0) ApplyRankUpdates(db, updates, nupdates);
  ReportStatistics();
  MemoryContextSwitchTo(caller);
  return served;
}

}  // namespace sc
