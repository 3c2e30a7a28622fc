// flush_sketches.cpp: what a flush writes of distinct counters' keys (flush_internal.hpp): each
// claimed key's sketch, copied from the buffer, into slotted_counter.key_sketches in place of the
// stored one (which it holds), and its estimate into key_values with the time of its last add,
// in the step's transaction. The entry's value
// counts the adds that changed its sketch: the claim's delta, settled as any key's, says what
// the copy holds (an add raises its register before it counts, so a copy taken after the claim
// holds every add the claim counted).
#include <algorithm>

#include "buffer/buffer.hpp"
#include "definitions/sketch_rows.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

int64 PartitionSketchItems(FlushItem* items, int64 n) {
  FlushItem* first = std::stable_partition(items, items + n,
                                           [](const FlushItem& item) { return !item.sketch; });
  return items + n - first;
}

void WriteSketchItems(Oid db, const FlushItem* items, int64 n, TimestampTz stored_stamp) {
  if (n == 0) return;
  auto* set = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  auto* rows = static_cast<SketchRow*>(palloc(sizeof(SketchRow) * n));
  int nrows = 0;
  for (int64 i = 0; i < n; i++) {
    const FlushItem& item = items[i];
    Assert(item.sketch);
    CounterKey k{uint32(db), item.counter, item.key, item.bucket};
    // A claimed entry stays (in_flush): its sketch is there to copy.
    if (!BufferSketchOfEntry(k, item.claim.index, item.claim.generation, set)) continue;
    TimestampTz written = item.claim.stamped ? item.claim.stamp : stored_stamp;
    rows[nrows++] = SketchRow{item.counter,        item.key,          item.bucket,
                              SketchSetCount(*set), SketchBytes(*set), written};
  }
  WriteSketchRows(rows, nrows);
  pfree(set);
}

}  // namespace sc
