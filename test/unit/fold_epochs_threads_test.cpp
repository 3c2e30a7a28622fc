// src/core/fold_epochs.hpp from threads (normally and under ThreadSanitizer), against a model of
// slotted_counter.deltas and key_values: committers insert deltas and tag their entries, two
// flushers (overlapping, as during a hand-over) take epochs and fold what they see but the
// counters a dropping transaction holds, evictors let an entry go only when Folded says so, and
// a bucket dropper makes loads read deltas. What a user would notice is checked: no entry leaves
// the buffer while a delta committed into it is outside key_values, and no load skips the deltas
// while a purged entry's delta is outside key_values.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <thread>
#include <vector>

#include "core/fold_epochs.hpp"

namespace {

struct StdMutex {
  std::mutex m;
  void lock() { m.lock(); }
  void unlock() { m.unlock(); }
};

constexpr int32_t kCounters = 24;
// Commits go on until this many folds ran (each run of 8 folds skips another way).
constexpr int kFolds = 400;

// The tables: deltas not yet folded, and the ids of those folded into key_values. One lock: a
// transaction's commit and a fold's snapshot are atomic with respect to each other.
struct Tables {
  std::mutex m;
  std::vector<std::pair<int32_t, uint64_t>> deltas;  // (counter, commit id)
  std::set<uint64_t> folded;
  bool Folded(uint64_t id) {
    std::lock_guard<std::mutex> g(m);
    return folded.count(id) != 0;
  }
};

// A committed delta and the tag its entry took.
struct Commit {
  int32_t counter;
  uint64_t id;
  uint32_t tag;
};

TEST(FoldEpochsThreads, NoDeltaLeavesTheBufferBeforeItIsFolded) {
  sc::FoldEpochs f;
  sc::InitFoldEpochs(f);
  StdMutex fold_mutex;
  Tables tables;
  std::mutex commits_mutex;
  std::vector<Commit> commits;
  std::unordered_map<uint64_t, uint32_t> tags;  // commit id -> tag
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> wrong_evictions{0}, wrong_loads{0}, evictions{0}, folds{0}, skipping_folds{0},
      drops{0};

  auto committer = [&](int seed) {
    uint32_t r = uint32_t(seed) * 2654435761u + 1;
    // Until every side ran enough: events, not time.
    for (int i = 0;
         i < 2000 || folds.load() < kFolds || evictions.load() < 100 || drops.load() < 20; i++) {
      r = r * 1103515245u + 12345u;
      int32_t counter = int32_t((r >> 8) % kCounters);
      uint64_t id = next_id.fetch_add(1);
      {
        std::lock_guard<std::mutex> g(tables.m);  // the commit becomes visible
        tables.deltas.emplace_back(counter, id);
      }
      uint32_t tag = sc::CommitEpoch(f);  // then the settle tags the entry
      std::lock_guard<std::mutex> g(commits_mutex);
      commits.push_back(Commit{counter, id, tag});
      tags[id] = tag;
    }
  };

  // Skips, for runs of 8 folds, the counters a dropping transaction holds: one, a few, or more
  // than kMaxUnfolded.
  auto flusher = [&] {
    while (!stop.load()) {
      int run = folds.load() / 8;
      std::vector<int32_t> skipped;
      switch (run % 8) {
        case 4:
        case 7:
          skipped.push_back(int32_t(run % kCounters));
          break;
        case 5:
          for (int32_t c = 0; c < 3; c++) skipped.push_back(int32_t((run + c) % kCounters));
          break;
        case 6:
          for (int32_t c = 0; c < sc::kMaxUnfolded + 2; c++) skipped.push_back(c);
          break;
      }
      uint32_t epoch = sc::TakeFoldEpoch(f);
      {
        std::lock_guard<std::mutex> g(tables.m);  // the fold's snapshot and its commit
        auto keep = std::stable_partition(
            tables.deltas.begin(), tables.deltas.end(), [&](const std::pair<int32_t, uint64_t>& d) {
              return std::find(skipped.begin(), skipped.end(), d.first) != skipped.end();
            });
        for (auto it = keep; it != tables.deltas.end(); ++it) tables.folded.insert(it->second);
        tables.deltas.erase(keep, tables.deltas.end());
      }
      sc::PublishFold(f, fold_mutex, epoch, skipped.data(), int(skipped.size()));
      folds++;
      if (!skipped.empty()) skipping_folds++;
      std::this_thread::yield();
    }
  };

  // Asks whether entries may leave the buffer: of a delta still outside key_values (those of the
  // skipped counters, mostly), or of a recent commit.
  auto evictor = [&](int seed) {
    uint32_t r = uint32_t(seed) * 40503u + 3;
    while (!stop.load()) {
      r = r * 1103515245u + 12345u;
      Commit c{0, 0, 0};
      if (r & 0x100) {
        std::lock_guard<std::mutex> g(tables.m);
        if (tables.deltas.empty()) continue;
        const auto& d = tables.deltas[(r >> 12) % tables.deltas.size()];
        c.counter = d.first;
        c.id = d.second;
      }
      {
        std::lock_guard<std::mutex> g(commits_mutex);
        if (c.id == 0) {
          if (commits.empty()) continue;
          size_t recent = std::min<size_t>(commits.size(), 64);
          c = commits[commits.size() - 1 - (r >> 12) % recent];
        } else {
          auto tag = tags.find(c.id);
          if (tag == tags.end()) continue;  // not settled yet
          c.tag = tag->second;
        }
      }
      if (sc::Folded(f, fold_mutex, c.counter, c.tag)) {
        evictions++;
        if (!tables.Folded(c.id)) wrong_evictions++;
      }
    }
  };

  // A bucket drop purges entries whose deltas stay (a commit after its DELETE): loads must read
  // the deltas until those are folded.
  auto dropper = [&] {
    while (!stop.load()) {
      uint64_t id;
      {
        std::lock_guard<std::mutex> g(tables.m);
        if (tables.deltas.empty()) continue;
        id = tables.deltas.back().second;
      }
      sc::RequireDeltaReads(f);  // then the entry is purged
      drops++;
      for (int i = 0; i < 50; i++) {
        if (!sc::LoadsReadDeltas(f) && !tables.Folded(id)) wrong_loads++;
        std::this_thread::yield();
      }
    }
  };

  // The order of the epochs, read in an order that makes each comparison hold at every moment.
  std::atomic<int> broken_order{0};
  auto checker = [&] {
    while (!stop.load()) {
      uint32_t until = f.deltas_until.load();
      uint32_t folded = f.folded_epoch.load();
      uint32_t evictable = f.evictable_epoch.load();
      uint32_t fold = f.fold_epoch.load();
      if (until > fold || folded >= fold || evictable >= fold) broken_order++;
      fold_mutex.lock();
      if (f.folded_epoch.load() > f.evictable_epoch.load()) broken_order++;
      fold_mutex.unlock();
    }
  };

  std::vector<std::thread> workers;
  workers.emplace_back(flusher);
  workers.emplace_back(flusher);
  workers.emplace_back(evictor, 1);
  workers.emplace_back(dropper);
  workers.emplace_back(checker);
  std::vector<std::thread> committers;
  for (int i = 0; i < 3; i++) committers.emplace_back(committer, i);
  for (auto& t : committers) t.join();
  // Every delta folded at the end: a fold that skips none after the last commit.
  while (!stop.load()) {
    std::lock_guard<std::mutex> g(tables.m);
    if (tables.deltas.empty()) stop = true;
  }
  for (auto& t : workers) t.join();
  uint32_t last = sc::TakeFoldEpoch(f);
  sc::PublishFold(f, fold_mutex, last, nullptr, 0);

  EXPECT_EQ(wrong_evictions.load(), 0) << "an entry left the buffer with a delta not in key_values";
  EXPECT_EQ(wrong_loads.load(), 0) << "a load skipped deltas a purged entry had not folded";
  EXPECT_EQ(broken_order.load(), 0);
  EXPECT_GE(evictions.load(), 100);
  EXPECT_GE(drops.load(), 20);
  EXPECT_GT(skipping_folds.load(), 0);
  EXPECT_FALSE(sc::LoadsReadDeltas(f));
  // Once everything is folded, every entry may go.
  for (const Commit& c : commits) ASSERT_TRUE(sc::Folded(f, fold_mutex, c.counter, c.tag));
  EXPECT_EQ(tables.folded.size(), commits.size());
}

}  // namespace
