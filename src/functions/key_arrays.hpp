// key_arrays.hpp: running a statement over many (counter, key, bucket, value, written_at) rows at
// once.
#pragma once

#include "pg.hpp"

namespace sc {

// The plan of sql, whose $1..$5 are int4[], int8[], timestamptz[], int8[], timestamptz[],
// prepared once and
// kept in *plan. Inside SPI.
SPIPlanPtr KeyArrayPlan(SPIPlanPtr* plan, const char* sql);

// Executes plan with the n rows as its five arrays (a bucket of kNoBucket becomes NULL; stamps
// may be nullptr, for a statement that does not read $5, then NULL); fails unless SPI answers
// expected_rc. Inside SPI.
void ExecuteKeyArrays(SPIPlanPtr plan, int expected_rc, int n, const int32* counters,
                      const int64* keys, const int64* buckets, const int64* values,
                      const int64* stamps);

// Runs sql with the latest snapshot rather than the transaction's: a write that follows a lock
// must see every row committed before the lock was granted, at any isolation level (the rows
// a flush wrote before a drop could lock its counter). Returns SPI's code. Inside SPI.
int ExecuteWithLatestSnapshot(const char* sql, int nargs, Oid* types, Datum* args);

}  // namespace sc
