// core_assert.cpp: a failed SC_ASSERT of the core (src/core/core_assert.hpp) in the unit tests:
// the condition and where, then abort, which fails the test (and lets a death test expect it).
#include <cstdio>
#include <cstdlib>

#include "core/core_assert.hpp"

namespace sc {

void CoreAssertFailed(const char* condition, const char* file, int line) noexcept {
  std::fprintf(stderr, "SC_ASSERT(%s) failed at %s:%d\n", condition, file, line);
  std::abort();
}

}  // namespace sc
