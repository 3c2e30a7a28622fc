// protocol.cpp: protocol.hpp is header-only (a template over the lock policy); this file compiles
// it where no PostgreSQL header may be included, so that one reached from it is a compile error.
#include "core/protocol.hpp"

#include "core/cpp_only_file.hpp"
