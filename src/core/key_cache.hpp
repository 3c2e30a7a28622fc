// key_cache.hpp: a backend's cache of the ids of text keys (definitions/text_keys.hpp): an
// open-addressing table of (counter, text) -> id over slots and text the caller allocates. An id
// never changes while its counter exists, so the cache is only ever emptied whole (when it is
// full, or when a counter was dropped): it has no deletion.
//
// Pure C++ (no PostgreSQL header): the unit tests drive it over plain arrays.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/core_assert.hpp"

namespace sc {

struct CachedKey {
  uint64_t hash;     // of the text, seeded with the counter; 0 marks a free slot
  const char* text;  // len bytes the caller keeps as long as the slot
  uint32_t len;
  int32_t counter;
  int64_t id;
};

class KeyCache {
 public:
  // The cache over `capacity` slots (a power of two), which it empties.
  void Reset(CachedKey* slots, uint32_t capacity) noexcept {
    SC_ASSERT(capacity >= 2 && (capacity & (capacity - 1)) == 0);
    slots_ = slots;
    mask_ = capacity - 1;
    used_ = 0;
    memset(slots_, 0, sizeof(CachedKey) * capacity);
  }

  bool Ready() const noexcept { return slots_ != nullptr; }

  // Whether another key fits: at most three quarters of the slots are used, so that a probe
  // meets a free slot soon.
  bool Full() const noexcept { return (used_ + 1) * 4 > (uint64_t(mask_) + 1) * 3; }

  // The id of the len bytes at text for counter, or 0 (ids are positive) if not cached.
  int64_t Find(int32_t counter, uint64_t hash, const char* text, uint32_t len) const noexcept {
    hash = Nonzero(hash);
    for (uint32_t i = uint32_t(hash) & mask_;; i = (i + 1) & mask_) {
      const CachedKey& slot = slots_[i];
      if (slot.hash == 0) return 0;
      if (slot.hash == hash && slot.counter == counter && slot.len == len &&
          memcmp(slot.text, text, len) == 0)
        return slot.id;
    }
  }

  // Caches id for the text (not cached yet; text stays the caller's); the cache must not be Full.
  void Insert(int32_t counter, uint64_t hash, const char* text, uint32_t len,
              int64_t id) noexcept {
    SC_ASSERT(!Full() && id > 0);
    hash = Nonzero(hash);
    uint32_t i = uint32_t(hash) & mask_;
    while (slots_[i].hash != 0) {
      SC_ASSERT(!(slots_[i].hash == hash && slots_[i].counter == counter &&
                  slots_[i].len == len && memcmp(slots_[i].text, text, len) == 0));
      i = (i + 1) & mask_;
    }
    slots_[i] = CachedKey{hash, text, len, counter, id};
    used_++;
  }

  uint32_t size() const noexcept { return used_; }

 private:
  static uint64_t Nonzero(uint64_t hash) noexcept { return hash == 0 ? 1 : hash; }

  CachedKey* slots_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t used_ = 0;
};

}  // namespace sc
