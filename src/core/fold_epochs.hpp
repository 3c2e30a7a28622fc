// fold_epochs.hpp: when the deltas a transaction committed into a counter's entry are in
// slotted_counter.key_values, so that the entry may leave the buffer and loads need not read
// slotted_counter.deltas.
//
// Pure C++ (no PostgreSQL header): the server runs these steps on each DatabaseSlot's FoldEpochs
// (shared/shmem.hpp) with the slot's spinlock fold_mutex as the Mutex (sc::SpinMutex), the unit
// tests with a std::mutex. The rules, every one of them:
//   - A commit of transactional deltas, once visible, tags the entries it settles with fold_epoch
//     (CommitEpoch; counter_table.hpp: Entry::commit_epoch).
//   - A flush takes fold_epoch's value v and moves it on (TakeFoldEpoch) before its fold reads
//     the deltas: every commit tagged v or less is visible to that fold, and every commit the
//     fold cannot see is tagged v + 1 or more. The fold moves the deltas of every counter it
//     locked; those of the counters it had to skip (locked by a transaction dropping them or their
//     buckets) stay.
//   - Once the fold committed (PublishFold): if it skipped none, folded_epoch becomes v (every
//     delta tagged v or less is in key_values); if it skipped at most kMaxUnfolded, evictable_epoch
//     becomes v and `unfolded` the counters it skipped, both together under the mutex (more skipped
//     leave both as they were). A fold that ends after a newer one (two flushers overlap during a
//     hand-over) moves neither back.
//   - An entry of `counter` tagged e may leave the buffer only if, read together under the mutex,
//     e <= evictable_epoch and counter is not in `unfolded` (Folded).
//   - Loads read the deltas too while folded_epoch < deltas_until (LoadsReadDeltas). deltas_until
//     moves up to fold_epoch (RequireDeltaReads) when the slot is (re)assigned (deltas from before
//     a restart) and when a bucket drop purged entries whose deltas a later commit kept: so until
//     a complete fold that took an epoch after it.
//   - The four epochs are atomics that only move forward. fold_epoch is moved only by fetch_add,
//     deltas_until by compare-and-swap to a larger value, folded_epoch and evictable_epoch (with
//     unfolded_count and unfolded) only under the mutex. So at every moment
//     deltas_until <= fold_epoch, folded_epoch < fold_epoch, folded_epoch <= evictable_epoch
//     (both written under the mutex) and evictable_epoch < fold_epoch.
//
// Nothing here allocates, throws or fails: every function is noexcept. The asserts (SC_ASSERT)
// check the rules above at each change.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"

namespace sc {

// How many skipped counters a fold may name and still let the other counters' entries go.
constexpr int kMaxUnfolded = 16;

// One database's fold epochs, in its slot of shared memory.
struct FoldEpochs {
  std::atomic<uint32_t> fold_epoch;       // the epoch commits tag now; the next fold takes it
  std::atomic<uint32_t> folded_epoch;     // every delta tagged this or less is in key_values
  std::atomic<uint32_t> deltas_until;     // loads read deltas while folded_epoch is below this
  std::atomic<uint32_t> evictable_epoch;  // the mutex; with unfolded_count and unfolded
  int32_t unfolded_count;                 // the mutex
  int32_t unfolded[kMaxUnfolded];         // the mutex: counters the last published fold skipped
};
static_assert(std::is_standard_layout<FoldEpochs>::value, "shared structs have a standard layout");
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "the atomics of shared memory are lock-free");

// A slot's epochs when shared memory is made: no fold yet, loads read the deltas (from before a
// restart) until the first complete one.
inline void InitFoldEpochs(FoldEpochs& f) noexcept {
  f.fold_epoch.store(1, std::memory_order_relaxed);
  f.folded_epoch.store(0, std::memory_order_relaxed);
  f.deltas_until.store(1, std::memory_order_relaxed);
  f.evictable_epoch.store(0, std::memory_order_relaxed);
  f.unfolded_count = 0;
}

// Makes loads read the deltas until a complete fold of an epoch taken after this call.
inline void RequireDeltaReads(FoldEpochs& f) noexcept {
  uint32_t until = f.deltas_until.load(std::memory_order_seq_cst);
  uint32_t epoch = f.fold_epoch.load(std::memory_order_seq_cst);
  SC_ASSERT(until <= epoch);
  while (until < epoch && !f.deltas_until.compare_exchange_weak(until, epoch)) {
  }
  SC_ASSERT(f.deltas_until.load(std::memory_order_seq_cst) >= epoch);
}

// Whether loads must read slotted_counter.deltas too.
inline bool LoadsReadDeltas(const FoldEpochs& f) noexcept {
  return f.folded_epoch.load(std::memory_order_seq_cst) <
         f.deltas_until.load(std::memory_order_seq_cst);
}

// A slot just (re)assigned to a database: a new epoch (epochs move forward only, so a reader of
// the old database's values sees no step back), no counter left unfolded, and loads read the
// deltas until the new database's first complete fold.
template <typename Mutex>
void ResetFoldEpochs(FoldEpochs& f, Mutex& mutex) noexcept {
  uint32_t previous = f.fold_epoch.fetch_add(1, std::memory_order_seq_cst);
  SC_ASSERT(previous + 1 != 0);  // 4 billion folds: never in a slot's life
  mutex.lock();
  SC_ASSERT(f.evictable_epoch.load(std::memory_order_relaxed) <= previous);
  f.unfolded_count = 0;
  mutex.unlock();
  RequireDeltaReads(f);
}

// The epoch a commit, visible by now, tags the entries it settles with.
inline uint32_t CommitEpoch(const FoldEpochs& f) noexcept {
  return f.fold_epoch.load(std::memory_order_seq_cst);
}

// A flush, before its fold reads the deltas: the epoch it folds (moved on for later commits).
inline uint32_t TakeFoldEpoch(FoldEpochs& f) noexcept {
  uint32_t folded = f.folded_epoch.load(std::memory_order_seq_cst);
  uint32_t epoch = f.fold_epoch.fetch_add(1, std::memory_order_seq_cst);
  SC_ASSERT(epoch > folded);
  SC_ASSERT(epoch + 1 != 0);
  return epoch;
}

// After the fold of `epoch` committed, having skipped the counters skipped[0 .. nskipped): see
// the rules at the top.
template <typename Mutex>
void PublishFold(FoldEpochs& f, Mutex& mutex, uint32_t epoch, const int32_t* skipped,
                 int nskipped) noexcept {
  SC_ASSERT(epoch < f.fold_epoch.load(std::memory_order_seq_cst));  // taken, moved on
  SC_ASSERT(nskipped >= 0);
  if (nskipped > kMaxUnfolded) return;
  mutex.lock();
  uint32_t evictable = f.evictable_epoch.load(std::memory_order_relaxed);
  uint32_t folded = f.folded_epoch.load(std::memory_order_relaxed);
  SC_ASSERT(folded <= evictable);
  if (epoch > evictable) {
    for (int i = 0; i < nskipped; i++) f.unfolded[i] = skipped[i];
    f.unfolded_count = nskipped;
    f.evictable_epoch.store(epoch, std::memory_order_seq_cst);
  }
  if (nskipped == 0 && epoch > folded) f.folded_epoch.store(epoch, std::memory_order_seq_cst);
  SC_ASSERT(f.folded_epoch.load(std::memory_order_relaxed) <=
            f.evictable_epoch.load(std::memory_order_relaxed));
  SC_ASSERT(f.evictable_epoch.load(std::memory_order_relaxed) >= evictable);
  mutex.unlock();
}

// Whether every delta committed into an entry of `counter` tagged `epoch` is in key_values.
template <typename Mutex>
bool Folded(const FoldEpochs& f, Mutex& mutex, int32_t counter, uint32_t epoch) noexcept {
  mutex.lock();
  SC_ASSERT(f.unfolded_count >= 0 && f.unfolded_count <= kMaxUnfolded);
  bool folded = epoch <= f.evictable_epoch.load(std::memory_order_relaxed);
  for (int i = 0; folded && i < f.unfolded_count; i++) folded = f.unfolded[i] != counter;
  mutex.unlock();
  return folded;
}

}  // namespace sc
