// tid.hpp: a row's TID in 64 bits, as an entry keeps where its key's row is (Entry::row,
// core/counter_table.hpp): written by the loads (buffer/stored.cpp) and the flush
// (workers/flush_insert.cpp, flush_update.cpp, flush_write.cpp), read by the flush.
#pragma once

#include "pg.hpp"

namespace sc {

// Never 0 for a valid TID (offsets start at 1): 0 is "not known".
inline uint64 PackRow(ItemPointer tid) {
  return uint64(ItemPointerGetBlockNumberNoCheck(tid)) << 16 |
         ItemPointerGetOffsetNumberNoCheck(tid);
}
inline void UnpackRow(uint64 row, ItemPointer tid) {
  ItemPointerSet(tid, BlockNumber(row >> 16), OffsetNumber(row & 0xffff));
}

}  // namespace sc
