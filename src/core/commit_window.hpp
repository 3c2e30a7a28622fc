// commit_window.hpp: how a reader of a whole counter's total sees each flush either before its
// commit or after its settle, never in between.
//
// Pure C++ (no PostgreSQL header): the server keeps kCommitWindowCells of these in SharedState
// (shared/shmem.hpp), a database in cell db % kCommitWindowCells; the unit tests drive the same
// steps from threads.
//
// A total is what the tables hold (slotted_counter.counter_totals, kept by the triggers on
// key_values in the flush's own transaction) plus what the buffer holds beyond them (value -
// flushed of each resident entry). A flush moves its claimed deltas from the second part to the
// first in two steps that no lock joins: its commit makes them visible in the tables, and its
// settle then adds them to each entry's flushed. A reader in between would count them twice. So:
//   - A flusher opens the window (OpenWindow) before its commit and closes it (CloseWindow) after
//     its settle, committed or not. Two flushers of one database overlap during a hand-over:
//     `open` counts them, and every open and close moves `generation`.
//   - A reader takes the generation (ReadStart, which says no: a window is open), reads both
//     parts, the tables with a snapshot taken after ReadStart, and keeps what it read only if the
//     generation has not moved (ReadValid); otherwise it reads again.
// Why that suffices: a window that opened after ReadStart moved the generation before its commit,
// so either ReadValid sees the move, or the commit came after every read. A window open at
// ReadStart's load of `open` made it say no; one that opened and closed between ReadStart's two
// loads moved the generation after the first.
//
// Nothing here allocates, throws or fails: every function is noexcept.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/core_assert.hpp"

namespace sc {

constexpr uint32_t kCommitWindowCells = 64;

struct CommitWindow {
  std::atomic<uint64_t> generation;  // moves at every open and close
  std::atomic<uint32_t> open;        // flushers between their commit and the end of their settle
};
static_assert(std::is_standard_layout<CommitWindow>::value,
              "shared structs have a standard layout");
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the atomics of shared memory are lock-free");

inline void InitCommitWindow(CommitWindow& w) noexcept {
  w.generation.store(0, std::memory_order_relaxed);
  w.open.store(0, std::memory_order_relaxed);
}

inline void OpenWindow(CommitWindow& w) noexcept {
  w.open.fetch_add(1, std::memory_order_seq_cst);
  w.generation.fetch_add(1, std::memory_order_seq_cst);
}

inline void CloseWindow(CommitWindow& w) noexcept {
  w.generation.fetch_add(1, std::memory_order_seq_cst);
  uint32_t was = w.open.fetch_sub(1, std::memory_order_seq_cst);
  SC_ASSERT(was > 0);
  (void)was;
}

// False: a window is open, read later. True: *generation is what ReadValid compares with.
inline bool ReadStart(const CommitWindow& w, uint64_t* generation) noexcept {
  *generation = w.generation.load(std::memory_order_seq_cst);
  return w.open.load(std::memory_order_seq_cst) == 0;
}

inline bool ReadValid(const CommitWindow& w, uint64_t generation) noexcept {
  return w.generation.load(std::memory_order_seq_cst) == generation;
}

}  // namespace sc
