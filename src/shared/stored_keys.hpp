// stored_keys.hpp: each database's filter of the keys its slotted_counter.key_values holds, the
// request ids its slotted_counter.requests holds and the texts its slotted_counter.keys holds
// (core/stored_filter.hpp: what it promises and the protocol that keeps it), seen from the
// processes that read, add to, forget and rebuild it.
#pragma once

#include "shared/shmem.hpp"

extern "C" {
#include "commands/trigger.h"
}

namespace sc {

// The tables whose rows the filter holds, in the order a rebuild locks and scans them.
enum StoredTable { kKeyValuesTable, kRequestsTable, kKeysTable, kStoredTables };
constexpr const char* kStoredTableNames[kStoredTables] = {"key_values", "requests", "keys"};

// Whether database db's filter answers at all now (valid, and not in recovery), so that a caller
// looks up the table's oid only then.
bool StoredKeysInUse(Oid db);

// False only if k never had a committed row in `relation`, database k.db's key_values
// (buffer/stored.cpp skips its probe then).
bool StoredKeyMayExist(const CounterKey& k, Oid relation);

// False only if `bytes` (len of them) of `counter` never had a committed row in this database's
// `table`, requests (a request id: functions/once.cpp skips its probe then) or keys (a text:
// definitions/text_keys.cpp), of the extension whose key_values is `key_values`.
bool StoredBytesMayExist(StoredTable table, int32 counter, const char* bytes, int len,
                         Oid key_values);

// The keys of rows a statement inserted into one of the tables (`rel`; `rows`, its transition
// table): the insert triggers on the tables, before the statement's transaction can commit.
void AddStoredKeys(Relation rel, Tuplestorestate* rows);

// The key of one row inserted into key_values (`rel`): its row trigger, before the statement's
// transaction can commit.
void AddStoredRow(Relation rel, TupleTableSlot* row);

// The key of a row of key_values that a writer keeping the sums itself inserted (no trigger saw
// it), into `slot`'s filter (the slot of this database, or nullptr: nothing to do).
void AddStoredKey(DatabaseSlot* slot, int32 counter, int64 key, int64 bucket);

// What a statement trigger on one of the tables does for the filter: the new rows of an
// INSERT join it; an UPDATE of a key column (the trigger without transition tables) and a TRUNCATE
// make it answer nothing until rebuilt.
void KeepStoredKeys(TriggerData* trigger);

// Database db's filter answers nothing until its flusher rebuilds it: writes the trigger did not
// see (sc_rebuild_counter_totals), a TRUNCATE, an UPDATE of a key column.
void ForgetStoredKeys(Oid db);

// The flusher, in a transaction, after each flush: rebuilds its database's filter from the rows of
// the tables (their oids, as StoredTable numbers them) unless it is valid for them already. It
// clears the filter and lists the transactions holding a lock on the tables that conflicts with
// SHARE; once they all ended (looked at here again after later flushes, never waited for), it
// scans. Not for tables of more rows than the filter holds well (a row per 8 bits).
void RebuildStoredKeys(DatabaseSlot* slot, const Oid tables[kStoredTables]);

// What slotted_counter.stats shows of a slot's filter: "valid", "rebuilding", "invalid", "off".
const char* StoredKeysState(DatabaseSlot* slot);

}  // namespace sc
