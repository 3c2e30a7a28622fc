// shared_key_cache.hpp: the ids of text keys that the backends of a server share
// (definitions/text_keys.hpp), in front of slotted_counter.keys: a key one backend looked up or
// was given is found by the others without a probe of the table. Each backend still caches the
// ids it uses (core/key_cache.hpp); this cache serves a backend's first use of a key, so that 32
// new sessions over 10,000 keys probe the table 10,000 times, not 320,000.
//
// Pure C++ (no PostgreSQL header): the server runs it over shared memory with LWLocks
// (shared/shmem.hpp: SharedKeys), the unit tests over plain arrays with standard locks.
//
// The layout: sets of kKeySetWays slots, a key's set named by its hash; the sets are spread over
// kKeyCacheLocks locks (set % kKeyCacheLocks). A slot holds the text itself (up to kSharedKeyText
// bytes; a longer key is not shared), so that no hash ever stands for a text.
//
// The rules (said here once):
//   - Find: under the set's lock SHARED, a slot matches when its database, counter, text and
//     epoch are the caller's. The epoch is the catalog's (shared->catalog_epoch), read by the
//     caller before it looked the key up anywhere: a drop moves it, and with it every slot filled
//     before stops matching, as every backend's own cache is emptied. An id never changes while
//     its counter exists, so a matching slot is right.
//   - Insert: under the set's lock EXCLUSIVE, a key already there (same epoch) is left as it is;
//     otherwise the first free slot of the set takes it, or the first filled under an older
//     epoch, else the slot the hash names (a cache: what it forgets is looked up again).
//   - Purge: under each lock EXCLUSIVE in turn, the slots of a database (a dropped one, whose
//     OID may come again) or of one of its counters are freed.
// Nothing here allocates, throws or fails.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/core_assert.hpp"

namespace sc {

// The longest text the shared cache holds, in bytes.
constexpr uint32_t kSharedKeyText = 94;
constexpr uint32_t kKeySetWays = 8;
constexpr uint32_t kKeyCacheLocks = 16;

struct SharedKeySlot {
  uint64_t hash;    // of the text, seeded with the counter; 0: a free slot
  uint64_t epoch;   // the catalog's when it was filled
  int64_t id;
  uint32_t db;
  int32_t counter;
  uint16_t len;
  char text[kSharedKeyText];
};
static_assert(sizeof(SharedKeySlot) == 128, "a slot is two cache lines");
static_assert(std::is_standard_layout<SharedKeySlot>::value,
              "shared structs have a standard layout");

// The number of sets for about `keys` keys: a power of two, at least kKeyCacheLocks.
inline uint32_t SharedKeySets(uint32_t keys) noexcept {
  uint32_t sets = kKeyCacheLocks;
  while (uint64_t(sets) * kKeySetWays < keys && sets < (1u << 24)) sets <<= 1;
  return sets;
}

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

  // Shares id for the text of (db, counter), looked up under `epoch`.
  void Insert(uint32_t db, int32_t counter, uint64_t hash, const char* text, uint32_t len,
              uint64_t epoch, int64_t id) noexcept {
    SC_ASSERT(id > 0);
    if (!Fits(len)) return;
    hash = Nonzero(hash);
    uint32_t set = SetOf(hash);
    locks_.Exclusive(LockOf(set));
    if (Match(set, db, counter, hash, text, len, epoch) == nullptr) {
      SharedKeySlot* first = &slots_[size_t(set) * kKeySetWays];
      SharedKeySlot* victim = &first[(hash >> 32) % kKeySetWays];
      for (uint32_t w = 0; w < kKeySetWays; w++)
        if (first[w].hash == 0 || first[w].epoch < epoch) {
          victim = &first[w];
          break;
        }
      victim->hash = hash;
      victim->epoch = epoch;
      victim->id = id;
      victim->db = db;
      victim->counter = counter;
      victim->len = uint16_t(len);
      memcpy(victim->text, text, len);
    }
    locks_.Release(LockOf(set));
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
      if (s.hash == hash && s.epoch == epoch && s.db == db && s.counter == counter &&
          s.len == len && memcmp(s.text, text, len) == 0)
        return &s;
    }
    return nullptr;
  }

  SharedKeySlot* slots_;
  uint32_t mask_;
  Locks locks_;
};

}  // namespace sc
