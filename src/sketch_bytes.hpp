// sketch_bytes.hpp: a distinct counter's sketch as a bytea in postgresql-hll's storage format
// (core/hll.hpp), read into and written from a set (core/sketch_set.hpp). Shared by the data node
// (functions/distinct.cpp, definitions/sketch_rows.cpp) and the router (proxy/src/sketches.cpp),
// which unions its nodes' sketches: one reading, one set of errors.
#pragma once

#include "compat.hpp"
#include "core/sketch_set.hpp"

namespace sc {

// The sketch in bytes, read into out with its own shape: false if they are no sketch a set holds
// (postgresql-hll's storage format, at most 2^kSketchMaxLog2m registers). out: palloc'd.
inline bool SketchFromBytes(const bytea* bytes, SketchSet* out) {
  auto* registers = static_cast<uint8*>(palloc(kSketchDataBytes));
  HllRead read;
  bool valid = HllReadStored(reinterpret_cast<const uint8*>(VARDATA_ANY(bytes)),
                             VARSIZE_ANY_EXHDR(bytes), registers, kSketchDataBytes, &read);
  if (valid) {
    HllShape shape = read.shape;
    // An explicit threshold beyond what a set keeps explicit: the set's own (auto).
    if (HllExplicitLimit(shape) * sizeof(int64) > kSketchDataBytes) shape.expthresh = -1;
    SketchSetInit(*out, shape);
    valid = SketchSetUnionStored(*out, read, registers);
  }
  pfree(registers);
  return valid;
}

// The sketch of argument n of fcinfo, palloc'd; 22023 if it is none.
inline SketchSet* SketchArgument(FunctionCallInfo fcinfo, int n) {
  auto* set = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  if (!SketchFromBytes(PG_GETARG_BYTEA_PP(n), set))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("argument %d is not a sketch of at most 2^%d registers", n + 1,
                           int(kSketchMaxLog2m)),
                    errdetail("A sketch is a value in postgresql-hll's storage format.")));
  return set;
}

// The union of b into a; 22023 if their shapes differ.
inline void UnionSketchArguments(SketchSet* a, const SketchSet* b) {
  if (!SketchShapesMatch(a->shape, b->shape))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("sketches of different shapes do not union"),
                    errdetail("One has 2^%d registers of %d bits, the other 2^%d of %d.",
                              int(a->shape.log2m), int(a->shape.regwidth), int(b->shape.log2m),
                              int(b->shape.regwidth))));
  SketchSetUnion(*a, *b);
}

// The bytes of s in the storage format, palloc'd.
inline bytea* SketchBytes(const SketchSet& s) {
  uint64 len = SketchSetStoredBytes(s);
  auto* out = static_cast<bytea*>(palloc0(VARHDRSZ + len));
  SET_VARSIZE(out, VARHDRSZ + len);
  SketchSetWrite(s, reinterpret_cast<uint8*>(VARDATA(out)));
  return out;
}

}  // namespace sc
