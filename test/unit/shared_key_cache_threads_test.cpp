// The shared ids of text keys (src/core/shared_key_cache.hpp) under threads that share and find
// keys of overlapping sets at once: a key found has its own id, never another's; threads that
// give the same new texts ids at once, while another marks them written and shares others, agree
// on one id per text (run under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/shared_key_cache.hpp"
#include "core/text_ids.hpp"
#include "test_support.hpp"

namespace {

using sc_test::StdLocks;

TEST(SharedKeyCacheThreads, AFoundKeyHasItsOwnId) {
  constexpr uint32_t kSets = 16;
  constexpr int kKeys = 400;  // three times the slots: sets keep forgetting
  std::vector<sc::SharedKeySlot> slots(kSets * sc::kKeySetWays);
  sc::SharedKeyCache<StdLocks> cache(slots.data(), kSets, StdLocks());
  std::atomic<int> wrong{0}, found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; round++)
        for (int k = t; k < kKeys; k += 2) {
          std::string text = "/p/" + std::to_string(k);
          uint64_t hash = uint64_t(k % 7) << 32 | uint64_t(k % 5);  // few hashes: many collide
          int64_t id = cache.Find(1, 1, hash, text.data(), uint32_t(text.size()), 1);
          if (id == 0)
            cache.Insert(1, 1, hash, text.data(), uint32_t(text.size()), 1, k + 1);
          else if (id != k + 1)
            wrong++;
          else
            found++;
        }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(found.load(), 0);
}

// The protocol of core/text_ids.hpp with its cache: givers find a text in the cache, else read
// the key writes, probe the "table", and give an id only if the writes did not move; a writer,
// as the flusher, writes the unwritten ids into the table, notes the write, marks them written,
// and shares other keys that push written slots out. Every giver must end with the one id the
// table holds for each text.
TEST(SharedKeyCacheThreads, GiversOfOneTextAgreeOnOneId) {
  constexpr uint32_t kSets = 16;
  constexpr int kTexts = 200;
  std::vector<sc::SharedKeySlot> slots(kSets * sc::kKeySetWays);
  sc::SharedKeyCache<StdLocks> cache(slots.data(), kSets, StdLocks());
  sc::KeyWrites writes;
  sc::InitKeyWrites(writes);
  std::mutex table_mutex;
  std::map<std::string, int64_t> table;  // the committed rows
  auto probe = [&](const std::string& text) {
    std::lock_guard<std::mutex> guard(table_mutex);
    auto it = table.find(text);
    return it == table.end() ? int64_t(0) : it->second;
  };
  std::atomic<int64_t> next_id{1};
  std::atomic<int> duplicates{0};
  std::atomic<bool> done{false};
  std::thread writer([&] {
    int round = 0;
    while (!done.load()) {
      std::vector<sc::SharedKeySlot> seen;
      cache.ForEachUnwritten(1, [&](const sc::SharedKeySlot& s) { seen.push_back(s); });
      {
        std::lock_guard<std::mutex> guard(table_mutex);
        for (const sc::SharedKeySlot& s : seen) {
          auto inserted = table.emplace(std::string(s.text, s.len), s.id);
          if (!inserted.second && inserted.first->second != s.id) duplicates++;
        }
      }
      for (const sc::SharedKeySlot& s : seen)
        sc::NoteKeysWritten(writes, sc::KeyWriteGroup(s.hash));
      for (const sc::SharedKeySlot& s : seen) cache.MarkWritten(1, s.counter, s.hash, s.id);
      // Keys of another counter in every set: written slots are pushed out.
      std::string other = "/other/" + std::to_string(round++ % 64);
      cache.Insert(1, 2, uint64_t(round), other.data(), uint32_t(other.size()), 1, 1000000 + round);
    }
  });
  constexpr int kGivers = 4;
  std::vector<std::vector<int64_t>> got(kGivers, std::vector<int64_t>(kTexts, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kGivers; t++)
    threads.emplace_back([&, t] {
      for (int k = 0; k < kTexts; k++) {
        static const int kStride[kGivers] = {1, 3, 7, 9};  // prime to kTexts: each text once
        int i = (k * kStride[t]) % kTexts;                  // each giver in its own order
        std::string text = "/t/" + std::to_string(i);
        uint64_t hash = uint64_t(i % 32);  // few hashes: sets fill and evict
        int64_t id = 0;
        while (id == 0) {
          id = cache.Find(1, 1, hash, text.data(), uint32_t(text.size()), 1);
          if (id != 0) break;
          uint32_t group = sc::KeyWriteGroup(hash);
          sc::KeyWritesSeen seen = sc::ReadKeyWrites(writes, group);
          id = probe(text);
          if (id != 0 || !seen.Quiet()) continue;
          sc::Given given =
              cache.Give(1, 1, hash, text.data(), uint32_t(text.size()), 1, next_id.fetch_add(1),
                         [&] { return sc::KeyWritesUnchanged(writes, group, seen); });
          if (given.result == sc::GiveResult::kGiven || given.result == sc::GiveResult::kFound)
            id = given.id;
          else
            std::this_thread::yield();  // no room, or the writes moved: look again
        }
        got[t][size_t(i)] = id;
      }
    });
  for (std::thread& th : threads) th.join();
  // Until every given id is in the table.
  while (true) {
    int unwritten = 0;
    cache.ForEachUnwritten(1, [&](const sc::SharedKeySlot&) { unwritten++; });
    if (unwritten == 0) break;
    std::this_thread::yield();
  }
  done = true;
  writer.join();
  EXPECT_EQ(duplicates.load(), 0) << "a text written with two ids";
  int disagree = 0;
  for (int i = 0; i < kTexts; i++) {
    for (int t = 0; t < kGivers; t++) disagree += got[t][size_t(i)] != got[0][size_t(i)];
    disagree += table["/t/" + std::to_string(i)] != got[0][size_t(i)];
  }
  EXPECT_EQ(disagree, 0);
}

}  // namespace
