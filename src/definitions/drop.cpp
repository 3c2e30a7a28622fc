// drop.cpp: dropping a counter, for sc_drop, DROP OWNED and DROP SEQUENCE of its guard
// (role_commands.cpp), and the attachments of the tables a transaction dropped (xact.cpp).
//
// The counter's row is deleted first, which locks it against the flusher (which locks the rows
// of the counters it flushes FOR KEY SHARE SKIP LOCKED: flush.cpp). Then every value row
// committed before that goes, and the guard (guards.cpp) with them. The buffer's entries of the
// counter are dropped when the transaction commits (changes.hpp).
#include "definitions/drop.hpp"

#include "definitions/guards.hpp"
#include "definitions/changes.hpp"
#include "spi.hpp"

namespace sc {

bool DropCounter(const CounterDef& def, bool with_guard, DropBehavior behavior) {
  SpiSession spi = ConnectSpi();
  Oid type = INT4OID;
  Datum arg = Int32GetDatum(def.id);
  int rc = SPI_execute_with_args(
      "DELETE FROM slotted_counter.counters WHERE id OPERATOR(pg_catalog.=) $1", 1, &type, &arg,
      nullptr, false, 0);
  if (rc != SPI_OK_DELETE) elog(ERROR, "deleting the counter failed: %d", rc);
  bool deleted = SPI_processed == 1;
  if (deleted) {
    static const char* const deletes[] = {
        "DELETE FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.counter_totals WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.deltas WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.key_sketches WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.sketch_deltas WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.attachments WHERE counter OPERATOR(pg_catalog.=) $1",
        "DELETE FROM slotted_counter.keys WHERE counter OPERATOR(pg_catalog.=) $1"};
    // The counter's row is locked now: delete every value row committed before that too.
    for (const char* sql : deletes) {
      rc = ExecuteWithLatestSnapshot(sql, 1, &type, &arg);
      if (rc != SPI_OK_DELETE) elog(ERROR, "deleting the counter's values failed: %d", rc);
    }
    rc = ExecuteWithLatestSnapshot(
        "DELETE FROM slotted_counter.requests WHERE counter OPERATOR(pg_catalog.=) $1", 1, &type,
        &arg);
    if (rc != SPI_OK_DELETE) elog(ERROR, "deleting the counter's request ids failed: %d", rc);
  }
  FinishSpi(spi);
  if (!deleted) return false;
  if (with_guard && OidIsValid(def.guard)) DropGuard(def.guard, behavior);
  NoteCounterDropped(def.id);
  ForgetCachedCounters();
  return true;
}

void DetachDroppedTargets(const Oid* relids, int n) {
  // Any database's transaction gets here; only one with the extension has attachments.
  if (!OidIsValid(get_extension_oid("slotted_counter", true))) return;
  if (!OidIsValid(ExtensionRelation("attachments"))) return;
  auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; i++) datums[i] = ObjectIdGetDatum(relids[i]);
  Oid type = OIDARRAYOID;
  Datum arg = PointerGetDatum(construct_array(datums, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
  // At pre-commit no statement's snapshot is active any more.
  PushActiveSnapshot(GetTransactionSnapshot());
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(
      "DELETE FROM slotted_counter.attachments "
      "WHERE target::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
      1, &type, &arg, nullptr, false, 0);
  if (rc != SPI_OK_DELETE) elog(ERROR, "deleting attachments of dropped tables failed: %d", rc);
  FinishSpi(spi);
  PopActiveSnapshot();
}

}  // namespace sc
