// sums.hpp: slotted_counter.counter_totals, the sum of each (counter, bucket) of
// slotted_counter.key_values, as its writers keep it (sums.cpp).
//
// Rows that a statement inserts or updates are summed by row triggers into this backend's
// changes, which the statement's trigger adds to the sums at its end; rows it deletes, from its
// transition table. A hot writer (the flush's statements, a large commit's insertion of new keys)
// knows the change of each (counter, bucket) without reading its rows back: while it keeps the
// sums itself (KeepingSums), its statements' rows fire no row trigger, and it adds its changes
// with AddToSums and its new keys to the filter of stored keys (shared/stored_keys.hpp).
#pragma once

#include "pg.hpp"

namespace sc {

// One (counter, bucket)'s change: a partial sum that fits in a bigint (a group whose changes sum
// past one has several; the statement sums them as numeric).
struct SumChange {
  int32 counter;
  int64 bucket;
  int64 change;
};

// Adds changes (n of them: sorted and merged in place) to their rows of counter_totals, in
// (counter, bucket) order (two transactions lock the sums they share in the same order), with
// the latest snapshot. In the writer's transaction, after its statement.
void AddToSums(SumChange* changes, int64 n);

// While one is open, the rows this backend inserts into or updates in key_values fire no row
// trigger: the writer keeps their sums and the filter itself. An error closes it with the
// (sub)transaction it was opened in (ForgetRowSums), as does its destructor.
class KeepingSums {
 public:
  KeepingSums();
  ~KeepingSums();
  KeepingSums(const KeepingSums&) = delete;
  KeepingSums& operator=(const KeepingSums&) = delete;

 private:
  int level_;
};

// At the abort of the (sub)transaction at nest level `level`: the changes that the row
// triggers collected for a statement that failed, and a KeepingSums opened at `level` or deeper.
void ForgetRowSums(int level);

}  // namespace sc
