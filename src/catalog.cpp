// catalog.cpp: counter definitions, cached per backend (see catalog.hpp).
//
// A counter is a row of slotted_counter.counters. Lookups read it with the latest snapshot (as
// regclass reads the system catalogs), so a counter dropped by a committed transaction is gone
// even inside an older REPEATABLE READ snapshot. The cache (two dynahash tables in
// TopMemoryContext) is trusted while shared->catalog_epoch is unchanged; any drop bumps it.
#include "catalog.hpp"

#include "shmem.hpp"
#include "xact.hpp"

namespace sc {

namespace {

struct NameEntry {
  char name[NAMEDATALEN];  // hash key
  int32 id;
};

HTAB* by_id = nullptr;
HTAB* by_name = nullptr;
uint64 cached_epoch = 0;
// The last definition found by id: most calls name the counter of the call before.
const CounterDef* last_def = nullptr;
SPIPlanPtr plan_by_id = nullptr;
SPIPlanPtr plan_by_name = nullptr;

const char* const kSelect =
    "SELECT id, name, durability, bucket FROM slotted_counter.counters WHERE ";

void MakeCaches() {
  last_def = nullptr;
  HASHCTL ctl;
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = sizeof(int32);
  ctl.entrysize = sizeof(CounterDef);
  by_id = hash_create("slotted_counter definitions", 64, &ctl, HASH_ELEM | HASH_BLOBS);
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = NAMEDATALEN;
  ctl.entrysize = sizeof(NameEntry);
  by_name = hash_create("slotted_counter names", 64, &ctl, HASH_ELEM | HASH_STRINGS);
}

void ValidateCaches() {
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  if (by_id == nullptr) {
    MakeCaches();
  } else if (epoch != cached_epoch) {
    hash_destroy(by_id);
    hash_destroy(by_name);
    MakeCaches();
  }
  cached_epoch = epoch;
}

SPIPlanPtr Prepare(const char* where, Oid argtype) {
  char query[256];
  snprintf(query, sizeof(query), "%s%s", kSelect, where);
  SPIPlanPtr plan = SPI_prepare(query, 1, &argtype);
  if (plan == nullptr) elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  SPI_keepplan(plan);
  return plan;
}

// Reads one definition row with the latest snapshot and caches it; nullptr if there is none.
const CounterDef* Load(bool by_name_lookup, Datum arg) {
  SPI_connect();
  if (plan_by_id == nullptr) {
    plan_by_id = Prepare("id OPERATOR(pg_catalog.=) $1", INT4OID);
    plan_by_name = Prepare("name OPERATOR(pg_catalog.=) $1", TEXTOID);
  }
  int rc = SPI_execute_snapshot(by_name_lookup ? plan_by_name : plan_by_id, &arg, nullptr,
                                GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.counters failed: %d", rc);
  const CounterDef* result = nullptr;
  if (SPI_processed == 1) {
    HeapTuple tup = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    int32 id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
    char* name = SPI_getvalue(tup, desc, 2);
    char* durability = SPI_getvalue(tup, desc, 3);
    Datum bucket = SPI_getbinval(tup, desc, 4, &isnull);
    bool bucketed = !isnull;
    BucketWidth width{0, 0};
    // Checked by sc_create; a width edited into the table by hand is refused here.
    if (bucketed && MakeBucketWidth(DatumGetIntervalP(bucket)->month,
                                    DatumGetIntervalP(bucket)->day,
                                    DatumGetIntervalP(bucket)->time, &width) != WidthError::kNone)
      elog(ERROR, "counter \"%s\" has an invalid bucket width", name);

    bool found;
    auto* def = static_cast<CounterDef*>(hash_search(by_id, &id, HASH_ENTER, &found));
    def->durability = strcmp(durability, "buffered") == 0 ? Durability::kBuffered
                                                           : Durability::kTransactional;
    def->bucketed = bucketed;
    def->width = width;
    strlcpy(def->name, name, NAMEDATALEN);
    if (strlen(name) < NAMEDATALEN) {
      auto* ne = static_cast<NameEntry*>(hash_search(by_name, def->name, HASH_ENTER, &found));
      ne->id = id;
    }
    result = def;
  }
  SPI_finish();
  return result;
}

}  // namespace

const CounterDef* FindCounter(int32 id) {
  // The drop's own transaction must not load values for it: it has deleted them already.
  if (DroppedInThisTransaction(id)) return nullptr;
  ValidateCaches();
  if (last_def != nullptr && last_def->id == id) return last_def;
  auto* def = static_cast<CounterDef*>(hash_search(by_id, &id, HASH_FIND, nullptr));
  if (def == nullptr) def = const_cast<CounterDef*>(Load(false, Int32GetDatum(id)));
  last_def = def;
  return def;
}

const CounterDef* GetCounter(int32 id) {
  const CounterDef* def = FindCounter(id);
  if (def == nullptr) {
    char what[32];
    snprintf(what, sizeof(what), "%d", id);
    ReportUnknownCounter(what);
  }
  return def;
}

int32 FindCounterByName(const char* name) {
  ValidateCaches();
  if (strlen(name) >= NAMEDATALEN) return -1;
  auto* ne = static_cast<NameEntry*>(hash_search(by_name, name, HASH_FIND, nullptr));
  if (ne != nullptr) return ne->id;
  const CounterDef* def = Load(true, CStringGetTextDatum(name));
  return def != nullptr ? def->id : -1;
}

void ReportUnknownCounter(const char* what) {
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                  errmsg("counter \"%s\" does not exist", what),
                  errhint("Create it with sc_create(), or list the counters of this database "
                          "with SELECT name FROM slotted_counter.counters.")));
}

uint64 CachedCatalogEpoch() { return cached_epoch; }

void ForgetCachedCounters() {
  if (by_id != nullptr) {
    hash_destroy(by_id);
    hash_destroy(by_name);
    by_id = by_name = nullptr;
  }
  last_def = nullptr;
}

}  // namespace sc
