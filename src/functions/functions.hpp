// functions.hpp: the implementations of the SQL functions that take a key (functions.cpp), for
// the forms that take it as text (text_key_functions.cpp), which call them with the key's id.
#pragma once

#include "pg.hpp"

Datum Incr(PG_FUNCTION_ARGS);
Datum IncrAt(PG_FUNCTION_ARGS);
Datum IncrBatch(PG_FUNCTION_ARGS);
Datum IncrBounded(PG_FUNCTION_ARGS);
Datum IncrOnce(PG_FUNCTION_ARGS);
Datum Set(PG_FUNCTION_ARGS);
Datum Sum(PG_FUNCTION_ARGS);
Datum SumRange(PG_FUNCTION_ARGS);
Datum SumKeys(PG_FUNCTION_ARGS);
Datum Series(PG_FUNCTION_ARGS);
Datum Top(PG_FUNCTION_ARGS);
Datum Rank(PG_FUNCTION_ARGS);
Datum KeysAboveValue(PG_FUNCTION_ARGS);
