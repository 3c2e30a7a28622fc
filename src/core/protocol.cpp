// protocol.cpp: protocol.hpp (and the handshakes over it, through_holds.hpp and
// write_through_request.hpp) is header-only (a template over the lock policy); this file compiles
// it where no PostgreSQL header may be included, so that one reached from it is a compile error.
#include "core/protocol.hpp"
#include "core/through_holds.hpp"
#include "core/write_through_request.hpp"

#include "core/cpp_only_file.hpp"
