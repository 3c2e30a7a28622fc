// compat.hpp: what differs between the PostgreSQL versions slotted_counter supports, in one place.
//
// Supported: 15 to 18. 15, 17 and 18 are built and tested; 16, which no Debian release packages,
// is covered by the same definitions (each names the version that changed it) but not tested.
// Every difference is a function or macro here, behind PG_VERSION_NUM, with the newest version's
// meaning; the rest of the tree calls these names and never tests a version itself. The router
// (proxy/) includes this file too.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"
}

// The macros of variable-length values (VARDATA_ANY, SET_VARSIZE): postgres.h's until 16.
#if PG_VERSION_NUM >= 160000
extern "C" {
#include "varatt.h"
}
#endif

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "slotted_counter supports PostgreSQL 15, 16, 17 and 18"
#endif

#if PG_VERSION_NUM >= 170000
extern "C" {
#include "storage/procnumber.h"
}
#else
extern "C" {
#include "storage/backendid.h"
}
#endif

// The module's magic block. 18 records a module's name and version (pg_get_loaded_modules), and
// its PG_MODULE_MAGIC leaves those fields to be zeroed, which C++ warns of.
#if PG_VERSION_NUM >= 180000
#define SC_MODULE_MAGIC(module_name, module_version) \
  PG_MODULE_MAGIC_EXT(.name = module_name, .version = module_version)
#else
#define SC_MODULE_MAGIC(module_name, module_version) PG_MODULE_MAGIC
#endif

namespace sc {

// A failed assertion, reported as PostgreSQL's Assert() reports one (16 dropped the error type).
[[noreturn]] inline void ReportFailedAssertion(const char* condition, const char* file,
                                               int line) {
#if PG_VERSION_NUM >= 160000
  ExceptionalCondition(condition, file, line);
#else
  ExceptionalCondition(condition, "FailedAssertion", file, line);
#endif
}

// This process's index among the server's processes, from 0: its PGPROC's (MyProcNumber, 17)
// or its backend id less one (MyBackendId counts from 1 before 17). Below MaxBackends in every
// backend and background worker.
inline int MyProcIndex() {
#if PG_VERSION_NUM >= 170000
  int index = MyProcNumber;
#else
  int index = MyBackendId - 1;
#endif
  Assert(index >= 0 && index < MaxBackends);
  return index;
}

// The privilege check of one object of a database, a function or a schema, which 16 made one
// function for every catalog.
inline AclResult ObjectAclCheck(Oid catalog, Oid object, Oid role, AclMode mode) {
#if PG_VERSION_NUM >= 160000
  return object_aclcheck(catalog, object, role, mode);
#else
  switch (catalog) {
    case DatabaseRelationId:
      return pg_database_aclcheck(object, role, mode);
    case ProcedureRelationId:
      return pg_proc_aclcheck(object, role, mode);
    default:
      Assert(catalog == NamespaceRelationId);
      return pg_namespace_aclcheck(object, role, mode);
  }
#endif
}

inline AclResult DatabaseAclCheck(Oid db, Oid role, AclMode mode) {
  return ObjectAclCheck(DatabaseRelationId, db, role, mode);
}


inline bool OwnsDatabase(Oid role, Oid db) {
#if PG_VERSION_NUM >= 160000
  return object_ownercheck(DatabaseRelationId, db, role);
#else
  return pg_database_ownercheck(db, role);
#endif
}

inline bool OwnsRelation(Oid role, Oid relid) {
#if PG_VERSION_NUM >= 160000
  return object_ownercheck(RelationRelationId, relid, role);
#else
  return pg_class_ownercheck(relid, role);
#endif
}

inline bool OwnsExtension(Oid role, Oid extension) {
#if PG_VERSION_NUM >= 160000
  return object_ownercheck(ExtensionRelationId, extension, role);
#else
  return pg_extension_ownercheck(extension, role);
#endif
}

// Whether `member` may SET ROLE to `role`: core's rule for making a role an object's owner. 16
// added the SET option of a membership (member_can_set_role); before, every member could.
inline bool MemberCanSetRole(Oid member, Oid role) {
#if PG_VERSION_NUM >= 160000
  return member_can_set_role(member, role);
#else
  return is_member_of_role(member, role);
#endif
}

// The row in `slot` into every index of `result_rel`, no arbiter, as an INSERT does.
inline void InsertIndexTuples(ResultRelInfo* result_rel, TupleTableSlot* slot, EState* estate) {
#if PG_VERSION_NUM >= 160000
  (void)ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL, false);
#else
  (void)ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL);
#endif
}

// What an updated row needs of the indexes (16 added the summarizing ones, as BRIN).
enum class IndexEntries { kNone, kAll, kSummarizing };

// table_tuple_update with no crosscheck, waiting for a concurrent writer; *entries: what the new
// version needs of the indexes when the result is TM_Ok.
inline TM_Result UpdateTuple(Relation rel, ItemPointer tid, TupleTableSlot* slot, CommandId cid,
                             Snapshot snapshot, IndexEntries* entries) {
  TM_FailureData failure;
  LockTupleMode lock_mode;
#if PG_VERSION_NUM >= 160000
  TU_UpdateIndexes update_indexes = TU_None;
  TM_Result result = table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true,
                                        &failure, &lock_mode, &update_indexes);
  *entries = update_indexes == TU_All           ? IndexEntries::kAll
             : update_indexes == TU_Summarizing ? IndexEntries::kSummarizing
                                                : IndexEntries::kNone;
#else
  bool update_indexes = false;
  TM_Result result = table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true,
                                        &failure, &lock_mode, &update_indexes);
  *entries = update_indexes ? IndexEntries::kAll : IndexEntries::kNone;
#endif
  return result;
}

// The new version of an updated row in `slot` into the indexes `entries` names, as an UPDATE does.
inline void InsertUpdatedIndexTuples(ResultRelInfo* result_rel, TupleTableSlot* slot,
                                     EState* estate, IndexEntries entries) {
  if (entries == IndexEntries::kNone) return;
#if PG_VERSION_NUM >= 160000
  (void)ExecInsertIndexTuples(result_rel, slot, estate, true, false, nullptr, NIL,
                              entries == IndexEntries::kSummarizing);
#else
  (void)ExecInsertIndexTuples(result_rel, slot, estate, true, false, nullptr, NIL);
#endif
}

// An index scan with no instrumentation (18 added its argument).
inline IndexScanDesc BeginIndexScan(Relation heap, Relation index, Snapshot snapshot, int nkeys,
                                    int norderbys) {
#if PG_VERSION_NUM >= 180000
  return index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys);
#else
  return index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

// search_path becomes "pg_catalog, pg_temp" in the current GUC nest level, as PostgreSQL 17 sets
// it while maintenance commands (VACUUM, REFRESH MATERIALIZED VIEW) run a table owner's code.
inline void RestrictSearchPathToCatalog() {
#if PG_VERSION_NUM >= 170000
  RestrictSearchPath();
#else
  (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                          GUC_ACTION_SAVE, true, 0, false);
#endif
}

// Turns transaction_timeout (17) off for the session, with the source of the settings a
// background worker pins (workers/session.cpp): every transaction arms it, a worker's too, and
// one that runs longer ends its process. Before 17 there is no such setting.
inline void PinTransactionTimeoutOff() {
#if PG_VERSION_NUM >= 170000
  SetConfigOption("transaction_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
#endif
}

// The schema of extension `extension` (16 exports get_extension_schema; 15 keeps it static).
inline Oid ExtensionSchema(Oid extension) {
#if PG_VERSION_NUM >= 160000
  return get_extension_schema(extension);
#else
  Relation catalog = table_open(ExtensionRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
              ObjectIdGetDatum(extension));
  SysScanDesc scan = systable_beginscan(catalog, ExtensionOidIndexId, true, nullptr, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  Oid schema = HeapTupleIsValid(tuple)
                   ? reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple))->extnamespace
                   : InvalidOid;
  systable_endscan(scan);
  table_close(catalog, AccessShareLock);
  return schema;
#endif
}

// The wait event named `name`, of type Extension, registered once for the whole server (17:
// WaitEventExtensionNew, whose names pg_stat_activity and pg_wait_events show). Before 17 an
// extension has one wait event only, PG_WAIT_EXTENSION, which pg_stat_activity shows as
// "Extension".
inline uint32 ExtensionWaitEvent(const char* name) {
#if PG_VERSION_NUM >= 170000
  return WaitEventExtensionNew(name);
#else
  (void)name;
  return PG_WAIT_EXTENSION;
#endif
}

// A wait event set that lives as long as the session, until FreeWaitEventSet (the router's
// connections to its data nodes). 17 ties a set to a resource owner (none: the session) where
// 15 and 16 allocate it in a memory context.
inline WaitEventSet* CreateSessionWaitEventSet(int nevents) {
#if PG_VERSION_NUM >= 170000
  return CreateWaitEventSet(nullptr, nevents);
#else
  return CreateWaitEventSet(TopMemoryContext, nevents);
#endif
}

}  // namespace sc
