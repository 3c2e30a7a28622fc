// checked_math.hpp: overflow-checked arithmetic on counter values.
//
// Pure C++ (no PostgreSQL header), shared by the buffer and the unit tests. A counter value is a
// signed 64-bit integer; an increment that would leave that range is refused, never wrapped.
#pragma once

#include <cstdint>

namespace sc {

// Sets *out = a + b and returns true, or returns false (and leaves *out alone) on overflow.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) noexcept {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

}  // namespace sc
