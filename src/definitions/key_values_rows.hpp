// key_values_rows.hpp: rows of slotted_counter.key_values written below the executor: new ones as
// COPY writes them, and updates of rows found where they were last seen (Entry::row, tid.hpp). By
// the flush (workers/flush_insert.cpp, flush_update.cpp) and by a large commit
// (transactions/large_commit.cpp).
//
// Rows inserted with table_multi_insert and their index entries with ExecInsertIndexTuples fire
// no trigger and collect no transition table; their WAL (logical decoding included), unique
// checks (23505 on a key that has a row), partial indexes and an index a user added are as for
// COPY. The writer adds what the table's triggers would have added itself: the sums
// (definitions/sums.hpp) and the filter of stored keys. Only a table whose columns are as the
// install script made them is written so; the writers write another by a statement.
#pragma once

#include "pg.hpp"

namespace sc {

// The columns of slotted_counter.key_values as the install script makes them.
enum KeyValuesColumn { kCounter, kKey, kBucket, kValue, kUpdatedAt, kWrittenAt, kColumns };

// key_values, opened RowExclusiveLock; *as_made: it has exactly the install script's columns, in
// its order, none dropped, in a heap (the writers below the executor write only such a table).
Relation OpenKeyValues(bool* as_made);

// One new row; `row` receives where it went (tid.hpp).
struct NewKeyValue {
  int32 counter;
  int64 key;
  int64 bucket;  // kNoBucket: -infinity
  int64 value;
  TimestampTz written_at;
  uint64 row;
};

// Inserts rows (n of them) into rel (OpenKeyValues's, as made) and its indexes, each with
// updated_at `updated_at`, in the current command; fails with 23505 on a key that has a row. The
// caller keeps the sums and the filter, and makes the rows visible (CommandCounterIncrement).
void InsertKeyValues(Relation rel, NewKeyValue* rows, int64 n, TimestampTz updated_at);

// One row updated where it was last seen: `delta` added to its value (to 0 instead if the row was
// last written at or before `cutoff`; kNeverExpires: never), written_at raised to `written_at`.
// `row`: where it was seen, then where it is (0 if it was not updated there); `change`: how much
// the value moved (for the sums).
struct KeyValueUpdate {
  int32 counter;
  int64 key;
  int64 bucket;
  int64 delta;
  TimestampTz written_at;
  int64 cutoff;
  uint64 row;
  int64 value;   // after the update
  int64 change;  // value less what the row held (bigint: a change past it is not updated)
};

// Updates the rows of updates (n of them) in rel (OpenKeyValues's, as made) at their `row`, with
// updated_at `updated_at`, below the executor, as an UPDATE of the row would (HOT when its page
// has room; WAL, logical decoding and a concurrent writer's wait as for any update; index entries
// when not HOT; no trigger). A TID that finds nothing visible of the key in the latest snapshot
// (the row updated by another writer, deleted, moved by VACUUM FULL or CLUSTER, its slot holding
// another row), or a row a concurrent transaction changed, is left: its `row` becomes 0. Fails
// with 22003 if a value leaves the bigint range. Returns how many were updated.
int64 UpdateKeyValuesAt(Relation rel, KeyValueUpdate* updates, int64 n, TimestampTz updated_at);

}  // namespace sc
