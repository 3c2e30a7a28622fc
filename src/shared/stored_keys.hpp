// stored_keys.hpp: each database's filter of the keys its slotted_counter.key_values holds
// (core/stored_filter.hpp: what it promises and the protocol that keeps it), seen from the
// processes that read, add to, forget and rebuild it.
#pragma once

#include "shared/shmem.hpp"

namespace sc {

// Whether database db's filter answers at all now (valid), so that a caller looks up the table's
// oid only then.
bool StoredKeysInUse(Oid db);

// False only if k never had a committed row in `relation`, database k.db's key_values
// (buffer/stored.cpp skips its probe then).
bool StoredKeyMayExist(const CounterKey& k, Oid relation);

// The keys of rows a statement inserted into key_values (`rows`, its transition table): the
// insert trigger on the table, before the statement's transaction can commit.
void AddStoredKeys(Relation rel, Tuplestorestate* rows);

// Database db's filter answers nothing until its flusher rebuilds it: writes the trigger did not
// see (sc_rebuild_counter_totals), a TRUNCATE, an UPDATE of a key column.
void ForgetStoredKeys(Oid db);

// The flusher, in a transaction: rebuilds its database's filter from the rows of `relation`
// (key_values) unless it is valid for it already. Does nothing while a transaction that may
// write the table runs (tried again later), nor for a table of more rows than the filter holds
// well (reltuples over a key per 8 bits).
void RebuildStoredKeys(DatabaseSlot* slot, Oid relation);

// What slotted_counter.stats shows of a slot's filter: "valid", "rebuilding", "invalid", "off".
const char* StoredKeysState(DatabaseSlot* slot);

}  // namespace sc
