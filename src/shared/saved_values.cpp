// saved_values.cpp: a clean shutdown never loses an acknowledged increment.
//
// At shutdown each flusher flushes one last time; when that cannot write (a full disk, a lock a
// prepared transaction keeps, any error) its values stay in the buffer, dirty. After every other
// process has exited, and only if the shutdown checkpoint was written, the postmaster writes each
// dirty entry of the buffer -- its key, its value, the part of it the tables hold and the time
// of its last write -- to
// pg_stat/slotted_counter.unflushed (written to a temporary file, synced, renamed), as
// pg_stat_statements keeps its state across a clean restart, together with the request ids of
// buffered sc_incr_once calls whose increments are among them (request_ids.hpp): restored
// beside their increments, they are written by the same flush, so a call retried after the
// restart still counts once, and the ids that backends gave new text keys whose rows no flush
// wrote yet (core/shared_key_cache.hpp: unwritten slots; the values that use them are among the
// saved ones), so that those values keep their texts. Nothing else runs then, so the buffer and
// the shared key cache are read without locks.
//
// The next start reads the file in _PG_init, registers a flusher for each database it names, and,
// as the shared state is created (before any other process exists), links each entry back into
// the buffer exactly as it was, then removes the file. The sum entries of sc_total
// (counter_table.hpp) are not saved: they are made again from the entries linked back. Readers find the values resident; the
// flusher writes each one's unflushed part like any dirty entry (its first flush scans the whole
// buffer). The tables cannot have changed in between: they are written only by flushers and by
// commands on counters, and neither ran.
//
// A file that does not match the start is not applied, and the log says what it held, counter by
// counter: another cluster's, or one whose shutdown checkpoint is not the one this start begins
// from (a restored backup, pg_resetwal), or a start in recovery (standby.signal or
// recovery.signal: a standby cannot write, and its primary never had these values). The same
// report is made at shutdown when the file cannot be written. A crash after a start loses what
// the file held if no flush wrote it yet, as a crash loses the last interval of any database.
#include "shared/saved_values.hpp"

extern "C" {
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
}

#include "shared/shmem.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/request_ids.hpp"

namespace sc {

namespace {

const char* const kFile = "pg_stat/slotted_counter.unflushed";
const char* const kTempFile = "pg_stat/slotted_counter.unflushed.tmp";
constexpr uint32 kMagic = 0x53435556;  // "SCUV"
constexpr uint32 kFormat = 4;

// The file: the header, count SavedValues, ids RequestIdEntry, texts SharedKeySlot, and the
// CRC-32C of all of it.
struct FileHeader {
  uint32 magic;
  uint32 format;
  uint64 system_identifier;
  uint64 checkpoint;  // the shutdown checkpoint written before the file
  uint64 count;
  uint64 ids;
  uint64 texts;
};

struct SavedValue {
  Oid db;
  int32 counter;
  int64 key;
  int64 bucket;
  int64 value;       // Entry::value
  int64 flushed;     // Entry::flushed: what the tables hold
  int64 last_write;  // Entry::last_write
  bool stamp_dirty;  // Entry::stamp_dirty: the tables lack last_write
};

// Read by ReadSavedValues, restored and freed by RestoreSavedValues (postmaster memory).
SavedValue* saved = nullptr;
uint64 nsaved = 0;
RequestIdEntry* saved_ids = nullptr;
uint64 nsaved_ids = 0;
SharedKeySlot* saved_texts = nullptr;
uint64 nsaved_texts = 0;

// Logs that ids given to new text keys are forgotten: the values that use them have no text.
void LogLostTexts(uint64 n, const char* why) {
  if (n == 0) return;
  ereport(WARNING, (errmsg("slotted_counter: %llu ids given to new text keys of buffered counters "
                           "are forgotten: %s",
                           (unsigned long long)n, why),
                    errdetail("Their values are counted in their counters' totals, under keys "
                              "that have no text.")));
}

int CompareByCounter(const void* a, const void* b) {
  const auto* x = static_cast<const SavedValue*>(a);
  const auto* y = static_cast<const SavedValue*>(b);
  if (x->db != y->db) return x->db < y->db ? -1 : 1;
  if (x->counter != y->counter) return x->counter < y->counter ? -1 : 1;
  return 0;
}

// Logs that the request ids of sc_incr_once calls are forgotten: a retry of them counts again.
void LogLostIds(uint64 n, const char* why) {
  if (n == 0) return;
  ereport(WARNING, (errmsg("slotted_counter: %llu request ids of buffered sc_incr_once calls are "
                           "forgotten: %s",
                           (unsigned long long)n, why),
                    errdetail("A call repeated with one of them counts again.")));
}

// Logs, counter by counter, the increments of values that will never reach the tables.
void LogLosses(SavedValue* values, uint64 n, const char* why) {
  if (n == 0) return;
  qsort(values, n, sizeof(SavedValue), CompareByCounter);
  int64 total = 0;
  for (uint64 i = 0; i < n; i++) total += values[i].value - values[i].flushed;
  ereport(WARNING,
          (errmsg("slotted_counter: %llu unflushed values (a net change of %lld) are lost: %s",
                  (unsigned long long)n, (long long)total, why),
           errhint("The lines that follow name each counter by database OID and counter id "
                   "(slotted_counter.counters.id in that database).")));
  constexpr int kMaxLines = 100;
  int lines = 0;
  for (uint64 i = 0; i < n;) {
    uint64 j = i;
    int64 change = 0;
    for (; j < n && CompareByCounter(&values[i], &values[j]) == 0; j++)
      change += values[j].value - values[j].flushed;
    if (lines++ < kMaxLines)
      ereport(WARNING, (errmsg("slotted_counter: lost in database %u, counter id %d: a net change "
                               "of %lld over %llu keys",
                               values[i].db, values[i].counter, (long long)change,
                               (unsigned long long)(j - i))));
    i = j;
  }
  if (lines > kMaxLines)
    ereport(WARNING, (errmsg("slotted_counter: and %d more counters lost values",
                             lines - kMaxLines)));
}

// Why a file saved at shutdown may not be applied by this start; nullptr if it may.
const char* Mismatch(const FileHeader& h) {
  bool crc_ok = false;
  ControlFileData* control = get_controlfile(DataDir, &crc_ok);
  const char* why = nullptr;
  if (!crc_ok)
    why = "the control file cannot be read";
  else if (control->system_identifier != h.system_identifier)
    why = "the file was saved by another cluster";
  else if (control->state != DB_SHUTDOWNED || control->checkPoint != h.checkpoint)
    why = "the server does not start from the shutdown that saved them (a restored backup, a "
          "crash after that shutdown, or pg_resetwal)";
  else if (access(STANDBY_SIGNAL_FILE, F_OK) == 0 || access(RECOVERY_SIGNAL_FILE, F_OK) == 0)
    why = "the server starts in recovery (standby.signal or recovery.signal): a standby cannot "
          "write them";
  pfree(control);
  return why;
}

bool ReadAll(FILE* f, void* data, size_t size, pg_crc32c* crc) {
  if (size > 0 && fread(data, size, 1, f) != 1) return false;
  COMP_CRC32C(*crc, data, size);
  return true;
}

}  // namespace

void ReadSavedValues() {
  FILE* f = AllocateFile(kFile, PG_BINARY_R);
  if (f == nullptr) {
    if (errno != ENOENT)
      ereport(WARNING, (errcode_for_file_access(),
                        errmsg("could not read file \"%s\": %m", kFile),
                        errdetail("Values that the last shutdown could not flush are not "
                                  "restored; the file is left as it is.")));
    return;
  }
  FileHeader h;
  pg_crc32c crc;
  INIT_CRC32C(crc);
  bool ok = ReadAll(f, &h, sizeof(h), &crc) && h.magic == kMagic && h.format == kFormat &&
            h.count <= MaxAllocHugeSize / sizeof(SavedValue) &&
            h.ids <= MaxAllocHugeSize / sizeof(RequestIdEntry) &&
            h.texts <= MaxAllocHugeSize / sizeof(SharedKeySlot);
  SavedValue* values = nullptr;
  RequestIdEntry* ids = nullptr;
  SharedKeySlot* texts = nullptr;
  if (ok) {
    values = static_cast<SavedValue*>(MemoryContextAllocExtended(
        TopMemoryContext, Max(h.count, 1) * sizeof(SavedValue),
        MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
    ids = static_cast<RequestIdEntry*>(MemoryContextAllocExtended(
        TopMemoryContext, Max(h.ids, 1) * sizeof(RequestIdEntry),
        MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
    texts = static_cast<SharedKeySlot*>(MemoryContextAllocExtended(
        TopMemoryContext, Max(h.texts, 1) * sizeof(SharedKeySlot),
        MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
    pg_crc32c stored;
    ok = values != nullptr && ids != nullptr && texts != nullptr &&
         ReadAll(f, values, h.count * sizeof(SavedValue), &crc) &&
         ReadAll(f, ids, h.ids * sizeof(RequestIdEntry), &crc) &&
         ReadAll(f, texts, h.texts * sizeof(SharedKeySlot), &crc) &&
         fread(&stored, sizeof(stored), 1, f) == 1;
    FIN_CRC32C(crc);
    ok = ok && EQ_CRC32C(crc, stored);
  }
  FreeFile(f);
  if (!ok) {
    ereport(WARNING, (errmsg("slotted_counter: file \"%s\" is damaged or of another version; the "
                             "values it held are lost", kFile)));
    if (values != nullptr) pfree(values);
    if (ids != nullptr) pfree(ids);
    if (texts != nullptr) pfree(texts);
    (void)unlink(kFile);
    return;
  }
  if (const char* why = Mismatch(h)) {
    LogLosses(values, h.count, why);
    LogLostIds(h.ids, why);
    LogLostTexts(h.texts, why);
    pfree(values);
    pfree(ids);
    pfree(texts);
    (void)unlink(kFile);
    return;
  }
  saved = values;
  nsaved = h.count;
  saved_ids = ids;
  nsaved_ids = h.ids;
  saved_texts = texts;
  nsaved_texts = h.texts;
  qsort(saved, nsaved, sizeof(SavedValue), CompareByCounter);
  for (uint64 i = 0; i < nsaved; i++)
    if (i == 0 || saved[i].db != saved[i - 1].db) RegisterFlusherAtStart(saved[i].db);
  // A database with saved texts and no saved value gets its flusher too, to write them.
  auto* dbs = static_cast<Oid*>(palloc(sizeof(Oid) * (nsaved_texts + 1)));
  int ndbs = 0;
  for (uint64 j = 0; j < nsaved_texts; j++) {
    Oid db = saved_texts[j].db;
    bool named = false;
    for (int k = 0; k < ndbs && !named; k++) named = dbs[k] == db;
    if (named) continue;
    dbs[ndbs++] = db;
    SavedValue probe{db, 0, 0, 0, 0, 0, 0, false};
    auto by_db = [](const void* a, const void* b) {
      Oid x = static_cast<const SavedValue*>(a)->db, y = static_cast<const SavedValue*>(b)->db;
      return x < y ? -1 : x > y ? 1 : 0;
    };
    if (nsaved == 0 || bsearch(&probe, saved, nsaved, sizeof(SavedValue), by_db) == nullptr)
      RegisterFlusherAtStart(db);
  }
  pfree(dbs);
}

void RestoreSavedValues() {
  if (saved == nullptr) return;
  CounterTable* t = shared->table;
  uint64 restored = 0;
  for (; restored < nsaved; restored++) {
    const SavedValue& v = saved[restored];
    CounterKey k{v.db, v.counter, v.key, v.bucket};
    uint32 hash = HashCounterKey(k);
    uint32 p = CounterTable::PartitionOf(hash);
    // The sum entry of its (counter, bucket) in its partition gets what it holds beyond its row
    // (counter_table.hpp: sum entries; they are not saved, but made again here).
    uint32 sum_index = t->Find(SumKeyOf(k, p), SumHash(k.db, k.counter, p));
    if (sum_index == kNil) {
      sum_index = t->Allocate();
      if (sum_index == kNil) break;
      Entry& sum = t->at(sum_index);
      sum.id = SumKeyOf(k, p);
      sum.hash.store(SumHash(k.db, k.counter, p), std::memory_order_relaxed);
      sum.value.store(0, std::memory_order_relaxed);
      sum.flushed.store(0, std::memory_order_relaxed);
      sum.state.store(kResident, std::memory_order_relaxed);
      t->Link(sum_index);
    }
    uint32 index = t->Allocate();
    if (index == kNil) break;
    Entry& e = t->at(index);
    Protocol<PartitionLocks>::AddDifferenceToSum(t->at(sum_index), v.value, v.flushed);
    e.id = k;
    e.value.store(v.value, std::memory_order_relaxed);
    e.flushed.store(v.flushed, std::memory_order_relaxed);
    e.row.store(0, std::memory_order_relaxed);
    e.last_write.store(v.last_write, std::memory_order_relaxed);
    e.stamp_dirty.store(v.stamp_dirty ? 1 : 0, std::memory_order_relaxed);
    e.hash.store(hash, std::memory_order_relaxed);
    e.state.store(kResident, std::memory_order_relaxed);
    t->Link(index);
  }
  if (restored > 0)
    ereport(LOG, (errmsg("slotted_counter: restored %llu values that the last shutdown could not "
                         "flush; the flusher of each database writes them",
                         (unsigned long long)restored)));
  LogLosses(saved + restored, nsaved - restored,
            "slotted_counter.max_entries is too small to hold them all");
  // An id goes back only with every value: one without its increment would make a retry of a
  // call whose increment was lost count nothing.
  // Each id goes to the part of the table its hash names: one part full does not stop the others
  // (the parts may be cut otherwise than when they were saved).
  uint64 restored_ids = 0;
  if (restored == nsaved)
    for (uint64 j = 0; j < nsaved_ids; j++)
      if (RestoreRequestId(shared->request_ids, saved_ids[j])) restored_ids++;
  LogLostIds(nsaved_ids - restored_ids,
             restored == nsaved ? "slotted_counter.max_request_ids is too small to hold them all"
                                : "not every value they belong to could be restored");
  // The texts of the ids backends gave, unwritten as they were, under the new start's epoch.
  uint64 restored_texts = 0;
  if (SharedKeysOn())
    for (uint64 j = 0; j < nsaved_texts; j++)
      if (SharedKeys().RestoreUnwrittenUnlocked(saved_texts[j],
                                                pg_atomic_read_u64(&shared->catalog_epoch)))
        restored_texts++;
  LogLostTexts(nsaved_texts - restored_texts,
               SharedKeysOn() ? "slotted_counter.shared_text_keys is too small to hold them all"
                              : "slotted_counter.shared_text_keys is 0");
  pfree(saved_texts);
  saved_texts = nullptr;
  nsaved_texts = 0;
  pfree(saved);
  saved = nullptr;
  nsaved = 0;
  pfree(saved_ids);
  saved_ids = nullptr;
  nsaved_ids = 0;
  if (unlink(kFile) != 0 && errno != ENOENT)
    ereport(WARNING, (errcode_for_file_access(), errmsg("could not remove file \"%s\": %m", kFile)));
}

void SaveUnflushedValues(int code, Datum) {
  // Not after a crash or an immediate shutdown: a flush may have committed values its flusher
  // did not mark flushed yet.
  if (code != 0 || shared == nullptr) return;
  CounterTable* t = shared->table;
  auto* ids = static_cast<RequestIdEntry*>(MemoryContextAllocExtended(
      TopMemoryContext, Max(shared->request_ids->capacity, 1u) * sizeof(RequestIdEntry),
      MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  uint64 nids = ids != nullptr ? CopyUnflushedRequestIds(shared->request_ids, ids) : 0;
  uint32 key_slots = shared->shared_key_sets * kKeySetWays;
  auto* texts = static_cast<SharedKeySlot*>(MemoryContextAllocExtended(
      TopMemoryContext, Max(key_slots, 1u) * sizeof(SharedKeySlot),
      MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  uint64 ntexts = texts != nullptr && SharedKeysOn()
                      ? SharedKeys().CopyUnwrittenUnlocked(texts, key_slots)
                      : 0;
  uint64 n = 0;
  uint64 sketches = 0;
  // Not the sum entries: made again from the keys' values at the start. Not the keys of distinct
  // counters either: their value only says that their sketch differs from the table's, and the
  // sketch is not saved (a clean shutdown that could not flush loses it, as a crash would).
  auto saved = [&](uint32 i, const Entry& e) {
    if (e.state.load() != kResident || IsSum(e.id) || CounterTable::Clean(e)) return false;
    return shared->sketches->BlockOf(i, e.generation.load()) == kNil;
  };
  for (uint32 i = 0; i < t->capacity(); i++) {
    const Entry& e = t->at(i);
    if (saved(i, e))
      n++;
    else if (e.state.load() == kResident && !IsSum(e.id) && !CounterTable::Clean(e))
      sketches++;
  }
  if (sketches > 0)
    ereport(WARNING, (errmsg("slotted_counter: the unflushed adds to %llu keys of distinct "
                             "counters are lost: sketches are not saved at shutdown",
                             (unsigned long long)sketches)));
  if (n == 0 && nids == 0 && ntexts == 0) return;
  auto* values = static_cast<SavedValue*>(
      MemoryContextAllocExtended(TopMemoryContext, Max(n, 1) * sizeof(SavedValue),
                                 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  if (values == nullptr || ids == nullptr || texts == nullptr) {
    ereport(WARNING, (errmsg("slotted_counter: %llu unflushed values are lost: out of memory",
                             (unsigned long long)n)));
    LogLostIds(nids, "out of memory");
    LogLostTexts(ntexts, "out of memory");
    return;
  }
  uint64 k = 0;
  for (uint32 i = 0; i < t->capacity() && k < n; i++) {
    const Entry& e = t->at(i);
    if (saved(i, e))
      values[k++] = SavedValue{e.id.db,         e.id.counter,     e.id.key,
                               e.id.bucket,     e.value.load(),   e.flushed.load(),
                               e.last_write.load(), e.stamp_dirty.load() != 0};
  }

  bool crc_ok = false;
  ControlFileData* control = get_controlfile(DataDir, &crc_ok);
  if (!crc_ok || control->state != DB_SHUTDOWNED) {
    LogLosses(values, n, "the server did not write its shutdown checkpoint");
    LogLostIds(nids, "the server did not write its shutdown checkpoint");
    LogLostTexts(ntexts, "the server did not write its shutdown checkpoint");
    return;
  }
  FileHeader h{kMagic, kFormat, control->system_identifier, control->checkPoint, n, nids, ntexts};
  pg_crc32c crc;
  INIT_CRC32C(crc);
  COMP_CRC32C(crc, &h, sizeof(h));
  COMP_CRC32C(crc, values, n * sizeof(SavedValue));
  COMP_CRC32C(crc, ids, nids * sizeof(RequestIdEntry));
  COMP_CRC32C(crc, texts, ntexts * sizeof(SharedKeySlot));
  FIN_CRC32C(crc);
  FILE* f = AllocateFile(kTempFile, PG_BINARY_W);
  bool ok = f != nullptr && fwrite(&h, sizeof(h), 1, f) == 1 &&
            (n == 0 || fwrite(values, n * sizeof(SavedValue), 1, f) == 1) &&
            (nids == 0 || fwrite(ids, nids * sizeof(RequestIdEntry), 1, f) == 1) &&
            (ntexts == 0 || fwrite(texts, ntexts * sizeof(SharedKeySlot), 1, f) == 1) &&
            fwrite(&crc, sizeof(crc), 1, f) == 1;
  if (f != nullptr && FreeFile(f) != 0) ok = false;
  if (ok) ok = durable_rename(kTempFile, kFile, LOG) == 0;
  if (!ok) {
    int saved_errno = errno;
    (void)unlink(kTempFile);
    errno = saved_errno;
    char why[256];
    snprintf(why, sizeof(why), "could not write file \"%s\": %s", kFile, strerror(saved_errno));
    LogLosses(values, n, why);
    LogLostIds(nids, why);
    LogLostTexts(ntexts, why);
    return;
  }
  ereport(LOG, (errmsg("slotted_counter: saved %llu values that could not be flushed, %llu "
                       "request ids and %llu ids of new text keys to \"%s\"; the next start "
                       "restores them",
                       (unsigned long long)n, (unsigned long long)nids,
                       (unsigned long long)ntexts, kFile)));
}

}  // namespace sc
