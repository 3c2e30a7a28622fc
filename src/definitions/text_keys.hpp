// text_keys.hpp: the keys of a counter keyed by text (sc_create(..., key_type => 'text')).
//
// Each distinct text of such a counter has an id in slotted_counter.keys, and the id is its key
// everywhere below the SQL functions: in the buffer, key_values, deltas and requests, so that the
// counting engine, its protocols and its cost stay those of bigint keys, and two texts never
// share a value (no hash stands for a text). The flusher is the only writer of the table. A new
// text of a transactional counter is given its id by the flusher (shared/write_through.hpp: an
// intern request), committed before any value uses it: a write that rolls back never leaves a
// value without its text. A new text of a buffered counter is given one by the backend that
// writes it first, from a range the flusher reserved (core/text_ids.hpp), shared at once with
// every backend (core/shared_key_cache.hpp: Give) and written by the flusher in the transaction
// that writes the first values that use it, or an earlier one (workers/text_ids.hpp): no round
// trip to the flusher, and a crash loses the id with those values, never one without the other.
// Where it cannot be given so (no range yet, a text longer than the shared cache holds, a set of
// that cache full of ids not written yet, a write of keys by the flusher in progress), the
// flusher gives it, as for a transactional counter. A backend caches the ids it has seen
// (core/key_cache.hpp); an id never changes while its counter exists.
#pragma once

#include "definitions/catalog.hpp"
#include "pg.hpp"

namespace sc {

// The longest key, in bytes: one that a btree entry of slotted_counter.keys always holds.
constexpr int kMaxTextKey = 2048;

// The id no text has: the key a read of a text never written uses (ids start at 1).
constexpr int64 kUnwrittenKey = 0;

// The hash of a text of a counter, in the caches of ids (core/key_cache.hpp,
// core/shared_key_cache.hpp).
inline uint64 TextKeyHash(int32 counter, const char* key, int len) {
  return hash_bytes_extended(reinterpret_cast<const unsigned char*>(key), len, uint64(counter));
}

// The id of the text at `key` (at most kMaxTextKey bytes, checked by the caller) for def, a
// counter keyed by text: the cached or stored one; if there is none, a new one when `create`,
// else kUnwrittenKey.
int64 TextKeyId(const CounterDef& def, const char* key, int len, bool create);

// The ids of n texts at once (keys[i], lens[i]), as TextKeyId, with one request to the flusher
// for all the new ones.
void TextKeyIds(const CounterDef& def, const char* const* keys, const int* lens, int n,
                bool create, int64* ids);

// The text of `id` on counter `counter` (keyed by text), or nullptr if it has none: a look-up
// with the latest snapshot, as an id is found, so that the text of every id a read of the buffer
// returned is found (its mapping committed before any value used it, or, given by a backend, in
// the shared cache until it is), whatever the isolation level and whenever the caller's
// snapshot was taken. The caller checked the role's right to the counter.
text* StoredText(int32 counter, int64 id);

// Deletes the ids given to counters whose creating transaction aborted (their requests named it:
// slotted_counter.key_creators), and forgets the creators that committed. In the flusher's
// retention pass, inside its transaction, with SPI connected.
void ForgetAbortedKeys();

}  // namespace sc
