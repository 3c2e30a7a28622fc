// shared_key_cache.hpp: the ids of text keys that the backends of a server share
// (definitions/text_keys.hpp), in front of slotted_counter.keys: a key one backend looked up or
// was given is found by the others without a probe of the table. Each backend still caches the
// ids it uses (core/key_cache.hpp); this cache serves a backend's first use of a key, so that 32
// new sessions over 10,000 keys probe the table 10,000 times, not 320,000. It also holds the ids
// that backends give new texts of buffered counters themselves (core/text_ids.hpp), until the
// flusher has written their rows: those slots are *unwritten*, and never forgotten before.
//
// Pure C++ (no PostgreSQL header): the server runs it over shared memory with LWLocks
// (shared/shmem.hpp: SharedKeys), the unit tests over plain arrays with standard locks.
//
// The layout: sets of kKeySetWays slots, a key's set named by its hash; the sets are spread over
// kKeyCacheLocks locks (set % kKeyCacheLocks). A slot holds the text itself (up to kSharedKeyText
// bytes; a longer key is not shared), so that no hash ever stands for a text.
//
// The rules (said here once):
//   - Find: under the set's lock SHARED, a slot matches when its database, counter and text are
//     the caller's, and it is unwritten or was filled under the caller's epoch. The epoch is the
//     catalog's (shared->catalog_epoch), read by the caller before it looked the key up anywhere:
//     a drop moves it, and with it every written slot filled before stops matching, as every
//     backend's own cache is emptied. An unwritten slot matches under any epoch: a drop purges
//     its counter's slots (Purge), and Give fills one only while the epoch is the giver's, so an
//     unwritten slot always belongs to a live counter. An id never changes while its counter
//     exists, so a matching slot is right.
//   - Insert (a written id, read from the table or given by the flusher): under the set's lock
//     EXCLUSIVE, a key already there (matching) is left as it is; otherwise a victim takes it:
//     the first free slot of the set, or the first filled under an older epoch, else the slot
//     the hash names, never an unwritten one (if all are, the id is not shared).
//   - Give (an id a backend took for a text it found nowhere): under the set's lock EXCLUSIVE, a
//     matching slot wins (another backend gave the text first, or its row was written): its id
//     is the text's. Otherwise, only if the caller's check still holds under the lock (its epoch
//     and the database's key writes unchanged since its probe of the table: text_ids.hpp), a
//     victim takes the id, unwritten. No victim: no room, and the caller asks the flusher.
//   - Unwritten slots are written by their database's flusher (ForEachUnwritten, then
//     MarkWritten after its commit, under the set's lock EXCLUSIVE), and read the same way by a
//     backend that needs the text of an id whose row is not written yet.
//   - Purge: under each lock EXCLUSIVE in turn, the slots of a database (a dropped one, whose
//     OID may come again) or of one of its counters are freed, unwritten ones too.
// Nothing here allocates, throws or fails.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/core_assert.hpp"

namespace sc {

// The longest text the shared cache holds, in bytes.
constexpr uint32_t kSharedKeyText = 93;
constexpr uint32_t kKeySetWays = 8;
constexpr uint32_t kKeyCacheLocks = 16;

struct SharedKeySlot {
  uint64_t hash;    // of the text, seeded with the counter; 0: a free slot
  uint64_t epoch;   // the catalog's when it was filled
  int64_t id;
  uint32_t db;
  int32_t counter;
  uint16_t len;
  uint8_t unwritten;  // 1: given by a backend, its row not committed yet (never a victim)
  char text[kSharedKeyText];
};
static_assert(sizeof(SharedKeySlot) == 128, "a slot is two cache lines");
static_assert(std::is_standard_layout<SharedKeySlot>::value,
              "shared structs have a standard layout");

// The lock of a text's set, whatever the number of sets (a multiple of kKeyCacheLocks): the
// group of texts whose writes a giver watches (core/text_ids.hpp).
inline uint32_t KeyWriteGroup(uint64_t hash) noexcept {
  return uint32_t(hash == 0 ? 1 : hash) % kKeyCacheLocks;
}

// The number of sets for about `keys` keys: a power of two, at least kKeyCacheLocks.
inline uint32_t SharedKeySets(uint32_t keys) noexcept {
  uint32_t sets = kKeyCacheLocks;
  while (uint64_t(sets) * kKeySetWays < keys && sets < (1u << 24)) sets <<= 1;
  return sets;
}

// What Give did: gave the caller's id, found the text's (given or written before), or neither:
// no room (every slot of the set unwritten, or a text too long to share) or a changed world (the
// caller's check failed: it looks the text up again).
enum class GiveResult { kGiven, kFound, kNoRoom, kChanged };
struct Given {
  GiveResult result;
  int64_t id;  // the text's id when given or found
};

// Locks: Shared(l), ReleaseShared(l), Exclusive(l), Release(l) for l < kKeyCacheLocks.
template <typename Locks>
class SharedKeyCache {
 public:
  // Over `sets` sets (SharedKeySets) of slots, all zero (free).
  SharedKeyCache(SharedKeySlot* slots, uint32_t sets, Locks locks) noexcept
      : slots_(slots), mask_(sets - 1), locks_(locks) {
    SC_ASSERT(sets >= kKeyCacheLocks && (sets & (sets - 1)) == 0);
  }

  static bool Fits(uint32_t len) noexcept { return len <= kSharedKeyText; }

  // The id of the text for (db, counter) filled under `epoch`, or 0 (ids are positive).
  int64_t Find(uint32_t db, int32_t counter, uint64_t hash, const char* text, uint32_t len,
               uint64_t epoch) noexcept {
    if (!Fits(len)) return 0;
    hash = Nonzero(hash);
    uint32_t set = SetOf(hash);
    locks_.Shared(LockOf(set));
    int64_t id = 0;
    if (const SharedKeySlot* s = Match(set, db, counter, hash, text, len, epoch)) id = s->id;
    locks_.ReleaseShared(LockOf(set));
    return id;
  }

  // Shares id for the text of (db, counter), looked up under `epoch`; its row is written.
  void Insert(uint32_t db, int32_t counter, uint64_t hash, const char* text, uint32_t len,
              uint64_t epoch, int64_t id) noexcept {
    SC_ASSERT(id > 0);
    if (!Fits(len)) return;
    hash = Nonzero(hash);
    uint32_t set = SetOf(hash);
    locks_.Exclusive(LockOf(set));
    if (Match(set, db, counter, hash, text, len, epoch) == nullptr)
      if (SharedKeySlot* victim = Victim(set, hash, epoch))
        Fill(victim, db, counter, hash, text, len, epoch, id, false);
    locks_.Release(LockOf(set));
  }

  // Gives the text of (db, counter), found nowhere under `epoch`, the id `id` (unwritten), if no
  // slot has the text already and still_valid() holds under the lock (see the top).
  template <typename StillValid>
  Given Give(uint32_t db, int32_t counter, uint64_t hash, const char* text, uint32_t len,
             uint64_t epoch, int64_t id, StillValid still_valid) noexcept {
    SC_ASSERT(id > 0);
    if (!Fits(len)) return Given{GiveResult::kNoRoom, 0};
    hash = Nonzero(hash);
    uint32_t set = SetOf(hash);
    Given given{GiveResult::kNoRoom, 0};
    locks_.Exclusive(LockOf(set));
    if (const SharedKeySlot* s = Match(set, db, counter, hash, text, len, epoch)) {
      given = Given{GiveResult::kFound, s->id};
    } else if (!still_valid()) {
      given = Given{GiveResult::kChanged, 0};
    } else if (SharedKeySlot* victim = Victim(set, hash, epoch)) {
      Fill(victim, db, counter, hash, text, len, epoch, id, true);
      given = Given{GiveResult::kGiven, id};
    }
    locks_.Release(LockOf(set));
    return given;
  }

  // Calls visit(slot) for each unwritten slot of database db, under its set's lock SHARED.
  template <typename Visit>
  void ForEachUnwritten(uint32_t db, Visit visit) noexcept {
    for (uint32_t l = 0; l < kKeyCacheLocks; l++) {
      locks_.Shared(l);
      for (uint32_t set = l; set <= mask_; set += kKeyCacheLocks)
        for (uint32_t w = 0; w < kKeySetWays; w++) {
          const SharedKeySlot& s = slots_[size_t(set) * kKeySetWays + w];
          if (s.hash != 0 && s.unwritten != 0 && s.db == db) visit(s);
        }
      locks_.ReleaseShared(l);
    }
  }

  // The row of the unwritten id `id` (of the text of hash `hash`) committed:
  // the slot may be forgotten from now on. One already purged is left alone.
  void MarkWritten(uint32_t db, int32_t counter, uint64_t hash, int64_t id) noexcept {
    hash = Nonzero(hash);
    uint32_t set = SetOf(hash);
    locks_.Exclusive(LockOf(set));
    SharedKeySlot* first = &slots_[size_t(set) * kKeySetWays];
    for (uint32_t w = 0; w < kKeySetWays; w++) {
      SharedKeySlot& s = first[w];
      if (s.hash == hash && s.unwritten != 0 && s.db == db && s.counter == counter && s.id == id)
        s.unwritten = 0;
    }
    locks_.Release(LockOf(set));
  }

  // With no other process running (the postmaster at a clean shutdown, and as it creates the
  // shared state at the next start), without locks: copies up to `max` unwritten slots to out
  // and returns how many; puts a saved one back (under `epoch`, the new start's), false if its
  // set has no free slot.
  uint32_t CopyUnwrittenUnlocked(SharedKeySlot* out, uint32_t max) const noexcept {
    uint32_t n = 0;
    for (size_t i = 0; i < size_t(mask_ + 1) * kKeySetWays && n < max; i++)
      if (slots_[i].hash != 0 && slots_[i].unwritten != 0) out[n++] = slots_[i];
    return n;
  }
  bool RestoreUnwrittenUnlocked(const SharedKeySlot& saved, uint64_t epoch) noexcept {
    if (saved.hash == 0 || saved.unwritten == 0 || !Fits(saved.len)) return false;
    SharedKeySlot* first = &slots_[size_t(SetOf(saved.hash)) * kKeySetWays];
    for (uint32_t w = 0; w < kKeySetWays; w++)
      if (first[w].hash == 0) {
        first[w] = saved;
        first[w].epoch = epoch;
        return true;
      }
    return false;
  }

  // Frees the slots of database db (counter 0: all of its counters).
  void Purge(uint32_t db, int32_t counter) noexcept {
    for (uint32_t l = 0; l < kKeyCacheLocks; l++) {
      locks_.Exclusive(l);
      for (uint32_t set = l; set <= mask_; set += kKeyCacheLocks)
        for (uint32_t w = 0; w < kKeySetWays; w++) {
          SharedKeySlot& s = slots_[size_t(set) * kKeySetWays + w];
          if (s.hash != 0 && s.db == db && (counter == 0 || s.counter == counter)) s.hash = 0;
        }
      locks_.Release(l);
    }
  }

 private:
  static uint64_t Nonzero(uint64_t hash) noexcept { return hash == 0 ? 1 : hash; }
  uint32_t SetOf(uint64_t hash) const noexcept { return uint32_t(hash) & mask_; }
  static uint32_t LockOf(uint32_t set) noexcept { return set % kKeyCacheLocks; }

  const SharedKeySlot* Match(uint32_t set, uint32_t db, int32_t counter, uint64_t hash,
                             const char* text, uint32_t len, uint64_t epoch) const noexcept {
    const SharedKeySlot* first = &slots_[size_t(set) * kKeySetWays];
    for (uint32_t w = 0; w < kKeySetWays; w++) {
      const SharedKeySlot& s = first[w];
      if (s.hash == hash && (s.unwritten != 0 || s.epoch == epoch) && s.db == db &&
          s.counter == counter && s.len == len && memcmp(s.text, text, len) == 0)
        return &s;
    }
    return nullptr;
  }

  // The slot a new key of the set takes (see the top), or nullptr if every slot is unwritten.
  SharedKeySlot* Victim(uint32_t set, uint64_t hash, uint64_t epoch) noexcept {
    SharedKeySlot* first = &slots_[size_t(set) * kKeySetWays];
    for (uint32_t w = 0; w < kKeySetWays; w++)
      if (first[w].hash == 0 || (first[w].unwritten == 0 && first[w].epoch < epoch))
        return &first[w];
    uint32_t named = uint32_t(hash >> 32) % kKeySetWays;
    for (uint32_t w = 0; w < kKeySetWays; w++) {
      SharedKeySlot* s = &first[(named + w) % kKeySetWays];
      if (s->unwritten == 0) return s;
    }
    return nullptr;
  }

  static void Fill(SharedKeySlot* s, uint32_t db, int32_t counter, uint64_t hash,
                   const char* text, uint32_t len, uint64_t epoch, int64_t id,
                   bool unwritten) noexcept {
    s->hash = hash;
    s->epoch = epoch;
    s->id = id;
    s->db = db;
    s->counter = counter;
    s->len = uint16_t(len);
    s->unwritten = unwritten ? 1 : 0;
    memcpy(s->text, text, len);
  }

  SharedKeySlot* slots_;
  uint32_t mask_;
  Locks locks_;
};

}  // namespace sc
