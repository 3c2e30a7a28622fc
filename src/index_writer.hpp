// index_writer.hpp: what a writer below the executor needs to keep a table's indexes as its
// statement would (the extension's own tables: key_values, deltas): an executor state and the
// table's result relation with its indexes open. Opened and closed in the writer's memory context.
#pragma once

#include "pg.hpp"

namespace sc {

struct IndexWriter {
  EState* estate;
  ResultRelInfo* result_rel;
};

// range_table_index: 1 as a statement's only table; 0 in no range table (an update that reads no
// column as changed, whose index entries carry the hint that the indexed columns stayed).
inline IndexWriter OpenIndexWriter(Relation rel, Index range_table_index) {
  IndexWriter w{CreateExecutorState(), makeNode(ResultRelInfo)};
  InitResultRelInfo(w.result_rel, rel, range_table_index, nullptr, 0);
  ExecOpenIndices(w.result_rel, false);
  return w;
}

inline void CloseIndexWriter(const IndexWriter& w) {
  ExecCloseIndices(w.result_rel);
  FreeExecutorState(w.estate);
}

}  // namespace sc
