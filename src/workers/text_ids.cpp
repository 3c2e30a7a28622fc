// text_ids.cpp: the flusher's part in the ids that backends give new text keys (text_ids.hpp).
#include "workers/text_ids.hpp"

#include <algorithm>

#include "definitions/text_keys.hpp"
#include "spi.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

SPIPlanPtr plan_write = nullptr;
SPIPlanPtr plan_check = nullptr;

// The count of ids given (TextsGiven) of slot clean_slot when a scan last found no unwritten slot
// of this flusher's database; none yet.
DatabaseSlot* clean_slot = nullptr;
uint64 clean_at_given = 0;

// The writes of keys this flusher began (BeginKeysWrite) and has not ended: in this slot, of
// these groups.
DatabaseSlot* open_write_slot = nullptr;
uint32 open_groups = 0;
bool exit_callback_set = false;

void EndKeysWriteOnExit(int, Datum) { EndKeysWrite(); }

// The rows of ids given by backends: reserved for their texts alone, so a row there already is
// the same (see below).
const char* const kWriteSql =
    "INSERT INTO slotted_counter.keys (counter, id, key) "
    "SELECT k.counter, k.id, k.key FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int4[]), "
    "pg_catalog.unnest($2::pg_catalog.int8[]), pg_catalog.unnest($3::pg_catalog.text[])) "
    "AS k(counter, id, key) "
    "ON CONFLICT DO NOTHING";

// How many of those have no row of their own id and text.
const char* const kCheckSql =
    "SELECT pg_catalog.count(*) FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int4[]), "
    "pg_catalog.unnest($2::pg_catalog.int8[]), pg_catalog.unnest($3::pg_catalog.text[])) "
    "AS k(counter, id, key) WHERE NOT EXISTS (SELECT FROM slotted_counter.keys x "
    "WHERE x.counter OPERATOR(pg_catalog.=) k.counter AND x.id OPERATOR(pg_catalog.=) k.id "
    "AND x.key OPERATOR(pg_catalog.=) k.key)";

// The rows of `keys` by INSERT: one there already is skipped (and checked: see kCheckSql).
void InsertKeyRows(const UnwrittenKeys& out) {
  auto* counter_datums = static_cast<Datum*>(palloc(sizeof(Datum) * out.n));
  auto* id_datums = static_cast<Datum*>(palloc(sizeof(Datum) * out.n));
  auto* text_datums = static_cast<Datum*>(palloc(sizeof(Datum) * out.n));
  for (int i = 0; i < out.n; i++) {
    counter_datums[i] = Int32GetDatum(out.keys[i].counter);
    id_datums[i] = Int64GetDatum(out.keys[i].id);
    text_datums[i] = PointerGetDatum(cstring_to_text_with_len(out.keys[i].text, out.keys[i].len));
  }
  static const Oid types[3] = {INT4ARRAYOID, INT8ARRAYOID, TEXTARRAYOID};
  Datum args[3] = {
      PointerGetDatum(construct_array(counter_datums, out.n, INT4OID, 4, true, TYPALIGN_INT)),
      PointerGetDatum(construct_array(id_datums, out.n, INT8OID, 8, FLOAT8PASSBYVAL,
                                      TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(text_datums, out.n, TEXTOID, -1, false, TYPALIGN_INT))};
  if (SPI_execute_plan(KeptPlan(&plan_write, kWriteSql, 3, types), args, nullptr, false, 0) !=
      SPI_OK_INSERT)
    elog(ERROR, "writing the ids of new text keys failed");
  // Rows there already: the same id and text (an intern request of this round honoured it, or
  // a flusher handing over wrote it) is expected; a text with another id is a fault, said here.
  if (SPI_processed != uint64(out.n)) {
    if (SPI_execute_plan(KeptPlan(&plan_check, kCheckSql, 3, types), args, nullptr, true, 1) !=
            SPI_OK_SELECT ||
        SPI_processed != 1)
      elog(ERROR, "checking the ids of new text keys failed");
    bool isnull;
    int64 other = DatumGetInt64(
        SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    if (other > 0)
      ereport(WARNING, (errmsg("slotted_counter: %lld ids given to new text keys conflict with "
                               "the rows of their texts",
                               (long long)other)));
  }
}

}  // namespace

UnwrittenKeys WriteUnwrittenKeys(Oid db, const int32* counters, int ncounters,
                                 MemoryContext context) {
  UnwrittenKeys out{nullptr, 0};
  if (!SharedKeysOn() || ncounters == 0) return out;
  auto live = [&](int32 counter) {
    return std::binary_search(counters, counters + ncounters, counter);
  };
  // Copied into room allocated outside the locks; more given meanwhile than there is room for:
  // copied again into more room, so that every slot unwritten when this began is written (a
  // slot given later may go too).
  // Nothing given since a scan found none unwritten: no scan (text_ids.hpp: NoteTextGiven).
  DatabaseSlot* slot = FindSlot(db);
  uint64 given = slot != nullptr ? TextsGiven(slot->key_writes) : 0;
  if (slot != nullptr && slot == clean_slot && given == clean_at_given) return out;
  int room = 0, unwritten = 0;
  SharedKeys().ForEachUnwritten(db, [&](const SharedKeySlot& s) {
    unwritten++;
    if (live(s.counter)) room++;
  });
  if (unwritten == 0 && slot != nullptr) {
    clean_slot = slot;
    clean_at_given = given;
  }
  if (room == 0) return out;
  for (;;) {
    out.keys = static_cast<UnwrittenKey*>(MemoryContextAlloc(context, sizeof(UnwrittenKey) * room));
    int found = 0;
    out.n = 0;
    SharedKeys().ForEachUnwritten(db, [&](const SharedKeySlot& s) {
      if (!live(s.counter) || found++ >= room) return;
      UnwrittenKey& k = out.keys[out.n++];
      k.hash = s.hash;
      k.id = s.id;
      k.counter = s.counter;
      k.len = s.len;
      memcpy(k.text, s.text, s.len);
    });
    if (found <= room) break;
    pfree(out.keys);
    room = found + found / 4;
  }
  // By COPY, in a subtransaction: a row there already (23505), or a text that fails COPY's
  // encoding check (22021; or a flusher whose client_encoding is not the database's), and all
  // of them go in by the INSERT below instead.
  if (pg_get_client_encoding() == GetDatabaseEncoding()) {
    auto* rows = static_cast<KeyRow*>(palloc(sizeof(KeyRow) * out.n));
    for (int i = 0; i < out.n; i++)
      rows[i] = KeyRow{out.keys[i].counter, out.keys[i].id, out.keys[i].text, out.keys[i].len};
    ErrorData* error = InSubtransaction([&] { CopyKeyRows(rows, out.n); });
    pfree(rows);
    if (error == nullptr) return out;
    if (error->sqlerrcode != ERRCODE_UNIQUE_VIOLATION &&
        error->sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE)
      ReThrowError(error);
    FreeErrorData(error);
  }
  InsertKeyRows(out);
  return out;
}

void MarkKeysWritten(Oid db, const UnwrittenKeys& written) {
  if (written.n == 0) return;
  // A giver that read the writes before this commit was visible looks again (text_ids.hpp).
  if (DatabaseSlot* slot = FindSlot(db)) {
    uint32 groups = 0;
    for (int i = 0; i < written.n; i++) groups |= 1u << KeyWriteGroup(written.keys[i].hash);
    for (uint32 g = 0; g < kKeyCacheLocks; g++)
      if (groups & (1u << g)) NoteKeysWritten(slot->key_writes, g);
  }
  for (int i = 0; i < written.n; i++)
    SharedKeys().MarkWritten(db, written.keys[i].counter, written.keys[i].hash,
                             written.keys[i].id);
}

void BeginKeysWrite(Oid db, uint64 hash) {
  if (!exit_callback_set) {
    before_shmem_exit(EndKeysWriteOnExit, 0);
    exit_callback_set = true;
  }
  DatabaseSlot* slot = FindSlot(db);
  if (slot == nullptr) return;
  // The database's slot changed within a round (a flusher that left and came back): the writes
  // begun stay on the first, where they end.
  if (open_write_slot != nullptr && open_write_slot != slot) return;
  uint32 group = KeyWriteGroup(hash);
  if (open_write_slot == slot && (open_groups & (1u << group)) != 0) return;
  BeginKeyWrite(slot->key_writes, group);
  open_write_slot = slot;
  open_groups |= 1u << group;
}

void EndKeysWrite() {
  if (open_write_slot == nullptr) return;
  for (uint32 g = 0; g < kKeyCacheLocks; g++)
    if (open_groups & (1u << g)) EndKeyWrite(open_write_slot->key_writes, g);
  open_write_slot = nullptr;
  open_groups = 0;
}

int64 GivenTextId(Oid db, int32 counter, const char* text, int len) {
  if (!SharedKeysOn() || uint32(len) > kSharedKeyText) return 0;
  uint64 hash = TextKeyHash(counter, text, len);
  BeginKeysWrite(db, hash);
  // Under epoch 0, which no written slot has: only an unwritten one matches.
  return SharedKeys().Find(db, counter, hash, text, uint32(len), 0);
}

}  // namespace sc
