// arguments.hpp: checks of a SQL function's arguments shared by the functions of every file.
#pragma once

#include "pg.hpp"

namespace sc {

// Fails with 22004, naming the argument, if one of the first arguments is NULL; names lists them
// in order and ends with nullptr.
inline void RequireArguments(FunctionCallInfo fcinfo, const char* const* names) {
  for (int n = 0; names[n] != nullptr; n++)
    if (PG_ARGISNULL(n))
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("%s must not be null", names[n])));
}

}  // namespace sc
