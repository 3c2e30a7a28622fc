// core_assert.hpp: SC_ASSERT, the assertions of the pure core at the seams where shared state
// changes hands (as pgstat_shmem.c asserts every state change of its entries).
//
// Live where SC_CORE_ASSERTS is defined: always in the unit tests, and in the server when
// PostgreSQL was built with --enable-cassert (the Makefile asks pg_config); elsewhere they compile
// to nothing and evaluate nothing. A failed one calls CoreAssertFailed, which the server defines
// as PostgreSQL's failed Assert() (a "TRAP:" line in the log, then abort) and the unit tests as a
// message and abort. Pure C++: no PostgreSQL header.
#pragma once

namespace sc {

[[noreturn]] void CoreAssertFailed(const char* condition, const char* file, int line) noexcept;

}  // namespace sc

#ifdef SC_CORE_ASSERTS
#define SC_ASSERT(condition) \
  ((condition) ? (void)0 : ::sc::CoreAssertFailed(#condition, __FILE__, __LINE__))
#else
#define SC_ASSERT(condition) ((void)sizeof(condition))
#endif
