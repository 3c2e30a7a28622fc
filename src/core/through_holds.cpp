// through_holds.cpp: through_holds.hpp is header-only (templates over the caller's locks); this
// file compiles it where no PostgreSQL header may be included, so that one reached from it is a
// compile error.
#include "core/through_holds.hpp"

#include "core/cpp_only_file.hpp"
