// sketch_rows.hpp: the rows of slotted_counter.key_sketches, the stored sketches of distinct
// counters' keys (core/sketch_set.hpp), beside their key_values rows, whose value is the sketch's
// estimate as of the same write; and of slotted_counter.sketch_deltas, a transactional counter's
// commits not yet folded into them. key_sketches is written by the flusher only, each write a
// union with what the row holds, so that a write done twice changes nothing.
#pragma once

#include "core/sketch_set.hpp"
#include "definitions/catalog.hpp"
#include "sketch_bytes.hpp"

namespace sc {

// Unions into out the stored sketches of the counter's keys (nkeys of them; every key when keys is
// nullptr) whose bucket starts in [since, until), as of the latest commit (committed_only: leaving
// out this transaction's own changes), with a transactional counter's unfolded sketch_deltas;
// XX001 if one is no sketch of def's shape.
void UnionStoredSketches(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                         int64 until, bool committed_only, SketchSet* out);
// One stored sketch unioned into out (XX001 if it is no sketch of def's shape).
void UnionSketchBytes(const CounterDef& def, const bytea* stored, SketchSet* out);

// A key's sketch to write: its estimate (key_values.value), its bytes in the storage format and
// the time of its last add (written_at; a flush's rows only).
struct SketchRow {
  int32 counter;
  int64 key;
  int64 bucket;
  int64 count;
  bytea* sketch;
  TimestampTz written_at;
};
// A flush's writes of buffered keys (n of them, distinct), in its transaction: each key_values
// row's value becomes the row's count, written_at at least the row's; the sketch replaces the
// stored one, which the buffer's holds (but for an expired key's, which it must not). Inside
// SPI.
void WriteSketchRows(const SketchRow* rows, int n);
// A commit's adds to transactional keys (n of them, distinct; count unused): a sketch_deltas row
// each. Inside SPI.
void InsertSketchDeltas(const SketchRow* rows, int n);
// The fold of the sketch_deltas of counters ids (locked by the flusher's transaction) into
// key_sketches and key_values, and the deletion of those of dropped counters; returns the keys
// written. Inside SPI.
int64 FoldSketchDeltas(const int32* ids, int nids);

}  // namespace sc
