// stats.cpp: slotted_counter.stats, one row per database that has used the buffer (the others
// than the current one for members of pg_read_all_stats only).
//
// Reads each DatabaseSlot's counters under its spinlock (copied out, then reported), and counts
// the database's dirty entries with the partition locks SHARED, one partition at a time: a
// monitoring read never blocks an increment.
#include "buffer/rank_indexes.hpp"
#include "shared/shmem.hpp"
#include "shared/stored_keys.hpp"
#include "settings.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_stats);
}

namespace sc {

namespace {

const char* WorkerStateName(uint32 state, TimestampTz lagging_at) {
  // A flush that has run three of its flusher's intervals (worker.cpp).
  if (state == kWorkerFlushing && lagging_at != 0 && GetCurrentTimestamp() >= lagging_at)
    return "lagging";
  switch (state) {
    case kWorkerStarting: return "starting";
    case kWorkerIdle: return "idle";
    case kWorkerFlushing: return "flushing";
    case kWorkerServing: return "writing through";
    case kWorkerStopping: return "stopping";
    case kWorkerFailing: return "failing";
    default: return "not running";
  }
}

int64 DirtyEntries(Oid db) {
  int64 dirty = 0;
  auto table = Table();
  for (uint32 p = 0; p < kPartitions; p++)
    table.ForEachResident(p, [&](uint32, const Entry& e) {
      if (e.id.db == db && !IsSum(e.id) && !CounterTable::Clean(e))
        dirty++;
    });
  return dirty;
}

// One row of slotted_counter.stats: the 19 columns of slotted_counter.sc_stats(); stored_keys is
// the state of the slot's filter of stored keys (no slot: "invalid").
void AddRow(ReturnSetInfo* rsinfo, Oid db, const DatabaseSlot* copy, int pid,
            const char* stored_keys) {
  Datum values[19];
  bool nulls[19] = {false};
  // datname is of type name, NAMEDATALEN bytes that the tuple copies whole: from a NameData, not
  // from the shorter C string (the copy would read past its end).
  NameData datname;
  char* name = get_database_name(db);
  if (name == nullptr) {
    nulls[0] = true;
  } else {
    namestrcpy(&datname, name);
    values[0] = NameGetDatum(&datname);
  }
  values[1] = Int64GetDatum(shared->table->capacity());
  values[2] = Int64GetDatum(int64(shared->table->used()));
  values[3] = Int64GetDatum(DirtyEntries(db));
  values[4] = Int64GetDatum(int64(copy->flushes));
  if (copy->last_flush_at == 0) nulls[5] = true;
  else values[5] = TimestampTzGetDatum(copy->last_flush_at);
  if (copy->flushes == 0) nulls[6] = true;
  else values[6] = Float8GetDatum(copy->last_flush_ms);
  values[7] = Int64GetDatum(int64(copy->rows_written));
  values[8] = Int64GetDatum(int64(copy->write_throughs));
  values[9] = Int64GetDatum(int64(pg_atomic_read_u64(&shared->evictions)));
  values[10] = Int64GetDatum(int64(copy->attach_skipped));
  values[11] = Int64GetDatum(int64(copy->attach_errors));
  if (pid == 0) nulls[12] = true;
  else values[12] = Int32GetDatum(pid);
  values[13] = CStringGetTextDatum(WorkerStateName(
      pid == 0 ? kWorkerNone : copy->tickets.worker_state, copy->flush_lagging_at));
  values[14] = Int64GetDatum(int64(copy->flush_failures));
  if (copy->flush_error_at == 0) {
    nulls[15] = nulls[16] = true;
  } else {
    values[15] = CStringGetTextDatum(copy->flush_error);
    values[16] = TimestampTzGetDatum(copy->flush_error_at);
  }
  values[17] = Int32GetDatum(ReadyRankIndexes(db));
  values[18] = CStringGetTextDatum(stored_keys);
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum sc_stats(PG_FUNCTION_ARGS) {
  RequireShared();
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  // Other databases, as pg_stat_statements shows other users' queries: to members of
  // pg_read_all_stats (and superusers) only.
  bool all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
  bool seen_mine = false;
  for (int i = 0; i < shared->max_databases; i++) {
    DatabaseSlot* slot = &shared->slots[i];
    auto lock = SlotsLock();
    uint32 db;
    int pid = FlusherOf(lock, slot->claim, &db);
    if (db == InvalidOid || (db != MyDatabaseId && !all)) continue;
    DatabaseSlot copy;
    SpinLockAcquire(&slot->mutex);
    copy.tickets.worker_state = slot->tickets.worker_state;
    copy.flushes = slot->flushes;
    copy.rows_written = slot->rows_written;
    copy.write_throughs = slot->write_throughs;
    copy.attach_skipped = slot->attach_skipped;
    copy.attach_errors = slot->attach_errors;
    copy.last_flush_at = slot->last_flush_at;
    copy.last_flush_ms = slot->last_flush_ms;
    copy.flush_lagging_at = slot->flush_lagging_at;
    copy.flush_failures = slot->flush_failures;
    copy.flush_error_at = slot->flush_error_at;
    memcpy(copy.flush_error, slot->flush_error, sizeof(copy.flush_error));
    SpinLockRelease(&slot->mutex);
    AddRow(rsinfo, db, &copy, pid, StoredKeysState(slot));
    seen_mine = seen_mine || db == MyDatabaseId;
  }
  if (!seen_mine) {
    DatabaseSlot none;
    memset(static_cast<void*>(&none), 0, sizeof(none));
    AddRow(rsinfo, MyDatabaseId, &none, 0, settings.stored_keys_filter > 0 ? "invalid" : "off");
  }
  return (Datum)0;
}
