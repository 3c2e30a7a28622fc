// rank_index_instance.cpp: core/rank_index.hpp compiled as the core is (no exceptions, no RTTI,
// warnings as errors) with the guard against PostgreSQL headers, every template instantiated over
// an allocator of the required shape. The unit tests compile the header with GoogleTest's flags;
// the server's own instantiation, over its DSA, comes with the glue.
#include <cstddef>
#include <cstdint>

#include "core/rank_index.hpp"

#include "core/cpp_only_file.hpp"

namespace sc_test {

// The allocator's shape, nothing behind it (no test calls through it).
struct ShapeOnlyAllocator {
  uint64_t Allocate(size_t) noexcept { return 0; }
  void Free(uint64_t) noexcept {}
  void* Resolve(uint64_t) noexcept { return nullptr; }
};

}  // namespace sc_test

using Shape = sc_test::ShapeOnlyAllocator;
template void sc::RankIndex::Destroy<Shape>(Shape&) noexcept;
template bool sc::RankIndex::Find<Shape>(Shape&, int64_t, int64_t*) const noexcept;
template uint64_t sc::RankIndex::CountGreater<Shape>(Shape&, int64_t) const noexcept;
template bool sc::RankIndex::Rank<Shape>(Shape&, int64_t, uint64_t*) const noexcept;
template bool sc::RankIndex::Set<Shape>(Shape&, int64_t, int64_t) noexcept;
template bool sc::RankIndex::Remove<Shape>(Shape&, int64_t) noexcept;
template bool sc::RankIndex::Build<Shape>(Shape&, const int64_t*, const int64_t*, size_t) noexcept;
template const char* sc::RankIndex::Inconsistency<Shape>(Shape&) const noexcept;
