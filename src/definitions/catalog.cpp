// catalog.cpp: counter definitions, cached per backend (see catalog.hpp).
//
// A counter is a row of slotted_counter.counters. Lookups read it with the latest snapshot (as
// regclass reads the system catalogs), so a counter dropped by a committed transaction is gone
// even inside an older REPEATABLE READ snapshot. The cache (two dynahash tables in one memory
// context) is trusted while shared->catalog_epoch is unchanged; any
// drop bumps it at commit. Owners and grants are the guards' (guards.cpp), PostgreSQL's own
// objects: a change to any role, membership or relation (a GRANT, an owner given away) moves
// role_generation, so cached privileges are computed again.
// Syscache callbacks only set flags: they can run inside any lookup, while a definition is in use.
#include "definitions/catalog.hpp"

#include "definitions/guards.hpp"
#include "definitions/changes.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"

extern "C" {
#include "mb/pg_wchar.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

namespace sc {

uint32 role_generation = 1;
const CounterDef* last_def = nullptr;
uint64 cached_epoch = 0;
TimestampTz checked_statement = 0;

void ProcessInvalidations(TimestampTz statement) {
  checked_statement = statement;
  AcceptInvalidationMessages();
}

namespace {

struct NameEntry {
  char name[NAMEDATALEN];  // hash key
  int32 id;
};

MemoryContext cache_context = nullptr;
HTAB* by_id = nullptr;
HTAB* by_name = nullptr;
SPIPlanPtr plan_by_id = nullptr;
SPIPlanPtr plan_by_name = nullptr;

const char* const kSelect =
    "SELECT id, name, durability, bucket, retain, key_type OPERATOR(pg_catalog.=) 'text', rate, "
    "per, burst, log2m "
    "FROM slotted_counter.counters WHERE ";

void OnPrivilegesChanged(Datum, int, uint32) { role_generation++; }

void MakeCaches() {
  if (cache_context == nullptr) {
    cache_context = AllocSetContextCreate(TopMemoryContext, "slotted_counter definitions",
                                          ALLOCSET_SMALL_SIZES);
    CacheRegisterSyscacheCallback(AUTHOID, OnPrivilegesChanged, 0);
    CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, OnPrivilegesChanged, 0);
    CacheRegisterSyscacheCallback(RELOID, OnPrivilegesChanged, 0);
  }
  MemoryContextReset(cache_context);
  last_def = nullptr;
  HASHCTL ctl;
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = sizeof(int32);
  ctl.entrysize = sizeof(CounterDef);
  ctl.hcxt = cache_context;
  by_id = hash_create("slotted_counter definitions", 64, &ctl,
                      HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = NAMEDATALEN;
  ctl.entrysize = sizeof(NameEntry);
  ctl.hcxt = cache_context;
  by_name = hash_create("slotted_counter names", 64, &ctl,
                        HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

void ValidateCaches() {
  uint64 epoch = pg_atomic_read_u64(&shared->catalog_epoch);
  if (by_id == nullptr || epoch != cached_epoch) MakeCaches();
  cached_epoch = epoch;
}

SPIPlanPtr PrepareDefinitionQuery(bool by_name_lookup) {
  SPIPlanPtr* plan = by_name_lookup ? &plan_by_name : &plan_by_id;
  if (*plan != nullptr) return *plan;
  Oid argtype = by_name_lookup ? TEXTOID : INT4OID;
  char* query = psprintf("%s%s", kSelect,
                         by_name_lookup ? "name OPERATOR(pg_catalog.=) $1"
                                        : "id OPERATOR(pg_catalog.=) $1");
  return KeptPlan(plan, query, 1, &argtype);
}

// Reads one definition row with the latest snapshot and caches it; nullptr if there is none (or
// no extension any more: a transaction that dropped it may have committed meanwhile).
const CounterDef* LoadDefinition(bool by_name_lookup, Datum arg) {
  AcceptInvalidationMessages();  // so that the look-ups below see such a drop
  if (!OidIsValid(ExtensionRelation("counters"))) return nullptr;
  SpiSession spi = ConnectSpi();
  SPIPlanPtr plan = PrepareDefinitionQuery(by_name_lookup);
  int rc = SPI_execute_snapshot(plan, &arg, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 1);
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
    // Its guard: the sequence of its name, if it was made for this counter (guards.hpp).
    Oid guard = FindGuard(name);
    if (OidIsValid(guard) && GuardStart(guard) != id) guard = InvalidOid;
    Datum retain = SPI_getbinval(tup, desc, 5, &isnull);
    bool retains = !isnull;
    bool text_keys = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
    Datum rate = SPI_getbinval(tup, desc, 7, &isnull);
    bool limiter = !isnull;
    GcraLimit limit{};
    // Checked by sc_create; a limit edited into the table by hand is refused here.
    if (limiter) {
      const Interval* per = DatumGetIntervalP(SPI_getbinval(tup, desc, 8, &isnull));
      int64 micros;
      if (!GcraPerMicros(per->month, per->day, per->time, &micros) ||
          !MakeGcraLimit(DatumGetInt64(rate), micros,
                         DatumGetInt64(SPI_getbinval(tup, desc, 9, &isnull)), &limit))
        elog(ERROR, "counter \"%s\" has an invalid rate limit", name);
    }

    Datum log2m = SPI_getbinval(tup, desc, 10, &isnull);
    bool distinct = !isnull;
    HllShape sketch{};
    if (distinct) {
      sketch = DistinctShape(DatumGetInt16(log2m));
      if (!HllShapeValid(sketch) || sketch.log2m > kSketchMaxLog2m)
        elog(ERROR, "counter \"%s\" has an invalid log2m", name);
    }

    bool found;
    auto* def = static_cast<CounterDef*>(hash_search(by_id, &id, HASH_ENTER, &found));
    def->durability = strcmp(durability, "buffered") == 0 ? Durability::kBuffered
                                                           : Durability::kTransactional;
    def->bucketed = bucketed;
    def->width = width;
    def->retains = retains;
    if (retains) def->retain = *DatumGetIntervalP(retain);
    def->text_keys = text_keys;
    def->limiter = limiter;
    def->limit = limit;
    def->distinct = distinct;
    def->sketch = sketch;
    strlcpy(def->name, name, NAMEDATALEN);
    def->name_len = int32(strlen(def->name));
    def->guard = guard;
    def->checked_user = InvalidOid;
    def->checked_generation = 0;
    def->granted = 0;
    if (strlen(name) < NAMEDATALEN) {
      auto* ne = static_cast<NameEntry*>(hash_search(by_name, def->name, HASH_ENTER, &found));
      ne->id = id;
    }
    result = def;
  }
  FinishSpi(spi);
  return result;
}

}  // namespace

const CounterDef* FindCounter(int32 id) {
  // The drop's own transaction must not load values for it: it has deleted them already.
  if (DroppedInThisTransaction(id)) return nullptr;
  ValidateCaches();
  if (last_def != nullptr && last_def->id == id) return last_def;
  auto* def = static_cast<CounterDef*>(hash_search(by_id, &id, HASH_FIND, nullptr));
  if (def == nullptr) def = const_cast<CounterDef*>(LoadDefinition(false, Int32GetDatum(id)));
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

const CounterDef* GetCounterSlow(int32 id, uint32 need) {
  const CounterDef* def = GetCounter(id);
  RequirePrivileges(def, need);
  return def;
}

int32 FindCounterByName(const char* name) {
  const CounterDef* def = FindCounter(name, int(strlen(name)));
  return def != nullptr ? def->id : -1;
}

const CounterDef* FindCounter(const char* name, int len) {
  ValidateCaches();
  if (len <= 0 || len >= NAMEDATALEN) return nullptr;
  char key[NAMEDATALEN];
  memset(key, 0, sizeof(key));
  memcpy(key, name, len);
  auto* ne = static_cast<NameEntry*>(hash_search(by_name, key, HASH_FIND, nullptr));
  // A name cached for a counter this transaction dropped: the catalog may hold a new one.
  if (ne != nullptr && !DroppedInThisTransaction(ne->id)) return FindCounter(ne->id);
  const CounterDef* def = LoadDefinition(true, CStringGetTextDatum(key));
  if (def != nullptr && DroppedInThisTransaction(def->id)) def = nullptr;
  if (def != nullptr) last_def = def;
  return def;
}

const CounterDef* GetCounterSlow(const text* name, uint32 need) {
  const char* bytes = VARDATA_ANY(name);
  int len = int(VARSIZE_ANY_EXHDR(name));
  const CounterDef* def = FindCounter(bytes, len);
  if (def == nullptr) ReportUnknownCounter(pnstrdup(bytes, len));
  RequirePrivileges(def, need);
  return def;
}

void ReportUnknownCounter(const char* what) {
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                  errmsg("counter \"%s\" does not exist", NameForMessage(what)),
                  errhint("Create it with sc_create(), or list the counters of this database "
                          "with SELECT name FROM slotted_counter.counters.")));
}

void ReportDroppedSinceCounted(const char* name) {
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                  errmsg("counter \"%s\" does not exist", name),
                  errdetail("It was dropped after this transaction counted into it; nothing of "
                            "this transaction is committed.")));
  pg_unreachable();
}

void ReportValueOutOfRange(const char* name, const char* detail) {
  ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                  errmsg("value of counter \"%s\" out of range", name),
                  detail != nullptr ? errdetail_internal("%s", detail) : 0));
  pg_unreachable();
}

const char* NameForMessage(const char* name) {
  int len = int(strlen(name));
  if (len < NAMEDATALEN) return name;
  int clipped = pg_mbcliplen(name, len, NAMEDATALEN - 1);
  return psprintf("%.*s...", clipped, name);
}

void CheckNameSyntax(const char* name, int len) {
  if (len == 0 || len >= NAMEDATALEN)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid counter name \"%s\"", NameForMessage(pnstrdup(name, len))),
                    errdetail("A counter name is 1 to %d bytes long.", NAMEDATALEN - 1)));
}

Oid ExtensionRelation(const char* name) {
  Oid schema = get_namespace_oid("slotted_counter", true);
  return OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
}

bool ReadLatestRow(const char* table, const char* index, ScanKeyData* keys, int nkeys,
                   void (*read)(HeapTuple tuple, TupleDesc desc, void* arg), void* arg) {
  Oid relation = ExtensionRelation(table);
  Oid index_oid = ExtensionRelation(index);
  if (!OidIsValid(relation) || !OidIsValid(index_oid))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                    errmsg("relation \"slotted_counter.%s\" does not exist",
                           OidIsValid(relation) ? index : table)));
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  Relation rel = table_open(relation, AccessShareLock);
  SysScanDesc scan = systable_beginscan(rel, index_oid, true, snapshot, nkeys, keys);
  HeapTuple tuple = systable_getnext(scan);
  if (tuple != nullptr) read(tuple, RelationGetDescr(rel), arg);
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  UnregisterSnapshot(snapshot);
  return tuple != nullptr;
}

uint64 CachedCatalogEpoch() { return cached_epoch; }

void ForgetCachedCounters() {
  if (by_id != nullptr) {
    MemoryContextReset(cache_context);
    by_id = by_name = nullptr;
  }
  last_def = nullptr;
}

}  // namespace sc
