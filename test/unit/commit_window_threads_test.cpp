// src/core/commit_window.hpp from threads (normally and under ThreadSanitizer), against a model
// of a total in two parts: "tables" (what commits made visible) and "buffer" (value - flushed of
// the entries). Writers add to the buffer; two flushers (overlapping, as during a hand-over) each
// move an amount from the buffer to the tables in two steps, a commit and a settle, inside a
// window. Readers read both parts as sc_total does. What a user would notice is checked: every
// total a reader keeps lies between what the writers had added before its read started and what
// they had added when it ended: a read across a commit and its settle would count the moved
// amount twice (or not at all).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/commit_window.hpp"

namespace {

TEST(CommitWindowThreads, EveryTotalKeptIsOneThatWas) {
  sc::CommitWindow window;
  sc::InitCommitWindow(window);
  std::atomic<int64_t> tables{0};
  std::atomic<int64_t> buffer{0};
  std::atomic<int64_t> added{0};  // by the writers, after their add to the buffer
  std::atomic<bool> stop{false};
  std::atomic<int64_t> kept{0}, retried{0}, bad{0};

  std::vector<std::thread> threads;
  for (int w = 0; w < 2; w++)
    threads.emplace_back([&] {
      while (!stop.load()) {
        buffer.fetch_add(1);
        added.fetch_add(1);
      }
    });
  // Each flusher moves what it claimed: the claim leaves the buffer's part as it is (the
  // entries' flushed moves only at the settle).
  for (int f = 0; f < 2; f++)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; i++) {
        // Between two flushes, readers get their turn (a flush runs every flush_interval).
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        int64_t claim = buffer.load() / 4;
        sc::OpenWindow(window);
        tables.fetch_add(claim);   // the commit
        std::this_thread::yield();
        buffer.fetch_sub(claim);   // the settle
        sc::CloseWindow(window);
      }
    });
  for (int r = 0; r < 2; r++)
    threads.emplace_back([&] {
      while (!stop.load()) {
        int64_t before = added.load();
        uint64_t generation;
        if (!sc::ReadStart(window, &generation)) {
          std::this_thread::yield();
          continue;
        }
        int64_t total = tables.load();
        std::this_thread::yield();
        total += buffer.load();
        if (!sc::ReadValid(window, generation)) {
          retried.fetch_add(1);
          continue;
        }
        int64_t after = added.load();
        // A writer's add to the buffer precedes its count in `added` by at most one each.
        if (total < before || total > after + 2) bad.fetch_add(1);
        kept.fetch_add(1);
      }
    });
  threads[2].join();
  threads[3].join();
  stop.store(true);
  threads[0].join();
  threads[1].join();
  threads[4].join();
  threads[5].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(kept.load(), 0);
  EXPECT_EQ(tables.load() + buffer.load(), added.load());
  EXPECT_EQ(window.open.load(), 0u);
}

}  // namespace
