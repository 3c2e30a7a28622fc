// module.cpp: the module's entry point: settings, and the hooks that create the shared state.
//
// Everything that needs shared memory is installed only while shared_preload_libraries is being
// processed; loaded any other way the module defines nothing and every SQL function fails with
// 55000 (shmem.cpp, RequireShared).
#include "core/core_assert.hpp"
#include "workers/databases.hpp"
#include "faults.hpp"
#include "pg.hpp"
#include "shared/saved_values.hpp"
#include "settings.hpp"
#include "shared/shmem.hpp"
#include "transactions/xact.hpp"

extern "C" {
SC_MODULE_MAGIC("slotted_counter", SC_VERSION);
void _PG_init(void);
}

namespace sc {

Settings settings = {100000, 16, 1000, 30000, 2000, 16384, 86400, 64, 65536, 10000000, 2048, 1024};

// A failed SC_ASSERT of the pure core (core/core_assert.hpp): as a failed Assert().
void CoreAssertFailed(const char* condition, const char* file, int line) noexcept {
  ReportFailedAssertion(condition, file, line);
}

#ifdef USE_ASSERT_CHECKING
namespace {
char* fault_point = nullptr;
}  // namespace

void InjectFault(const char* point) {
  if (fault_point != nullptr && strcmp(fault_point, point) == 0)
    ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
                    errdetail("Injected at \"%s\" (slotted_counter.fault_point).", point)));
}
#endif

namespace {

shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

void ShmemRequest() {
  if (prev_shmem_request_hook) prev_shmem_request_hook();
  RequestSharedState();
}

void ShmemStartup() {
  if (prev_shmem_startup_hook) prev_shmem_startup_hook();
  // The postmaster, creating the state: values a clean shutdown saved go back into the new
  // buffer, and what the flushers leave unflushed at the next clean shutdown is saved.
  if (CreateSharedState() && !IsUnderPostmaster) {
    RestoreSavedValues();
    on_shmem_exit(SaveUnflushedValues, 0);
    // What an operator looks for after a restart: the library is preloaded, and which version.
    ereport(LOG, (errmsg("slotted_counter %s loaded: a buffer of %d entries, flushers for up to "
                         "%d databases", SC_VERSION, settings.max_entries,
                         settings.max_databases)));
  }
}

void DefineSettings() {
  DefineCustomIntVariable(
      "slotted_counter.max_entries",
      "Size of the shared-memory buffer of counter values (96 bytes each, and its share of the hash table).", nullptr,
      &settings.max_entries, 100000, 128, 100000000, PGC_POSTMASTER, 0, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "slotted_counter.max_transaction_keys",
      "How many keys of transactional counters one transaction may change (about 300 bytes of "
      "the backend's memory each, at the commit).",
      nullptr, &settings.max_transaction_keys, 10000000, 1, INT_MAX / 2, PGC_USERSET, 0, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.max_databases",
      "How many databases can use slotted_counter at once (one flusher each).", nullptr,
      &settings.max_databases, 16, 1, 1024, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.flush_interval",
      "How often the flusher writes buffered values to the values table; 0 = only at shutdown "
      "and on sc_rollup().",
      nullptr, &settings.flush_interval, 1000, 0, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.attach_timeout",
      "How long one attachment run may take (its table's triggers included); 0 = no limit.",
      nullptr, &settings.attach_timeout, 30000, 0, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.idle_timeout",
      "How long a database's flusher stays with no client connected to the database before it "
      "flushes, leaves and gives its slot back; 0 = it stays.",
      nullptr, &settings.idle_timeout, 2000, 0, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
      nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.max_request_ids",
      "How many request ids of buffered sc_incr_once calls shared memory holds until their "
      "flush (about 330 bytes each); a call that finds none free waits for a flush.",
      nullptr, &settings.max_request_ids, 16384, 128, 10000000, PGC_POSTMASTER, 0, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.max_sketches",
      "How many keys of distinct counters the buffer holds at once (16 KiB of shared memory "
      "each: the sketch of the largest precision); a new key beyond them evicts a clean one or "
      "waits for a flush.",
      nullptr, &settings.max_sketches, 1024, 0, 1048576, PGC_POSTMASTER, 0, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "slotted_counter.shared_text_keys",
      "How many ids of text keys (of up to 94 bytes) shared memory keeps for every backend to "
      "find, 128 bytes each; 0 keeps none.",
      nullptr, &settings.shared_text_keys, 65536, 0, 16777216, PGC_POSTMASTER, 0, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.stored_keys_filter",
      "Shared memory, per database, for the filter of stored keys that lets the first read of a "
      "key never stored skip the values table; 0 keeps none.",
      nullptr, &settings.stored_keys_filter, 2048, 0, 1048576, PGC_POSTMASTER, GUC_UNIT_KB,
      nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.dedupe_window",
      "How long sc_incr_once applies a request id once: a later call with the same id applies "
      "again.",
      nullptr, &settings.dedupe_window, 86400, 1, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "slotted_counter.rank_memory",
      "Shared memory for the indexes behind sc_rank, all together; an index that would need more "
      "is dropped, and sc_rank counts in the table instead.",
      nullptr, &settings.rank_memory, 64, 0, INT_MAX / 2, PGC_SIGHUP, GUC_UNIT_MB, nullptr,
      nullptr, nullptr);
#ifdef USE_ASSERT_CHECKING
  DefineCustomStringVariable(
      "slotted_counter.fault_point",
      "The named point where the extension fails as if out of memory (assert-enabled builds, "
      "for the tests of error paths).",
      nullptr, &fault_point, "", PGC_SUSET, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL, nullptr, nullptr,
      nullptr);
#endif
  MarkGUCPrefixReserved("slotted_counter");
}

}  // namespace
}  // namespace sc

void _PG_init(void) {
  // Loaded any other way, define nothing: postmaster settings cannot be created after startup.
  if (!process_shared_preload_libraries_in_progress) return;
  sc::DefineSettings();
  sc::prev_shmem_request_hook = shmem_request_hook;
  shmem_request_hook = sc::ShmemRequest;
  sc::prev_shmem_startup_hook = shmem_startup_hook;
  shmem_startup_hook = sc::ShmemStartup;
  sc::InstallTransactionHooks();
  sc::InstallDatabaseHooks();
  sc::ReadSavedValues();
}
