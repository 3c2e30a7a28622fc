// session.cpp: the session settings of the background workers (session.hpp).
//
// A worker connects as the bootstrap superuser, and InitPostgres applies the defaults of
// pg_db_role_setting (the database's, the role's, and the role's in the database) before the
// worker's code runs. A database owner may set any user-settable parameter on the database,
// `role` and `session_authorization` among them (so that a superuser who connects acts as the
// owner): a flusher that took `role` from the database flushed as the owner, who may not write
// slotted_counter's tables, and every flush failed. So the workers set, as autovacuum does
// (autovacuum.c, AutoVacWorkerMain), every setting such a default could turn against them, with
// the source PGC_S_OVERRIDE: above every default, and the value RESET returns to. A SET in code
// the attacher runs for a table owner (a trigger, a function's SET clause) still holds for that
// code alone: the attacher rolls its settings back after each run (attach_run.cpp).
//
// Not pinned: transaction_read_only and transaction_isolation, whose defaults hold for
// InitPostgres's own transaction only (every later transaction starts from
// default_transaction_read_only and default_transaction_isolation), and idle_session_timeout,
// which only a client connection arms.
#include "workers/session.hpp"

namespace sc {

void PinSessionSettings(int lock_timeout_ms) {
  // Whoever the defaults said the session is, it is the bootstrap superuser again, with no role
  // set: the extension's own statements read and write its tables as their owner. (The name is
  // looked up in a transaction, as the setting's own check is.)
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  SetConfigOption("session_authorization", GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false),
                  PGC_SUSET, PGC_S_OVERRIDE);
  SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
  CommitTransactionCommand();

  // Its transactions write (a read-only default made every flush fail and a clean restart lose
  // what was buffered), in read committed (no serialization failure, no predicate locks), with
  // every trigger firing, and wait for a lock as long as the caller says: a database's 1 ms
  // would make flushes fail, a wait as long as a user's lock would stall them. The statement and
  // idle-in-transaction timeouts, which PostgreSQL arms for client connections only, are pinned
  // as autovacuum pins them. synchronous_commit is "local", as autovacuum makes it when it is
  // higher: a commit waits for no standby (a synchronous standby that is down would stall every
  // flush, and the flusher's shutdown with it), and for its own WAL flush (a database's "off"
  // would widen what a crash loses). search_path: what the workers run names everything with its
  // schema. plan_cache_mode "auto": it overrides a kept plan's own choice (spi.hpp: PlanChoice),
  // and a database's force_generic_plan would make the statements over arrays of keys join every
  // row of key_values per key.
  char lock_timeout[32];
  snprintf(lock_timeout, sizeof(lock_timeout), "%d", lock_timeout_ms);
  static const char* const kSettings[][2] = {
      {"default_transaction_read_only", "off"},
      {"default_transaction_isolation", "read committed"},
      {"default_transaction_deferrable", "off"},
      {"session_replication_role", "origin"},
      {"statement_timeout", "0"},
      {"idle_in_transaction_session_timeout", "0"},
      {"synchronous_commit", "local"},
      {"plan_cache_mode", "auto"},
      {"search_path", "pg_catalog, pg_temp"}};
  for (const auto& setting : kSettings)
    SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
  SetConfigOption("lock_timeout", lock_timeout, PGC_SUSET, PGC_S_OVERRIDE);
  // Unlike the statement timeout, every transaction arms transaction_timeout (17), and one that
  // outlives it ends the worker's process: a database's 1 ms would end each flusher at its first
  // flush.
  PinTransactionTimeoutOff();
}

}  // namespace sc
