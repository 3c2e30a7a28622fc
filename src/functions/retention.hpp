// retention.hpp: counters that keep their values for a time only (sc_create's retain,
// sc_alter_retention), and the flusher's pass that drops what expired (retention.cpp).
#pragma once

#include "functions/bucketed.hpp"
#include "definitions/catalog.hpp"

namespace sc {

// 22023 unless retain is positive (no field negative, not all zero) and at most 1,000 years.
void CheckRetention(const Interval* retain);

// The flusher, after a flush committed: if 10 seconds passed since the last pass, or `now` is
// set (sc_rollup asked for the flush), drops the expired buckets and keys of every counter of
// this database that has a retention, in transactions of its own. Never fails: a failure is
// logged and the next pass tries again. Returns whether the database has such a counter (the
// flusher then stays, to expire what it keeps).
bool ExpireRetained(bool now);

}  // namespace sc
