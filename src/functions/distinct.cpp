// distinct.cpp: the SQL functions of distinct counters: sc_add (an element into a key's sketch),
// sc_count, sc_count_keys, sc_count_total and sc_sketch (the union of sketches, as an estimate or
// as bytes in postgresql-hll's storage format), and the sketches' own functions
// (slotted_counter.sketch_total, sketch_union, sketch_count).
//
// An element is hashed as postgresql-hll hashes it (hll_hash_bigint, hll_hash_text: murmur3 with
// seed 0), so that a sketch unions with a user's own hll values. A read is the union of the
// stored sketches (key_sketches) and the resident ones (which hold their stored sketch and every
// add since) of the keys and buckets it asks for, and of the transaction's own adds; the union is
// idempotent, so a sketch met twice counts once.
//
// No C++ object with a destructor lives in these frames: an ereport from below is safe.
#include <algorithm>

#include "buffer/buffer.hpp"
#include "definitions/arguments.hpp"
#include "definitions/counter_ref.hpp"
#include "definitions/sketch_rows.hpp"
#include "sketch_bytes.hpp"
#include "functions/functions.hpp"
#include "shared/flusher_slots.hpp"
#include "transactions/distinct_adds.hpp"

namespace sc {

namespace {

// The hash of argument 2, the element: a bigint's 8 bytes or a text's bytes.
uint64 ElementHash(FunctionCallInfo fcinfo, bool bigint) {
  if (bigint) return HllHashBigint(PG_GETARG_INT64(2));
  const text* element = PG_GETARG_TEXT_PP(2);
  return HllHashBytes(VARDATA_ANY(element), VARSIZE_ANY_EXHDR(element));
}

Datum AddElement(FunctionCallInfo fcinfo, bool bigint) {
  RequireArguments(fcinfo, kAddArguments);
  RequireShared();
  if (unlikely(RecoveryInProgress())) PreventCommandDuringRecovery("sc_add()");
  CounterDef def = *DistinctArgument(fcinfo, 0, kUpdate);
  if (shared->sketches->blocks() == 0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("distinct counters need slotted_counter.max_sketches"),
                    errdetail("slotted_counter.max_sketches is 0: the buffer holds no sketch."),
                    errhint("Set slotted_counter.max_sketches and restart the server.")));
  int64 key = PG_GETARG_INT64(1);
  int64 bucket = WriteBucket(fcinfo, def, 3);
  uint64 hash = ElementHash(fcinfo, bigint);
  EnsureFlusherFast();
  if (def.durability == Durability::kTransactional) {
    PreventCommandIfReadOnly("sc_add()");
    PG_RETURN_BOOL(TransactionalSketchAdd(def, key, bucket, hash));
  }
  bool changed = BufferSketchAdd(def, key, bucket, hash);
  EnsureFlusherFast(true);
  PG_RETURN_BOOL(changed);
}

// The union of the sketches of keys (nkeys of them, sorted and distinct; every key when keys is
// nullptr) in range, in a palloc'd set: stored, resident, and this transaction's own.
SketchSet* UnionOf(const CounterDef& def, const int64* keys, int nkeys, BucketRange range) {
  // A bucketed counter's expired buckets are left out; an unbucketed one's keys expire by key.
  if (def.bucketed) range = RetainedRange(def, range);
  auto* set = static_cast<SketchSet*>(palloc(sizeof(SketchSet)));
  SketchSetInit(*set, def.sketch);
  if (range.since >= range.until) return set;
  // A buffered counter: the buffer's first (a key that leaves it meanwhile was flushed before,
  // and is then stored). A transactional one's stored rows and unfolded commits hold every
  // committed add (its resident sketches serve sc_add's answer only), and the transaction's own.
  if (def.durability == Durability::kBuffered) {
    (void)BufferSketchUnion(def, keys, nkeys, range.since, range.until, set);
    UnionStoredSketches(def, keys, nkeys, range.since, range.until, false, set);
  } else {
    UnionStoredSketches(def, keys, nkeys, range.since, range.until, false, set);
    UnionPendingSketches(def, keys, nkeys, range.since, range.until, set);
  }
  return set;
}

// The keys of argument 1 (bigint[]), sorted and distinct.
int64* SortedKeys(FunctionCallInfo fcinfo, int* n) {
  int64* keys = BigintElements(fcinfo, 1, "keys", n);
  std::sort(keys, keys + *n);
  *n = int(std::unique(keys, keys + *n) - keys);
  return keys;
}

Datum SketchResult(const SketchSet& set) { PG_RETURN_BYTEA_P(SketchBytes(set)); }

}  // namespace

}  // namespace sc

using namespace sc;

Datum Add(PG_FUNCTION_ARGS) { return AddElement(fcinfo, false); }
Datum AddInt(PG_FUNCTION_ARGS) { return AddElement(fcinfo, true); }

namespace sc {

namespace {

// What each read unions: argument 1's key over all its buckets, or those of arguments 2 and 3
// (ranged); the keys of the bigint[] argument 1; every key, over the buckets of arguments 1 and 2.
enum class Over { kKey, kKeyRange, kKeys, kTotal };

SketchSet* ReadUnion(FunctionCallInfo fcinfo, Over over) {
  static const char* const kCounterArgument[] = {"counter", nullptr};
  RequireArguments(fcinfo, over == Over::kKeys    ? kKeysArguments
                           : over == Over::kTotal ? kCounterArgument
                                                  : kKeyArguments);
  RequireShared();
  CounterDef def = over == Over::kTotal ? *CounterArgument(fcinfo, 0, kSelect)
                                        : *DistinctArgument(fcinfo, 0, kSelect);
  if (!def.distinct) ReportNotDistinct(def);
  if (over == Over::kTotal) return UnionOf(def, nullptr, 0, RangeOf(fcinfo, def, 1, 2));
  if (over == Over::kKeys) {
    int n;
    int64* keys = SortedKeys(fcinfo, &n);
    return UnionOf(def, keys, n, n == 0 ? BucketRange{0, 0} : kAllBuckets);
  }
  int64 key = PG_GETARG_INT64(1);
  return UnionOf(def, &key, 1, over == Over::kKeyRange ? RangeOf(fcinfo, def, 2, 3) : kAllBuckets);
}

Datum CountOf(FunctionCallInfo fcinfo, Over over) {
  PG_RETURN_INT64(SketchSetCount(*ReadUnion(fcinfo, over)));
}

}  // namespace

}  // namespace sc

Datum Count(PG_FUNCTION_ARGS) { return CountOf(fcinfo, Over::kKey); }
Datum CountRange(PG_FUNCTION_ARGS) { return CountOf(fcinfo, Over::kKeyRange); }
Datum CountKeys(PG_FUNCTION_ARGS) { return CountOf(fcinfo, Over::kKeys); }
Datum CountTotal(PG_FUNCTION_ARGS) { return CountOf(fcinfo, Over::kTotal); }
Datum SketchOf(PG_FUNCTION_ARGS) { return SketchResult(*ReadUnion(fcinfo, Over::kKey)); }
Datum SketchRange(PG_FUNCTION_ARGS) { return SketchResult(*ReadUnion(fcinfo, Over::kKeyRange)); }
Datum SketchKeys(PG_FUNCTION_ARGS) { return SketchResult(*ReadUnion(fcinfo, Over::kKeys)); }
Datum SketchTotal(PG_FUNCTION_ARGS) { return SketchResult(*ReadUnion(fcinfo, Over::kTotal)); }

Datum SketchUnion(PG_FUNCTION_ARGS) {
  SketchSet* a = SketchArgument(fcinfo, 0);
  UnionSketchArguments(a, SketchArgument(fcinfo, 1));
  return SketchResult(*a);
}

Datum SketchCount(PG_FUNCTION_ARGS) { PG_RETURN_INT64(SketchSetCount(*SketchArgument(fcinfo, 0))); }

SC_ENTRY_POINT(sc_add, Add)
SC_ENTRY_POINT(sc_add_int, AddInt)
SC_ENTRY_POINT(sc_count, Count)
SC_ENTRY_POINT(sc_count_range, CountRange)
SC_ENTRY_POINT(sc_count_keys, CountKeys)
SC_ENTRY_POINT(sc_count_total, CountTotal)
SC_ENTRY_POINT(sc_sketch, SketchOf)
SC_ENTRY_POINT(sc_sketch_range, SketchRange)
SC_ENTRY_POINT(sc_sketch_total, SketchTotal)
SC_ENTRY_POINT(sc_sketch_keys, SketchKeys)
SC_ENTRY_POINT(sc_sketch_union, SketchUnion)
SC_ENTRY_POINT(sc_sketch_count, SketchCount)
