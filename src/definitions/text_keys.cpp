// text_keys.cpp: the ids of text keys (text_keys.hpp): the backend's cache, the look-up in
// slotted_counter.keys, and the request that asks the flusher for new ids.
#include "definitions/text_keys.hpp"

#include "core/key_cache.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"
#include "definitions/changes.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/stored_keys.hpp"
#include "shared/write_through.hpp"

namespace sc {

namespace {

// The cache starts small and grows to kMaxSlots (three quarters of which hold keys, with their
// texts: about 100,000 keys, 40 bytes a slot plus each text); full at that size, it starts over.
constexpr uint32 kFirstSlots = 1024;
constexpr uint32 kMaxSlots = 1 << 17;

// An intern request no flusher took within this long is withdrawn (53400), as a batch's is.
constexpr int kInternWaitMs = 10000;

MemoryContext cache_context = nullptr;
KeyCache cache;
uint32 cache_slots = 0;
uint64 cache_epoch = 0;

void MakeCache(uint32 slots) {
  if (cache_context == nullptr)
    cache_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter text keys",
                                          ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(cache_context);
  auto* memory = static_cast<CachedKey*>(
      MemoryContextAllocHuge(cache_context, sizeof(CachedKey) * slots));
  cache.Reset(memory, slots);
  cache_slots = slots;
}

// The cache, emptied if a counter was dropped since it was filled: an id of a dropped counter
// (or of a dropped extension, whose counter ids start again) must not be found.
void ValidateCache() {
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  if (!cache.Ready() || epoch != cache_epoch) MakeCache(kFirstSlots);
  cache_epoch = epoch;
}

void Remember(int32 counter, uint64 hash, const char* key, int len, int64 id) {
  if (cache.Full()) MakeCache(Min(cache_slots * 4, kMaxSlots));
  char* copy = static_cast<char*>(MemoryContextAlloc(cache_context, len + 1));
  memcpy(copy, key, len);
  cache.Insert(counter, hash, copy, uint32(len), id);
}

// The id the backends share for the text (core/shared_key_cache.hpp), found or given under
// catalog epoch `epoch`; or kUnwrittenKey.
int64 FindShared(int32 counter, uint64 hash, const char* key, int len, uint64 epoch) {
  if (!SharedKeysOn()) return kUnwrittenKey;
  return SharedKeys().Find(MyDatabaseId, counter, hash, key, uint32(len), epoch);
}

void Share(int32 counter, uint64 hash, const char* key, int len, uint64 epoch, int64 id) {
  if (SharedKeysOn()) SharedKeys().Insert(MyDatabaseId, counter, hash, key, uint32(len), epoch, id);
}

// The columns of slotted_counter.keys (counter, id, key), as the table numbers them.
constexpr AttrNumber kIdColumn = 2;
constexpr AttrNumber kKeyColumn = 3;

// Column `column` of the row of slotted_counter.keys of `counter` whose column `attribute` equals
// `value` (by `equal`, under `collation`), found with index `index_name` under the latest
// snapshot (ReadLatestRow), copied into the caller's context (a text detoasted while the row is
// pinned), or 0 with *found false.
struct KeyColumn {
  AttrNumber column;
  bool found;
  Datum value;
};

void CopyKeyColumn(HeapTuple tuple, TupleDesc desc, void* arg) {
  auto* out = static_cast<KeyColumn*>(arg);
  bool isnull;
  Form_pg_attribute form = TupleDescAttr(desc, out->column - 1);
  Datum stored = heap_getattr(tuple, out->column, desc, &isnull);
  if (isnull) return;
  Assert(form->attbyval || form->attlen == -1);
  out->value = form->attbyval ? stored
                              : PointerGetDatum(pg_detoast_datum_copy(
                                    reinterpret_cast<struct varlena*>(DatumGetPointer(stored))));
  out->found = true;
}

Datum LookUpKeys(const char* index_name, int32 counter, AttrNumber attribute, RegProcedure equal,
                 Oid collation, Datum value, AttrNumber column, bool* found) {
  ScanKeyData keys[2];
  ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_INT4EQ,
                         Int32GetDatum(counter));
  ScanKeyEntryInitialize(&keys[1], 0, attribute, BTEqualStrategyNumber, InvalidOid, collation,
                         equal, value);
  KeyColumn out{column, false, 0};
  (void)ReadLatestRow("keys", index_name, keys, 2, CopyKeyColumn, &out);
  *found = out.found;
  return out.value;
}

// The stored id of the text, or kUnwrittenKey: without the probe when the filter of stored keys
// says the text never had a row (shared/stored_keys.hpp).
int64 StoredId(int32 counter, const char* key, int len) {
  if (StoredKeysInUse(MyDatabaseId) &&
      !StoredBytesMayExist(kKeysTable, counter, key, len, ExtensionRelation("key_values")))
    return kUnwrittenKey;
  text* probe = cstring_to_text_with_len(key, len);
  bool found;
  Datum id = LookUpKeys("keys_counter_key", counter, kKeyColumn, F_TEXTEQ, C_COLLATION_OID,
                        PointerGetDatum(probe), kIdColumn, &found);
  pfree(probe);
  return found ? DatumGetInt64(id) : kUnwrittenKey;
}

// Tries at most this often to give a text an id of its own when the key writes moved meanwhile.
constexpr int kGiveAttempts = 3;

// The id of a text of a buffered counter that this backend found nowhere but in the table, which
// it probes here: the stored one, or one of the database's range given here (core/text_ids.hpp,
// core/shared_key_cache.hpp: Give), the flusher writing its row with the values that use it; or
// kUnwrittenKey, when the flusher must give it (no range, no room, a write of keys in progress).
int64 StoredOrGivenId(const CounterDef& def, uint64 hash, const char* key, int len,
                      uint64 epoch) {
  DatabaseSlot* slot =
      SharedKeysOn() && uint32(len) <= kSharedKeyText ? FindSlot(MyDatabaseId) : nullptr;
  if (slot == nullptr) return StoredId(def.id, key, len);
  SpinMutex ids_mutex{&slot->ids_mutex};
  uint32 group = KeyWriteGroup(hash);
  for (int attempt = 0; attempt < kGiveAttempts; attempt++) {
    // Read before the probe: a row the probe could miss is one written after (text_ids.hpp).
    KeyWritesSeen seen = ReadKeyWrites(slot->key_writes, group);
    int64 stored = StoredId(def.id, key, len);
    if (stored != kUnwrittenKey || !seen.Quiet()) return stored;
    bool low;
    int64 id = TakeTextId(slot->text_ids, ids_mutex, MyDatabaseId, epoch, &low);
    if (id == 0) return kUnwrittenKey;  // the request for its id wakes the flusher
    if (low) WakeFlusher(slot);
    // Counted before the slot is filled: another backend may use the id as soon as it is, and a
    // flush must not skip it (text_ids.hpp: NoteTextGiven).
    if (NoteTextGiven(slot->key_writes) %
            GivenIdsBetweenWrites(uint64(shared->shared_key_sets) * kKeySetWays) ==
        0)
      WakeFlusher(slot);
    Given given = SharedKeys().Give(MyDatabaseId, def.id, hash, key, uint32(len), epoch, id, [&] {
      return pg_atomic_read_u64(&shared->catalog_epoch) == epoch &&
             FindSlot(MyDatabaseId) == slot &&
             KeyWritesUnchanged(slot->key_writes, group, seen);
    });
    if (given.result == GiveResult::kGiven) NoteTextFilled(slot->key_writes);
    if (given.result == GiveResult::kGiven || given.result == GiveResult::kFound)
      return given.id;
    if (given.result == GiveResult::kNoRoom) return kUnwrittenKey;
  }
  return kUnwrittenKey;
}

// Asks the flusher for the ids of the n texts (keys[want[i]]) and puts them in ids[want[i]].
// Waits with interrupts held, as a batch written through does: a cancel withdraws a request no
// flusher took yet, and one taken is answered soon (an insert of a few rows).
void Intern(const CounterDef& def, const char* const* keys, const int* lens, const int* want,
            int n, int64* ids) {
  Size size = sizeof(InternItem) * Size(n);
  for (int i = 0; i < n; i++) size += Size(lens[want[i]]);
  // The request's own room when the texts fit (a call's one new text, most often), else a
  // segment; the room is the request's once FreeRequest returned it.
  WriteThroughRequest* r = FreeRequest();
  dsm_segment* segment = size <= Size(kInlineInternBytes) ? nullptr : dsm_create(size, 0);
  char* base = segment != nullptr ? static_cast<char*>(dsm_segment_address(segment))
                                  : r->inline_intern;
  auto* items = reinterpret_cast<InternItem*>(base);
  uint32 offset = uint32(sizeof(InternItem) * Size(n));
  for (int i = 0; i < n; i++) {
    int j = want[i];
    items[i] = InternItem{kUnwrittenKey, offset, uint32(lens[j])};
    memcpy(base + offset, keys[j], lens[j]);
    offset += uint32(lens[j]);
  }
  HOLD_INTERRUPTS();
  PublishIntern(r, def.id, n, segment != nullptr ? dsm_segment_handle(segment) : 0,
                CreatorOf(def.id));
  RequestAnswer answer = AwaitAnswer(r, true, kInternWaitMs);
  RESUME_INTERRUPTS();
  if (answer.state != kRequestDone) {
    if (segment != nullptr) dsm_detach(segment);
    CHECK_FOR_INTERRUPTS();
    if (answer.sqlerrcode == ERRCODE_UNDEFINED_OBJECT) ReportUnknownCounter(def.name);
    if (answer.sqlerrcode == ERRCODE_QUERY_CANCELED)
      ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                      errmsg("canceling statement due to user request")));
    ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                    errmsg("no flusher gave ids to %d new keys of counter \"%s\"", n, def.name),
                    errdetail("A new text key is given its id by the flusher of the database, "
                              "and none took the request within %d seconds; nothing was "
                              "counted.",
                              kInternWaitMs / 1000)));
  }
  for (int i = 0; i < n; i++) {
    Assert(items[i].id > 0);
    ids[want[i]] = items[i].id;
  }
  if (segment != nullptr) dsm_detach(segment);
}

// A text with no id yet, at index `index` of a call's keys.
struct MissingKey {
  const char* key;
  int len;
  int index;
};

int CompareMissing(const void* a, const void* b) {
  auto* x = static_cast<const MissingKey*>(a);
  auto* y = static_cast<const MissingKey*>(b);
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  return memcmp(x->key, y->key, x->len);
}

SPIPlanPtr plan_forget = nullptr;

// The texts of the ids given but not written when this backend last read them from the shared
// cache, sorted by (counter, id), read under catalog epoch given_epoch. An id's text never
// changes while the epoch stays, so one reading serves every id given before it: a reader of
// many such ids (sc_top_text after a burst of new keys) reads the cache once, not once a key.
struct GivenText {
  int32 counter;
  int64 id;
  uint16 len;
  char text[kSharedKeyText];
};
MemoryContext given_context = nullptr;
GivenText* given_texts = nullptr;
int ngiven = 0;
uint64 given_epoch = 0;
// The database's slot and its count of gifts made (text_ids.hpp: TextsFilled) before they were
// read: while both stay, an id the reading lacks was not given since, and is not read again.
DatabaseSlot* given_slot = nullptr;
uint64 given_count = 0;

int CompareGiven(const void* a, const void* b) {
  auto* x = static_cast<const GivenText*>(a);
  auto* y = static_cast<const GivenText*>(b);
  if (x->counter != y->counter) return x->counter < y->counter ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

const GivenText* FindGiven(int32 counter, int64 id) {
  if (given_texts == nullptr) return nullptr;
  GivenText probe;
  probe.counter = counter;
  probe.id = id;
  return static_cast<const GivenText*>(
      bsearch(&probe, given_texts, ngiven, sizeof(GivenText), CompareGiven));
}

// Reads the unwritten ids of this database from the shared cache: counted, then copied into room
// allocated outside its locks (into more room if more were given in between).
void ReadGivenTexts() {
  if (given_context == nullptr)
    given_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter given texts",
                                          ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(given_context);
  given_texts = nullptr;
  ngiven = 0;
  int room = 0;
  SharedKeys().ForEachUnwritten(MyDatabaseId, [&](const SharedKeySlot&) { room++; });
  for (;;) {
    auto* texts = static_cast<GivenText*>(
        MemoryContextAllocHuge(given_context, sizeof(GivenText) * Size(room + 1)));
    int found = 0, n = 0;
    SharedKeys().ForEachUnwritten(MyDatabaseId, [&](const SharedKeySlot& s) {
      if (found++ >= room) return;
      GivenText& g = texts[n++];
      g.counter = s.counter;
      g.id = s.id;
      g.len = s.len;
      memcpy(g.text, s.text, s.len);
    });
    if (found <= room) {
      qsort(texts, n, sizeof(GivenText), CompareGiven);
      given_texts = texts;
      ngiven = n;
      return;
    }
    pfree(texts);
    room = found + found / 4;
  }
}

// The text of the id `id` of `counter` given but not written, or nullptr.
const GivenText* GivenTextOf(int32 counter, int64 id) {
  if (!SharedKeysOn()) return nullptr;
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  uint64 count = slot != nullptr ? TextsFilled(slot->key_writes) : 0;
  if (epoch == given_epoch && given_texts != nullptr) {
    if (const GivenText* g = FindGiven(counter, id)) return g;
    if (slot == given_slot && count == given_count) return nullptr;
  }
  // Counted before the reading: a gift whose slot the reading missed moves the count after.
  ReadGivenTexts();
  given_epoch = epoch;
  given_slot = slot;
  given_count = count;
  return FindGiven(counter, id);
}

}  // namespace

text* StoredText(int32 counter, int64 id) {
  bool found;
  Datum key = LookUpKeys("keys_pkey", counter, kIdColumn, F_INT8EQ, InvalidOid, Int64GetDatum(id),
                         kKeyColumn, &found);
  if (found) return DatumGetTextPP(key);
  // Given by a backend, its row not written yet: its text is in the shared cache, read with the
  // others (GivenTextOf). Or written since the probe: a slot is marked written after its row
  // committed, so a second probe finds what the cache no longer has.
  if (const GivenText* given = GivenTextOf(counter, id))
    return cstring_to_text_with_len(given->text, given->len);
  key = LookUpKeys("keys_pkey", counter, kIdColumn, F_INT8EQ, InvalidOid, Int64GetDatum(id),
                   kKeyColumn, &found);
  return found ? DatumGetTextPP(key) : nullptr;
}

void ForgetAbortedKeys() {
  SPIPlanPtr plan = KeptPlan(
      &plan_forget,
      "WITH s AS (SELECT counter, creator, pg_catalog.pg_xact_status(creator) AS status "
      "FROM slotted_counter.key_creators), "
      "gone AS (DELETE FROM slotted_counter.keys k USING s "
      "WHERE s.status OPERATOR(pg_catalog.=) 'aborted' "
      "AND k.counter OPERATOR(pg_catalog.=) s.counter) "
      "DELETE FROM slotted_counter.key_creators c USING s "
      "WHERE c.counter OPERATOR(pg_catalog.=) s.counter "
      "AND s.status IS DISTINCT FROM 'in progress'",
      0, nullptr);
  if (SPI_execute_plan(plan, nullptr, nullptr, false, 0) != SPI_OK_DELETE)
    elog(ERROR, "deleting the keys of counters never created failed");
}

int64 TextKeyId(const CounterDef& def, const char* key, int len, bool create) {
  int64 id;
  TextKeyIds(def, &key, &len, 1, create, &id);
  return id;
}

void TextKeyIds(const CounterDef& def, const char* const* keys, const int* lens, int n,
                bool create, int64* ids) {
  Assert(def.text_keys);
  ValidateCache();
  // Every id this call shares was found (or given) after the catalog was at this epoch.
  uint64 epoch = cache_epoch;
  // A new text of a buffered counter may be given its id here (StoredOrGivenId probes the table
  // itself); a transactional counter's is always given by the flusher, committed before the
  // transaction that uses it.
  bool give = create && def.durability == Durability::kBuffered;
  MissingKey* missing = nullptr;
  int nmissing = 0;
  for (int i = 0; i < n; i++) {
    Assert(lens[i] <= kMaxTextKey);
    uint64 hash = TextKeyHash(def.id, keys[i], lens[i]);
    ids[i] = cache.Find(def.id, hash, keys[i], uint32(lens[i]));
    if (ids[i] != kUnwrittenKey) continue;
    ids[i] = FindShared(def.id, hash, keys[i], lens[i], epoch);
    if (ids[i] == kUnwrittenKey && !give) {
      ids[i] = StoredId(def.id, keys[i], lens[i]);
      if (ids[i] != kUnwrittenKey) Share(def.id, hash, keys[i], lens[i], epoch, ids[i]);
    }
    if (ids[i] != kUnwrittenKey) {
      Remember(def.id, hash, keys[i], lens[i], ids[i]);
      continue;
    }
    if (!create) continue;
    if (missing == nullptr) missing = static_cast<MissingKey*>(palloc(sizeof(MissingKey) * n));
    missing[nmissing++] = MissingKey{keys[i], lens[i], i};
  }
  if (nmissing == 0) return;
  // A text listed twice is looked up (and asked for) once: sorted, each run of one text is one
  // item; ids given here or by the flusher follow the texts' bytes within a call.
  qsort(missing, nmissing, sizeof(MissingKey), CompareMissing);
  auto* want = static_cast<int*>(palloc(sizeof(int) * nmissing));
  int distinct = 0;
  for (int m = 0; m < nmissing; m++) {
    if (m > 0 && CompareMissing(&missing[m - 1], &missing[m]) == 0) continue;
    int i = missing[m].index;
    if (give) {
      uint64 hash = TextKeyHash(def.id, keys[i], lens[i]);
      ids[i] = StoredOrGivenId(def, hash, keys[i], lens[i], epoch);
      if (ids[i] != kUnwrittenKey) {
        Share(def.id, hash, keys[i], lens[i], epoch, ids[i]);
        Remember(def.id, hash, keys[i], lens[i], ids[i]);
        continue;
      }
    }
    want[distinct++] = i;
  }
  if (distinct > 0) {
    Intern(def, keys, lens, want, distinct, ids);
    // The catalog epoch may have moved while this waited: the cache is checked again, and
    // learns these ids only if it did not (they were given under the old one).
    ValidateCache();
    for (int w = 0; w < distinct; w++) {
      int i = want[w];
      uint64 hash = TextKeyHash(def.id, keys[i], lens[i]);
      Share(def.id, hash, keys[i], lens[i], epoch, ids[i]);
      if (cache_epoch == epoch) Remember(def.id, hash, keys[i], lens[i], ids[i]);
    }
  }
  for (int m = 1; m < nmissing; m++)
    if (CompareMissing(&missing[m - 1], &missing[m]) == 0)
      ids[missing[m].index] = ids[missing[m - 1].index];
}

}  // namespace sc
