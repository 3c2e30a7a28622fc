// stored_filter.hpp: a filter of the keys a database's slotted_counter.key_values holds, of the
// request ids its slotted_counter.requests holds and of the texts its slotted_counter.keys holds
// ("the tables" below), so that the load of a key it never held (the long tail of new keys) skips
// the probe of key_values (buffer/stored.cpp), a new request id the probe of requests
// (functions/once.cpp), and a new text the probe of keys (definitions/text_keys.cpp). One per
// database slot (shared/shmem.hpp: DatabaseSlot), kept by shared/stored_keys.cpp. A Bloom filter
// blocked by 64-bit word: a key sets four bits of one word, so a look-up is one load. It answers
// "never stored" (no false one) or "maybe" (a probe follows).
//
// What it holds, and who keeps it so:
//   - Bits are only ever added (AddStored, an atomic OR), by whoever inserted the row, after the
//     row's insertion and before its commit, while the inserter holds a lock on its table that
//     conflicts with SHARE: the insert triggers of the tables add the keys of a statement's new
//     rows, whatever inserted them. A key is never removed: a deleted row leaves a false "maybe".
//   - valid (state's low bit) says the bits cover every committed row of the tables of database
//     `db`, the extension's whose key_values is `relation`. Only a rebuild makes it so
//     (BeginRebuild .. FinishRebuild, by the database's flusher): clear every bit; wait until no
//     transaction that held a lock on a table conflicting with SHARE when the bits were cleared is
//     running (the caller lists them, and looks again at later flushes, never waiting: a busy
//     table delays the rebuild, it does not stop the flusher); take a snapshot; add the key of
//     each row it sees;
//     set valid only if no invalidation came since the rebuild began (the generation, state >> 1,
//     unchanged). A row committed before that snapshot has its key added: by the scan, or by its
//     inserter after the clear (one that added it before the clear still held its lock then, so
//     it ended before the snapshot). A row committed after it had its key added after the clear,
//     and the bits are never cleared again until the next rebuild.
//   - Invalidate clears valid and moves the generation: writes that bypass the triggers (a
//     disabled trigger, session_replication_role = replica) are followed by
//     sc_rebuild_counter_totals, which invalidates; so do a TRUNCATE and an UPDATE of a key column.
//   - One rebuilder at a time (rebuilder, a pid taken by compare-and-swap): a second one's clear
//     would wipe the first's scan. A rebuilder that fails gives it back (AbandonRebuild).
// MayBeStored answers "never stored" only while valid and for the database and tables it was
// built for (a slot may pass to another database, whose tables may have the same oids if both
// came from one template; a dropped and re-created extension's tables are others), and only if
// the state was the same before and
// after it read the word (a rebuild may clear it meanwhile). Its look-up comes after what precedes
// it, as the snapshot the probe would take does: a load linked its entry, a request id's call
// owned its id (both under an LWLock, a full barrier), a text's giver read the key writes
// (sequentially consistent); and an inserter's bits (an atomic OR) precede its commit, which
// precedes any snapshot that sees the row.
//
// Pure C++ (no PostgreSQL header). Nothing here allocates, throws or fails.
#pragma once

#include <atomic>
#include <cstdint>
#include <new>
#include <type_traits>

#include "core/core_assert.hpp"
#include "core/counter_table.hpp"

namespace sc {

struct StoredFilter {
  std::atomic<uint64_t> state;       // generation << 1 | valid
  std::atomic<uint32_t> db;          // the database whose tables the bits describe while valid
  std::atomic<uint32_t> relation;    // and its key_values
  std::atomic<int32_t> rebuilder;    // the process rebuilding it; 0: none
  std::atomic<uint64_t>* words;      // word_mask + 1 of them, in shared memory; none: no filter
  uint64_t word_mask;
};
static_assert(std::is_standard_layout<StoredFilter>::value,
              "shared structs have a standard layout");

// The words a filter of `bytes` has: the largest power of two that fits (0 below one word).
inline uint64_t StoredFilterWords(uint64_t bytes) noexcept {
  uint64_t words = bytes / sizeof(uint64_t);
  if (words == 0) return 0;
  uint64_t power = 1;
  while (power * 2 <= words) power *= 2;
  return power;
}

// words: `count` words (a power of two, or 0 for no filter), zeroed here.
inline void InitStoredFilter(StoredFilter& f, std::atomic<uint64_t>* words,
                             uint64_t count) noexcept {
  SC_ASSERT((count & (count - 1)) == 0);
  f.state.store(0);
  f.db.store(0);
  f.relation.store(0);
  f.rebuilder.store(0);
  f.words = count > 0 ? words : nullptr;
  f.word_mask = count > 0 ? count - 1 : 0;
  for (uint64_t i = 0; i < count; i++) new (&words[i]) std::atomic<uint64_t>(0);
}

// The hash of a key within its database (the filter is the database's).
inline uint64_t StoredKeyHash(int32_t counter, int64_t key, int64_t bucket) noexcept {
  uint64_t h = MixBits((uint64_t(uint32_t(counter)) * 0x9e3779b97f4a7c15ULL) ^ uint64_t(key));
  return bucket == kNoBucket ? h : MixBits(h ^ uint64_t(bucket));
}

// The hash of a request id of sc_incr_once within its database, from the hash of its bytes: the
// filter holds the rows of slotted_counter.requests too (another domain of the same words).
inline uint64_t StoredRequestHash(int32_t counter, uint64_t id_hash) noexcept {
  return MixBits(StoredKeyHash(counter, int64_t(id_hash), kNoBucket) ^ 0x5851f42d4c957f2dULL);
}

// The hash of a key's text of a counter keyed by text, from the hash of its bytes: the filter holds
// the rows of slotted_counter.keys too.
inline uint64_t StoredTextHash(int32_t counter, uint64_t text_hash) noexcept {
  return MixBits(StoredKeyHash(counter, int64_t(text_hash), kNoBucket) ^ 0x2545f4914f6cdd1dULL);
}

// The four bits of hash h within its word (two may coincide).
inline uint64_t StoredBits(uint64_t h) noexcept {
  return uint64_t(1) << (h & 63) | uint64_t(1) << ((h >> 6) & 63) |
         uint64_t(1) << ((h >> 12) & 63) | uint64_t(1) << ((h >> 18) & 63);
}

inline std::atomic<uint64_t>& StoredWord(StoredFilter& f, uint64_t h) noexcept {
  return f.words[(h >> 32) & f.word_mask];
}

inline void AddStored(StoredFilter& f, uint64_t h) noexcept {
  if (f.words == nullptr) return;
  std::atomic<uint64_t>& word = StoredWord(f, h);
  uint64_t bits = StoredBits(h);
  // Most keys of a flush were added before (by their first insert): a load, not a write, then.
  if ((word.load(std::memory_order_relaxed) & bits) != bits) word.fetch_or(bits);
}

// False only if no committed row of database db's tables (key_values: `relation`) has this key
// (see the top).
inline bool MayBeStored(StoredFilter& f, uint64_t h, uint32_t db, uint32_t relation) noexcept {
  if (f.words == nullptr) return true;
  uint64_t state = f.state.load(std::memory_order_seq_cst);
  if ((state & 1) == 0) return true;
  if (f.db.load(std::memory_order_relaxed) != db) return true;
  if (f.relation.load(std::memory_order_relaxed) != relation) return true;
  // A rebuild that began meanwhile may have cleared the word: it moved the state first, and its
  // clear is a release, so a word it cleared is seen with the state it moved.
  uint64_t word = StoredWord(f, h).load(std::memory_order_acquire);
  if (f.state.load(std::memory_order_seq_cst) != state) return true;
  uint64_t bits = StoredBits(h);
  return (word & bits) == bits;
}

inline bool StoredFilterValid(const StoredFilter& f) noexcept {
  return (f.state.load(std::memory_order_acquire) & 1) != 0;
}

// Clears valid and moves the generation, so that a rebuild in progress does not set it.
inline void InvalidateStored(StoredFilter& f) noexcept {
  uint64_t s = f.state.load();
  while (!f.state.compare_exchange_weak(s, ((s >> 1) + 1) << 1)) {
  }
}

// Takes the rebuild for process `pid` (false if another has it), invalidates and clears the
// filter; *token is the generation the rebuild ends under.
inline bool BeginRebuild(StoredFilter& f, int32_t pid, uint64_t* token) noexcept {
  SC_ASSERT(pid != 0);
  if (f.words == nullptr) return false;
  int32_t none = 0;
  if (!f.rebuilder.compare_exchange_strong(none, pid)) return false;
  InvalidateStored(f);
  *token = f.state.load();
  SC_ASSERT((*token & 1) == 0);
  for (uint64_t i = 0; i <= f.word_mask; i++) f.words[i].store(0, std::memory_order_release);
  return true;
}

// Ends pid's rebuild of the rows of database db's tables (key_values: `relation`); true if the
// filter became valid (no invalidation came since BeginRebuild).
inline bool FinishRebuild(StoredFilter& f, int32_t pid, uint64_t token, uint32_t db,
                          uint32_t relation) noexcept {
  SC_ASSERT(f.rebuilder.load() == pid && (token & 1) == 0);
  f.db.store(db);
  f.relation.store(relation);
  bool valid = f.state.compare_exchange_strong(token, token | 1);
  f.rebuilder.store(0);
  return valid;
}

// Gives up pid's rebuild, if it has one (an error, an exit in the middle of it).
inline void AbandonRebuild(StoredFilter& f, int32_t pid) noexcept {
  int32_t mine = pid;
  (void)f.rebuilder.compare_exchange_strong(mine, 0);
}

}  // namespace sc
