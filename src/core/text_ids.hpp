// text_ids.hpp: the ids that backends give new text keys of buffered counters themselves, so
// that a new text costs no round trip to the flusher (definitions/text_keys.hpp). Two parts per
// database, both in its slot (shared/shmem.hpp: DatabaseSlot):
//
// TextIdRange, under the Mutex the caller passes (the slot's ids_mutex): ids of
// slotted_counter.keys_id_seq that the flusher reserved (one nextval and one setval past them, in
// a transaction of its own, committed before it publishes them) under catalog epoch `epoch`. A
// backend takes the next one (Take) only under that epoch: a dropped extension takes its
// sequence with it, and the epoch its drop moved no backend matches. The flusher refills the
// range (Refill) when a quarter of it is left, or it is empty or of an older epoch, with
// twice as many ids as were taken since the last refill (between kMinRange and kMaxRange); what
// was left of the old range is skipped: a gap in the ids, as a rolled-back nextval leaves one.
//
// KeyWrites, atomics read without a lock: how many writes of slotted_counter.keys rows by the
// flusher began and ended, per group of texts (KeyWriteGroup: the lock of the text's set). A write
// that gives ids itself (an intern request: the flusher's nextval) counts as begun before it looks
// at the shared key cache and as ended after its transaction ended; the write of unwritten ids
// counts as begun and ended after its commit and before it marks the slots written (after which
// they may be forgotten). A backend that found a text nowhere gives it an id only if no write was
// in progress when it read them (Read: ended first, then begun) before its probe of the table, and
// neither moved when it checks again (Unchanged) under the lock of the text's set in the shared key
// cache: so no row it could have missed exists, and none is being made, for that text
// (core/shared_key_cache.hpp: Give). A flusher that exits in the middle of a write ends it on its
// way out (a crash resets all of shared memory).
//
// Pure C++ (no PostgreSQL header). Nothing here allocates, throws or fails.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"
#include "core/shared_key_cache.hpp"

namespace sc {

constexpr int64_t kMinTextIdRange = 256;
constexpr int64_t kMaxTextIdRange = 1 << 20;

struct TextIdRange {
  uint32_t db;     // the database whose sequence it comes from (a slot may change databases)
  int64_t next;    // the next id to take
  int64_t end;     // one past the last
  int64_t size;    // how many the range held
  int64_t taken;   // ids taken since the last refill
  uint64_t epoch;  // the catalog's when the flusher reserved it
  bool asked;      // a backend found it empty or low since the last refill
};
static_assert(std::is_standard_layout<TextIdRange>::value,
              "shared structs have a standard layout");

// The next id of the range of database db under `epoch`, or 0 (none left, or reserved for
// another database or under another epoch).
// *low: none was left (the taker asks the flusher for its text's id, which wakes it), or the
// range just fell to a quarter (the taker wakes the flusher); the flusher refills only a range a
// backend asked for (a database without new texts reserves none).
template <typename Mutex>
int64_t TakeTextId(TextIdRange& r, Mutex& mutex, uint32_t db, uint64_t epoch,
                   bool* low) noexcept {
  mutex.lock();
  int64_t id = 0;
  if (r.db == db && r.epoch == epoch && r.next < r.end) {
    id = r.next++;
    r.taken++;
  }
  *low = id == 0 || r.end - r.next == r.size / 4;
  if (*low) r.asked = true;
  mutex.unlock();
  SC_ASSERT(id >= 0);
  return id;
}

// How many ids the flusher of database db reserves now under `epoch`, or 0 if the range needs
// none. A range with ids left is refilled at a quarter; one with none (or of another database or
// epoch) only after the flusher served requests (after_requests): a backend that found it empty
// asked the flusher for its text's id, and that id, given first, is smaller than the range.
template <typename Mutex>
int64_t TextIdsWanted(TextIdRange& r, Mutex& mutex, uint32_t db, uint64_t epoch,
                      bool after_requests) noexcept {
  mutex.lock();
  bool usable = r.next < r.end && r.db == db && r.epoch == epoch;
  bool due = r.asked && (usable ? r.end - r.next <= r.size / 4 : after_requests);
  int64_t want = r.taken * 2;
  mutex.unlock();
  if (!due) return 0;
  if (want < kMinTextIdRange) return kMinTextIdRange;
  return want > kMaxTextIdRange ? kMaxTextIdRange : want;
}

// Publishes the reserved ids [first, first + n) of database db, committed, under `epoch`.
template <typename Mutex>
void RefillTextIds(TextIdRange& r, Mutex& mutex, uint32_t db, int64_t first, int64_t n,
                   uint64_t epoch) noexcept {
  SC_ASSERT(first > 0 && n > 0);
  mutex.lock();
  r = TextIdRange{db, first, first + n, n, 0, epoch, false};
  mutex.unlock();
}

// A range no backend can take from (a slot reset, a dropped extension).
template <typename Mutex>
void EmptyTextIds(TextIdRange& r, Mutex& mutex) noexcept {
  mutex.lock();
  r = TextIdRange{0, 0, 0, 0, 0, 0, false};
  mutex.unlock();
}

// Per group of texts: the texts whose sets the shared key cache keeps under one lock
// (KeyWriteGroup), so that the flusher's gift of one text holds up the givers of a sixteenth of
// the others only.
struct KeyWrites {
  std::atomic<uint64_t> begun[kKeyCacheLocks];
  std::atomic<uint64_t> ended[kKeyCacheLocks];
  std::atomic<uint64_t> given;   // gifts begun, so a flusher skips a needless scan
  std::atomic<uint64_t> filled;  // gifts made, so a reader of their texts skips one
};

// Every count at 0: a database slot's as shared memory is made (and a test's).
inline void InitKeyWrites(KeyWrites& w) noexcept {
  for (uint32_t g = 0; g < kKeyCacheLocks; g++) {
    w.begun[g].store(0);
    w.ended[g].store(0);
  }
  w.given.store(0);
  w.filled.store(0);
}

struct KeyWritesSeen {
  uint64_t begun;
  uint64_t ended;
  bool Quiet() const noexcept { return begun == ended; }
};

inline KeyWritesSeen ReadKeyWrites(const KeyWrites& w, uint32_t group) noexcept {
  SC_ASSERT(group < kKeyCacheLocks);
  uint64_t ended = w.ended[group].load(std::memory_order_seq_cst);
  uint64_t begun = w.begun[group].load(std::memory_order_seq_cst);
  return KeyWritesSeen{begun, ended};
}

inline bool KeyWritesUnchanged(const KeyWrites& w, uint32_t group, KeyWritesSeen seen) noexcept {
  KeyWritesSeen now = ReadKeyWrites(w, group);
  return now.begun == seen.begun && now.ended == seen.ended;
}

inline void BeginKeyWrite(KeyWrites& w, uint32_t group) noexcept {
  SC_ASSERT(group < kKeyCacheLocks);
  w.begun[group].fetch_add(1, std::memory_order_seq_cst);
}

inline void EndKeyWrite(KeyWrites& w, uint32_t group) noexcept {
  SC_ASSERT(group < kKeyCacheLocks && w.ended[group].load() < w.begun[group].load());
  w.ended[group].fetch_add(1, std::memory_order_seq_cst);
}

// A backend is about to give an id: counted before its slot is filled (after which any backend
// may use it), so a flusher that reads the count after its claims, and finds it where it was
// when a scan of the cache found no unwritten slot of the database, has nothing to write. A
// count whose gift did not happen only costs a scan.
// Returns the new count.
inline uint64_t NoteTextGiven(KeyWrites& w) noexcept {
  return w.given.fetch_add(1, std::memory_order_seq_cst) + 1;
}

// A backend gave an id: counted after its slot was filled, so a reader that reads the count
// before it reads the unwritten slots, and finds it unchanged later, knows that every id given
// meanwhile was among them.
inline void NoteTextFilled(KeyWrites& w) noexcept {
  w.filled.fetch_add(1, std::memory_order_seq_cst);
}
inline uint64_t TextsFilled(const KeyWrites& w) noexcept {
  return w.filled.load(std::memory_order_seq_cst);
}

// How many ids given make the flusher write them at once, before the next flush: a sixteenth of
// the shared key cache (`slots` slots), so that its sets seldom fill with unwritten ids (a text
// whose set is full is given its id by the flusher, a round trip). The giver of every such
// count-th id wakes the flusher.
inline uint64_t GivenIdsBetweenWrites(uint64_t slots) noexcept {
  return slots / 16 < 256 ? 256 : slots / 16;
}
inline uint64_t TextsGiven(const KeyWrites& w) noexcept {
  return w.given.load(std::memory_order_seq_cst);
}

// Rows of keys of a group committed (the unwritten ids of a flush step): both move, before the
// slots are marked written.
inline void NoteKeysWritten(KeyWrites& w, uint32_t group) noexcept {
  BeginKeyWrite(w, group);
  EndKeyWrite(w, group);
}

}  // namespace sc
