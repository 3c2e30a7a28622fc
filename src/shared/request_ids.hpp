// request_ids.hpp: the request ids of buffered sc_incr_once calls not yet in
// slotted_counter.requests, in shared memory (request_ids.cpp).
//
// A buffered sc_incr_once adds to the buffer like sc_incr and must make its request id durable in
// the same flush transaction as its increment: a crash then loses both or neither, and a retry
// after it counts once. So the id waits in shared memory, beside the increment, until the flush
// that writes the increment writes the id too.
//
// The lock protocol (the parts' LWLocks, and the apply locks, one per database):
//   - The table is kIdParts parts (fewer for a small table: each holds at least kMinPartIds), each
//     a table of its own: its entries, their states, its hash chains, its free list and the count
//     of each database's unflushed ids in it, guarded by its LWLock (EXCLUSIVE for every look-up
//     and change). An id lives in the part its hash names, so that calls with different ids take
//     different locks. Nothing that can fail runs under a part's lock, and nothing long: a
//     flush's take of its ids lets it go every kTakeChunk entries, and holds one part's at a
//     time.
//   - the apply lock of a database (ApplyLockOf: one of kApplyLocks LWLocks, by the database's
//     oid, so that databases whose oids fall on the same one share it): a call holds it SHARED
//     from just before its add to the buffer until its id is marked kPending (it takes its
//     part's lock inside, never the other way round); a flush holds its database's EXCLUSIVE
//     while it takes the pending ids of its database (kPending -> kTaken) and claims the
//     buffer's dirty entries.
//     So every id it takes had its increment added before the claims (the flush writes both), and
//     every increment it claims whose id it did not take was added after the take... which cannot
//     be: the add and the mark are one SHARED section. The ids a flush writes are exactly those
//     whose increments it writes. Another database's flush never holds up a call: its apply lock
//     is another (but for a shared one).
//   - The fair share (core/fair_share.hpp, a pool whose units come back only at their flush),
//     applied in each part to the part's entries (the ids of a database spread over the parts by
//     their hashes, so its share of each part is its share of the table): an id is unflushed
//     from its kApplying to its kDurable (or its removal), and each database's unflushed ids are
//     counted in its part's `holders` (kIdHolders cells of database and count, under the part's
//     lock; a database beyond them is not counted, and neither limited nor protected). A call
//     takes an entry only as the rule allows its database (a sixteenth of the table is kept for a
//     database that holds none; one above its share takes none of what those below it lack);
//     otherwise it finds the table full for it, and waits for its own database's flush. The
//     take that brings its database to half its share of the part asks for that flush early.
//   - An id's states: kApplying (a call owns it: it is looking in the table or adding; others with
//     the same id wait), kPending (added to the buffer, result known), kTaken (a flush is writing
//     it), kDurable (committed to slotted_counter.requests: the entry may be reused). A call that
//     fails before its add removes its kApplying entry (also on a FATAL exit); a flush that fails
//     puts its kTaken ids back to kPending.
#pragma once

#include <type_traits>

#include "core/counter_table.hpp"
#include "pg.hpp"

namespace sc {

// The longest request id: as long as the idempotency keys of the payment APIs that have them.
constexpr int kMaxRequestIdLen = 255;

enum RequestIdState : uint32 { kIdFree = 0, kIdApplying, kIdPending, kIdTaken, kIdDurable };

struct RequestIdEntry {
  Oid db;
  int32 counter;
  uint32 state;            // RequestIdState
  int owner_pid;           // kIdApplying: the call's backend; kIdTaken: the flusher's
  uint32 hash;
  uint32 next;             // hash chain, or free list while kIdFree
  int64 key;
  int64 bucket;
  int64 result;            // the value the first call returned
  TimestampTz applied_at;
  uint16 len;
  char id[kMaxRequestIdLen + 1];
};

// How many apply locks the databases share (ApplyLockOf), and how many databases' unflushed ids
// are counted.
constexpr int kApplyLocks = 16;
constexpr int kIdHolders = 64;

struct IdHolder {
  Oid db;                  // InvalidOid: a free cell (its count is 0)
  uint32 unflushed;        // kApplying, kPending and kTaken ids of db
};

// How many parts the table has at most, and how many ids each holds at least.
constexpr uint32 kIdParts = 16;
constexpr uint32 kMinPartIds = 1024;

// One part: a chained hash table of fixed capacity, with its own lock (see above).
struct RequestIdPart {
  LWLock* lock;
  uint32 capacity;         // entries of this part
  uint32 nbuckets;         // a power of two
  uint32 free_head;
  uint32 clock;            // where the search for a kDurable entry to reuse goes on
  uint32 used;
  uint32 pending;          // its kPending entries (any database): a take skips a part of none
  // False once a search found no kDurable entry, until an entry becomes kDurable again: while
  // the part is full of unflushed ids, waiting calls do not scan it again and again.
  bool durable_possible;
  IdHolder holders[kIdHolders];
  // followed by nbuckets heads (uint32), then capacity entries
};

struct RequestIdTable {
  LWLock* apply_locks[kApplyLocks];
  uint32 capacity;         // slotted_counter.max_request_ids: of all parts together
  uint32 nparts;           // a power of two, at most kIdParts
  RequestIdPart* parts[kIdParts];
};

static_assert(std::is_standard_layout<RequestIdTable>::value &&
                  std::is_standard_layout<RequestIdPart>::value &&
                  std::is_standard_layout<RequestIdEntry>::value &&
                  std::is_standard_layout<IdHolder>::value,
              "shared structs have a standard layout");

Size RequestIdTableSize(int capacity);
// part_locks: kIdParts of them; apply_locks: kApplyLocks.
RequestIdTable* CreateRequestIdTable(void* mem, int capacity, LWLockPadded* part_locks,
                                     LWLockPadded* apply_locks);

// The apply lock of database db (see the protocol above).
inline LWLock* ApplyLockOf(RequestIdTable* t, Oid db) { return t->apply_locks[db % kApplyLocks]; }

// What a buffered call found for its id.
enum class IdLookup { kOwned, kKnown, kBusy, kFull };

// Under the id's part's lock: the id of (db, counter) with its result if a call applied it within
// the window (kKnown, *result), kBusy if a call is applying it now, kFull if there is no entry
// that db may take in the part (none free, or db at its fair share of the part); otherwise a new
// kApplying entry owned by this backend (kOwned, *index), and *flush_due if db holds half its
// share of the part unflushed with it (the caller asks for a flush, so that the ids are written
// before calls find the part full and wait for it).
IdLookup LookUpRequestId(RequestIdTable* t, Oid db, int32 counter, const char* id, int len,
                         TimestampTz now, int64 window_us, int64* result, uint32* index,
                         bool* flush_due);
// The call found the id in slotted_counter.requests: the entry becomes kDurable with its result
// and time.
void KnownRequestId(RequestIdTable* t, uint32 index, int64 result, TimestampTz applied_at);
// Under the database's apply lock SHARED, right after the add: kPending with the result.
void AppliedRequestId(RequestIdTable* t, uint32 index, int64 key, int64 bucket, int64 result,
                      TimestampTz at);
// The call failed before its add: its kApplying entry goes.
void AbandonRequestId(RequestIdTable* t, uint32 index);

// A request id a flush writes.
struct TakenRequestId {
  uint32 index;
  int32 counter;
  int64 key;
  int64 bucket;
  int64 result;
  TimestampTz applied_at;
  const char* id;          // palloc'd copy
};

// The order of the keys TakePendingRequestIds is given (a database's: no db).
inline bool KeyBefore(const CounterKey& a, const CounterKey& b) {
  if (a.counter != b.counter) return a.counter < b.counter;
  if (a.key != b.key) return a.key < b.key;
  return a.bucket < b.bucket;
}

// Under db's apply lock EXCLUSIVE (a flush's step, while it claims the entries of `keys`, sorted
// by KeyBefore): the kPending ids of database db made on those keys become kTaken, and so do
// those made on keys whose entries hold nothing unflushed (settled(key): an increment of 0, or
// one a flush wrote already: the id may be written now); those made on other keys wait for the
// step that claims their entries. Returns them, palloc'd (allocated before any is marked), and
// how many.
int TakePendingRequestIds(RequestIdTable* t, Oid db, const CounterKey* keys, int nkeys,
                          bool (*settled)(const CounterKey& key), TakenRequestId** out);
// After the flush's transaction ended: kDurable if it committed, else kPending again.
void SettleRequestIds(RequestIdTable* t, const TakenRequestId* taken, int n, bool committed);
// A dropped counter (counter 0: every counter of db) takes its ids with it.
void ForgetRequestIds(RequestIdTable* t, Oid db, int32 counter);

// ---- across a clean restart (saved_values.cpp), with no other process running: no locks ----

// How many ids of database db are unflushed (monitoring; under each part's lock in turn).
uint32 UnflushedRequestIds(RequestIdTable* t, Oid db);

// Copies into out (room for t->capacity) every id whose increment is not flushed yet (kPending,
// or kTaken by a flush that failed and was not settled); returns how many.
uint32 CopyUnflushedRequestIds(const RequestIdTable* t, RequestIdEntry* out);
// Puts a copied id back as kPending (its increment is restored as a dirty entry beside it: the
// flush that writes the one writes the other); false if the table has no free entry.
bool RestoreRequestId(RequestIdTable* t, const RequestIdEntry& saved);

}  // namespace sc
