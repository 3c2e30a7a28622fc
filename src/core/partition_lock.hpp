// partition_lock.hpp: the lock of one partition of the counter table, whose readers take no lock.
//
// Pure C++ (no PostgreSQL header), run by the server over its LWLocks and by the unit tests
// over std::shared_mutex. Every increment takes its partition's lock SHARED; an LWLock's shared
// acquire and release were a third of a buffered increment's instructions (a CAS loop on the
// lock word, the held-locks array, interrupt holdoff, the search on release). Here a reader
// counts itself in an atomic, and only writers (loads, evictions, purges, pins, transactional
// reservations) take the underlying reader-writer lock `Slow` (an LWLock), which keeps their
// queueing, their sleeping and their release on error as an LWLock does them.
//
// The protocol, every step of it (PartitionReaders holds the two atomics of a partition):
//   - Shared: readers += 1, then read writer (both sequentially consistent). writer == 0: the
//     lock is held. Otherwise readers -= 1 and the reader takes Slow SHARED, which waits for the
//     writer as any LWLock waiter does; under it no writer can be active (a writer sets `writer`
//     only while it holds Slow EXCLUSIVE and clears it before releasing), so a `writer` still set
//     was left by a writer whose error released Slow without clearing it, and is cleared. The
//     reader then counts itself (readers += 1) and releases Slow: a writer that comes later waits
//     for it. ReleaseShared: readers -= 1 (release).
//   - Exclusive: Slow EXCLUSIVE, then writer = 1, then read readers (both sequentially
//     consistent) until it is 0, backing off as `Backoff` says. Of a reader's pair (count, read
//     writer) and the writer's (set writer, read count), at least one side sees the other's
//     first step: either the reader saw writer set and backed off, or the writer sees it counted
//     and waits for it. Readers arriving meanwhile back off to Slow and queue behind the writer,
//     so a stream of readers cannot starve it. Release: writer = 0 (release), then Slow.
//   - TryExclusive: Slow EXCLUSIVE without waiting, and gives up (clears writer, releases Slow)
//     if any reader is counted: it never waits.
//   - A reader holds the lock across nothing that can fail, sleep or take another partition's
//     lock: a counted reader is not released by Slow's error cleanup, and writers wait for it.
//     (The protocol's steps under SHARED are noexcept and take at most a ring's spinlock; the
//     server still forgets a count left by an error it does not expect: shmem.hpp.)
//
// Nothing here allocates, throws or fails: every function is noexcept.
#pragma once

#include <atomic>
#include <cstdint>

namespace sc {

// The reader count and writer flag of one partition, a cache line of their own (readers of one
// partition share it; readers of two partitions do not).
struct alignas(64) PartitionReaders {
  std::atomic<uint32_t> readers;
  std::atomic<uint32_t> writer;
};
static_assert(sizeof(PartitionReaders) == 64, "one cache line per partition");

// Slow: Shared(p), Exclusive(p), TryExclusive(p), ReleaseShared(p), Release(p) - an LWLock per
// partition. Backoff: a fresh one per wait; called until the wait ends.
template <typename Slow, typename Backoff>
class CountedReaderLocks {
 public:
  CountedReaderLocks(PartitionReaders* readers, Slow slow) noexcept
      : readers_(readers), slow_(slow) {}

  void Shared(uint32_t p) noexcept {
    PartitionReaders& r = readers_[p];
    r.readers.fetch_add(1, std::memory_order_seq_cst);
    if (__builtin_expect(r.writer.load(std::memory_order_seq_cst) == 0, 1)) return;
    r.readers.fetch_sub(1, std::memory_order_seq_cst);
    slow_.Shared(p);
    if (r.writer.load(std::memory_order_relaxed) != 0)  // left by a writer's error
      r.writer.store(0, std::memory_order_relaxed);
    r.readers.fetch_add(1, std::memory_order_seq_cst);
    slow_.ReleaseShared(p);
  }

  void ReleaseShared(uint32_t p) noexcept {
    readers_[p].readers.fetch_sub(1, std::memory_order_release);
  }

  void Exclusive(uint32_t p) noexcept {
    slow_.Exclusive(p);
    PartitionReaders& r = readers_[p];
    r.writer.store(1, std::memory_order_seq_cst);
    Backoff backoff;
    while (r.readers.load(std::memory_order_seq_cst) != 0) backoff();
  }

  bool TryExclusive(uint32_t p) noexcept {
    if (!slow_.TryExclusive(p)) return false;
    PartitionReaders& r = readers_[p];
    r.writer.store(1, std::memory_order_seq_cst);
    if (r.readers.load(std::memory_order_seq_cst) == 0) return true;
    r.writer.store(0, std::memory_order_release);
    slow_.Release(p);
    return false;
  }

  void Release(uint32_t p) noexcept {
    readers_[p].writer.store(0, std::memory_order_release);
    slow_.Release(p);
  }

 private:
  PartitionReaders* readers_;
  Slow slow_;
};

}  // namespace sc
