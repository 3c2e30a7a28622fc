// rank_index_blocks.hpp: the multiset of a RankIndex (rank_index.hpp): its values in sorted
// blocks, a directory of them and a Fenwick tree over their counts; finding, inserting and
// erasing a value, splitting and merging blocks.
// Defined here, declared with their rules in rank_index.hpp, which alone includes this file.
#ifndef SC_RANK_INDEX_DECLARED
#error "include core/rank_index.hpp, which declares what this file defines"
#endif
namespace sc {

inline int64_t RankIndex::Locate(const Directory& d, uint32_t n, int64_t v) noexcept {
  return int64_t(std::upper_bound(d.first, d.first + n, v) - d.first) - 1;
}

inline uint64_t RankIndex::Prefix(const Directory& d, uint32_t i) const noexcept {
  SC_ASSERT(i <= blocks);
  uint64_t sum = 0;
  for (uint32_t j = i; j > 0; j -= j & (0u - j)) sum += d.tree[j - 1];
  return sum;
}

inline void RankIndex::TreeAdd(const Directory& d, uint32_t i, int64_t delta) const noexcept {
  for (uint32_t j = i + 1; j <= blocks; j += j & (0u - j)) d.tree[j - 1] += uint64_t(delta);
}

inline void RankIndex::RebuildTree(const Directory& d) const noexcept {
  for (uint32_t j = 1; j <= blocks; j++) d.tree[j - 1] = d.count[j - 1];
  for (uint32_t j = 1; j <= blocks; j++) {
    uint32_t parent = j + (j & (0u - j));
    if (parent <= blocks) d.tree[parent - 1] += d.tree[j - 1];
  }
}

template <typename Allocator>
bool RankIndex::PlanInsert(Allocator& a, int64_t v, InsertPlan* plan) const noexcept {
  *plan = InsertPlan{0, 0, 0};
  if (blocks > 0) {
    Directory d = Dir(a);
    int64_t i = Locate(d, v);
    if (d.count[i < 0 ? 0 : i] < block_values) return true;
  }
  if (blocks == directory_capacity) {
    SC_ASSERT(directory_capacity < (1u << 31));
    plan->directory_capacity = directory_capacity < 4 ? 4 : directory_capacity * 2;
    plan->directory = a.Allocate(DirectoryBytes(plan->directory_capacity));
    if (plan->directory == 0) return false;
  }
  plan->block = a.Allocate(size_t(block_values) * sizeof(int64_t));
  if (plan->block == 0) {
    if (plan->directory != 0) a.Free(plan->directory);
    *plan = InsertPlan{0, 0, 0};
    return false;
  }
  return true;
}

template <typename Allocator>
void RankIndex::InsertValue(Allocator& a, int64_t v, const InsertPlan& plan) noexcept {
  if (plan.directory != 0) {
    Directory to = Lay(Resolve<void>(a, plan.directory), plan.directory_capacity);
    if (directory != 0) {
      Directory from = Dir(a);
      std::memcpy(to.first, from.first, blocks * sizeof(int64_t));
      std::memcpy(to.handle, from.handle, blocks * sizeof(uint64_t));
      std::memcpy(to.count, from.count, blocks * sizeof(uint32_t));
      a.Free(directory);
    }
    bytes += DirectoryBytes(plan.directory_capacity) - DirectoryBytes(directory_capacity);
    directory = plan.directory;
    directory_capacity = plan.directory_capacity;
  }
  Directory d = Dir(a);
  if (blocks == 0) {
    SC_ASSERT(plan.block != 0);
    Resolve<int64_t>(a, plan.block)[0] = v;
    d.first[0] = v;
    d.handle[0] = plan.block;
    d.count[0] = 1;
    blocks = 1;
    bytes += block_values * sizeof(int64_t);
    RebuildTree(d);
    return;
  }
  int64_t found = Locate(d, v);
  uint32_t i = found < 0 ? 0 : uint32_t(found);
  int64_t* block = Block(a, d, i);
  if (d.count[i] < block_values) {
    SC_ASSERT(plan.block == 0);
    InsertSorted(block, d.count[i], v);
    d.count[i]++;
    d.first[i] = block[0];
    TreeAdd(d, i, 1);
    return;
  }
  // Split: the upper half moves to the new block, right after i; v goes to its half.
  SC_ASSERT(plan.block != 0 && blocks < directory_capacity);
  int64_t* right = Resolve<int64_t>(a, plan.block);
  uint32_t half = block_values / 2;
  uint32_t moved = block_values - half;
  std::memcpy(right, block + half, moved * sizeof(int64_t));
  uint32_t after = blocks - i - 1;
  std::memmove(d.first + i + 2, d.first + i + 1, after * sizeof(int64_t));
  std::memmove(d.handle + i + 2, d.handle + i + 1, after * sizeof(uint64_t));
  std::memmove(d.count + i + 2, d.count + i + 1, after * sizeof(uint32_t));
  d.handle[i + 1] = plan.block;
  d.count[i] = half;
  d.count[i + 1] = moved;
  blocks++;
  bytes += block_values * sizeof(int64_t);
  uint32_t j = v < right[0] ? i : i + 1;
  int64_t* target = j == i ? block : right;
  InsertSorted(target, d.count[j], v);
  d.count[j]++;
  d.first[i] = block[0];
  d.first[i + 1] = right[0];
  RebuildTree(d);
}

inline void RankIndex::InsertSorted(int64_t* block, uint32_t count, int64_t v) noexcept {
  uint32_t at = uint32_t(std::upper_bound(block, block + count, v) - block);
  std::memmove(block + at + 1, block + at, (count - at) * sizeof(int64_t));
  block[at] = v;
}

template <typename Allocator>
void RankIndex::EraseValue(Allocator& a, int64_t v) noexcept {
  Directory d = Dir(a);
  int64_t found = Locate(d, v);
  SC_ASSERT(found >= 0);
  uint32_t i = uint32_t(found);
  int64_t* block = Block(a, d, i);
  uint32_t c = d.count[i];
  uint32_t at = uint32_t(std::lower_bound(block, block + c, v) - block);
  SC_ASSERT(at < c && block[at] == v);
  std::memmove(block + at, block + at + 1, (c - at - 1) * sizeof(int64_t));
  d.count[i] = --c;
  if (c == 0) {
    a.Free(d.handle[i]);
    DropEntry(d, i);
    return;
  }
  d.first[i] = block[0];
  TreeAdd(d, i, -1);
  if (i + 1 < blocks && c + d.count[i + 1] <= block_values / 2)
    Merge(a, d, i);
  else if (i > 0 && d.count[i - 1] + c <= block_values / 2)
    Merge(a, d, i - 1);
}

template <typename Allocator>
void RankIndex::Merge(Allocator& a, const Directory& d, uint32_t i) noexcept {
  int64_t* left = Block(a, d, i);
  const int64_t* right = Block(a, d, i + 1);
  SC_ASSERT(d.count[i] + d.count[i + 1] <= block_values);
  std::memcpy(left + d.count[i], right, d.count[i + 1] * sizeof(int64_t));
  d.count[i] += d.count[i + 1];
  a.Free(d.handle[i + 1]);
  DropEntry(d, i + 1);
}

inline void RankIndex::DropEntry(const Directory& d, uint32_t i) noexcept {
  uint32_t after = blocks - i - 1;
  std::memmove(d.first + i, d.first + i + 1, after * sizeof(int64_t));
  std::memmove(d.handle + i, d.handle + i + 1, after * sizeof(uint64_t));
  std::memmove(d.count + i, d.count + i + 1, after * sizeof(uint32_t));
  blocks--;
  bytes -= block_values * sizeof(int64_t);
  RebuildTree(d);
}

template <typename Allocator>
bool RankIndex::FillBlocks(Allocator& a) noexcept {
  uint64_t scratch = a.Allocate(size_t(size) * sizeof(int64_t));
  if (scratch == 0) return false;
  int64_t* sorted = Resolve<int64_t>(a, scratch);
  const RankSlot* s = Slots(a);
  uint64_t n = 0;
  for (uint64_t i = 0; i < capacity; i++)
    if (s[i].key != kRankEmptyKey) sorted[n++] = s[i].value;
  if (has_empty_key) sorted[n++] = empty_key_value;
  SC_ASSERT(n == size);
  std::sort(sorted, sorted + n);
  uint32_t fill = BuildFill(block_values);
  uint64_t needed = (n + fill - 1) / fill;
  bool ok = needed < (1u << 31);
  if (ok) {
    uint32_t entries = needed < 4 ? 4 : uint32_t(needed);
    directory = a.Allocate(DirectoryBytes(entries));
    ok = directory != 0;
    if (ok) {
      directory_capacity = entries;
      bytes += DirectoryBytes(entries);
    }
  }
  for (uint64_t i = 0; ok && i < needed; i++) {
    uint64_t h = a.Allocate(size_t(block_values) * sizeof(int64_t));
    ok = h != 0;
    if (ok) {
      Directory d = Dir(a);
      d.handle[i] = h;
      blocks++;
      bytes += block_values * sizeof(int64_t);
      uint64_t from = i * fill;
      uint32_t c = uint32_t(n - from < fill ? n - from : fill);
      std::memcpy(Resolve<int64_t>(a, h), sorted + from, c * sizeof(int64_t));
      d.count[i] = c;
      d.first[i] = sorted[from];
    }
  }
  a.Free(scratch);
  if (ok) RebuildTree(Dir(a));
  return ok;
}

}  // namespace sc
