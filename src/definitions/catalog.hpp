// catalog.hpp: counter definitions, read from slotted_counter.counters and cached per backend.
#pragma once

#include "pg.hpp"
#include "shared/shmem.hpp"
#include "core/gcra.hpp"
#include "core/sketch_block.hpp"
#include "core/time_bucket.hpp"

namespace sc {

enum class Durability : uint8 { kTransactional, kBuffered };

// What a role may do with a counter (privileges.cpp): read it (SELECT), write it (UPDATE), and,
// for its owner and superusers, everything else (drop, attach, detach, grant, revoke, give away).
enum Privilege : uint32 { kSelect = 1, kUpdate = 2, kOwn = 4 };

struct CounterDef {
  int32 id;
  Durability durability;
  bool bucketed;
  BucketWidth width;        // the bucket width, when bucketed
  bool retains;             // values are kept for `retain` only (retention.hpp)
  Interval retain;          // when retains: positive, no field negative
  bool text_keys;           // keyed by text: its keys are the ids of slotted_counter.keys
  bool limiter;             // a rate limiter (sc_throttle): each key's value is its TAT
  GcraLimit limit;          // when limiter: its rate, burst and tolerance (core/gcra.hpp)
  bool distinct;            // a distinct counter (sc_add): each key's value is a sketch
  HllShape sketch;          // when distinct: its sketches' shape (core/hll.hpp), the precision's
  char name[NAMEDATALEN];
  int32 name_len;           // strlen(name)
  // The counter's guard (guards.cpp), whose owner and ACL are the counter's; InvalidOid if it
  // has none (then only superusers may use it).
  Oid guard;
  // The privileges of checked_user, computed while role_generation was checked_generation.
  Oid checked_user;
  uint32 checked_generation;
  uint32 granted;
};

// Moves whenever roles, role memberships or relations (a guard's owner or ACL) change (syscache
// callbacks): cached privileges computed under an older value are computed again.
extern uint32 role_generation;

// The definition of counter `id` of this database; fails with 42704 if there is none.
const CounterDef* GetCounter(int32 id);
// The definition, or nullptr.
const CounterDef* FindCounter(int32 id);
// The id of the counter named `name`, or -1.
int32 FindCounterByName(const char* name);
// The definition of the counter named by the len bytes at name, or nullptr.
const CounterDef* FindCounter(const char* name, int len);
// Fails with 42704 (and a hint) when the name or id is unknown.
void ReportUnknownCounter(const char* what);
// Fails with 42704 at a commit: the counter the transaction counted into under `name` was dropped.
[[noreturn]] void ReportDroppedSinceCounted(const char* name);
// Fails with 22003: a value of counter `name` would leave the bigint range; detail may be nullptr.
[[noreturn]] void ReportValueOutOfRange(const char* name, const char* detail);

// Fails with 42501 unless the current role holds every privilege in `need` (privileges.cpp).
void RequirePrivileges(const CounterDef* def, uint32 need);

// GetCounter, and the current role must hold `need` on it (42501 if not).
const CounterDef* GetCounterSlow(int32 id, uint32 need);
// The same for the counter named by the text `name` (42704 naming it if there is none).
const CounterDef* GetCounterSlow(const text* name, uint32 need);

// The cache of one definition that GetCounter(id, need) reads first, and the catalog epoch it
// was read under (catalog.cpp). Cleared whenever this transaction notes a drop.
extern const CounterDef* last_def;
extern uint64 cached_epoch;

// The start of the statement whose first call processed invalidation messages: a change of role
// membership (REVOKE role FROM ...) reaches this session's cached privileges by its next
// statement, even inside a transaction, as a lock on a table would.
extern TimestampTz checked_statement;
void ProcessInvalidations(TimestampTz statement);

// The hot path's lookup: the definition of the call before, if the catalog has not moved and its
// privileges were computed for this role under the current role generation; else the full
// lookup and check.
inline const CounterDef* GetCounter(int32 id, uint32 need) {
  TimestampTz statement = GetCurrentStatementStartTimestamp();
  if (unlikely(statement != checked_statement)) ProcessInvalidations(statement);
  const CounterDef* def = last_def;
  if (likely(def != nullptr && def->id == id &&
             cached_epoch == pg_atomic_read_u64(&shared->catalog_epoch) &&
             def->checked_user == GetUserId() && def->checked_generation == role_generation &&
             (def->granted & need) == need))
    return def;
  return GetCounterSlow(id, need);
}

// The same by name (a value of the slotted_counter type, or text): the name is compared with the
// cached definition's, so a name bound at each call costs a length check and a memcmp.
inline const CounterDef* GetCounter(const text* name, uint32 need) {
  TimestampTz statement = GetCurrentStatementStartTimestamp();
  if (unlikely(statement != checked_statement)) ProcessInvalidations(statement);
  const CounterDef* def = last_def;
  if (likely(def != nullptr && def->name_len == int32(VARSIZE_ANY_EXHDR(name)) &&
             memcmp(def->name, VARDATA_ANY(name), def->name_len) == 0 &&
             cached_epoch == pg_atomic_read_u64(&shared->catalog_epoch) &&
             def->checked_user == GetUserId() && def->checked_generation == role_generation &&
             (def->granted & need) == need))
    return def;
  return GetCounterSlow(name, need);
}


// The OID of the extension's relation slotted_counter.<name> (a table or an index); InvalidOid
// if the schema or the relation does not exist (the extension is not installed, or was dropped).
Oid ExtensionRelation(const char* name);

// Finds the first row of the extension's table slotted_counter.<table> that its index
// slotted_counter.<index> matches for `keys` (sk_attno numbering the table's columns, each key
// under the collation of its index column: systable_beginscan's contract), under the
// latest snapshot (what committed after this transaction's snapshot is found: a look-up of
// stored state is real time, whatever the isolation level), and calls read(tuple, descriptor,
// arg) while the row is pinned: read copies what it needs into the caller's memory context.
// False if no row matched. Row-level security is not applied: the caller checked the role's
// right to the counter. 42P01 if the table or the index is missing.
bool ReadLatestRow(const char* table, const char* index, ScanKeyData* keys, int nkeys,
                   void (*read)(HeapTuple tuple, TupleDesc desc, void* arg), void* arg);

// The epoch the cached definitions were read under (compare with shared->catalog_epoch).
uint64 CachedCatalogEpoch();
// Drops every cached definition: after this transaction created or dropped counters, or when
// the shared epoch moved.
void ForgetCachedCounters();

// A name for a message: at most its first NAMEDATALEN - 1 bytes (whole characters), and "..."
// if it was longer, so that an oversized argument does not fill the log.
const char* NameForMessage(const char* name);

// Fails with 22023 unless the len bytes at name can be a counter's name (1 to NAMEDATALEN - 1
// bytes): the syntax the slotted_counter type checks, and sc_create before its own rules.
void CheckNameSyntax(const char* name, int len);

}  // namespace sc
