// faults.hpp: named points where a test makes the extension fail, in assert-enabled builds only
// (the setting slotted_counter.fault_point, module.cpp, which production builds do not define).
// A point that matches the setting raises ERROR 53200 ("out of memory"), as an allocation that
// fails there would: the tests of the error paths behind it drive them at will.
#pragma once

#include "pg.hpp"

namespace sc {

#ifdef USE_ASSERT_CHECKING
void InjectFault(const char* point);
#define SC_FAULT_POINT(point) ::sc::InjectFault(point)
#else
#define SC_FAULT_POINT(point) ((void)0)
#endif

}  // namespace sc
