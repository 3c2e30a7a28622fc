// route.cpp: the checks and the node choice of every routed call, written once. routed.cpp routes
// sc_incr and sc_sum with them over its own connections; the SQL functions below are what the
// router's PL/Proxy functions (sql/slotted_counter_proxy--1.0.sql) evaluate before PL/Proxy
// connects: their CLUSTER (counter_cluster), their RUN ON (write_hash, read_hashes) and the
// arrays they SPLIT by node (split_keys, set_route, top_n). Each takes the key as the user gave it
// (anyelement: bigint or text; anyarray for a batch), so that one definition serves both forms.
//
// A call checks, in this order (the order of routed.cpp): the session is not a router's own
// (55000) and the caller reaches the nodes as itself (42501); a write is not in a read-only
// transaction (25006, naming the user's function); the counter is in the router's catalog
// (22004, 42704); the key is given (22004) and of the counter's kind (42804; a text read as a
// bigint: 22P02, 22003); a transactional write is outside a transaction block (25001). A node
// number 0 .. nodes-1 is its own RUN ON value (PL/Proxy's modular_mapping: core/routing.hpp).

extern "C" {
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

#include "checks.hpp"
#include "nodes.hpp"
#include "route.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_proxy_counter_cluster);
PG_FUNCTION_INFO_V1(sc_proxy_write_hash);
PG_FUNCTION_INFO_V1(sc_proxy_read_hashes);
PG_FUNCTION_INFO_V1(sc_proxy_split_keys);
PG_FUNCTION_INFO_V1(sc_proxy_set_route);
PG_FUNCTION_INFO_V1(sc_proxy_top_n);
}

namespace sc_proxy {

CounterRow LookupCounter(FunctionCallInfo fcinfo, int arg) {
  if (PG_ARGISNULL(arg))
    ereport(ERROR,
            (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counter must not be null")));
  text* name = PG_GETARG_TEXT_PP(arg);
  CounterRow row;
  if (!ReadCounterRow(name, &row))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("counter \"%s\" does not exist", text_to_cstring(name))));
  return row;
}

namespace {

[[noreturn]] void KeyedByText(const char* counter) {
  ereport(ERROR,
          (errcode(ERRCODE_DATATYPE_MISMATCH), errmsg("counter \"%s\" is keyed by text", counter),
           errhint("Give its keys as text (an untyped literal, a text or varchar value), and use "
                   "sc_top_text, sc_incr_batch_text and sc_sum_keys_text.")));
}

// A key's RUN ON value: hashint8 of a bigint, hashtext of a text's bytes (whatever its collation:
// one that is not deterministic would hash equal texts alike).
int32 HashOf(bool text_form, Datum value) {
  return text_form
             ? DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID, value))
             : DatumGetInt32(DirectFunctionCall1(hashint8, value));
}

// Whether argument `arg` (or its elements) is a text (or varchar) key, else a bigint one.
bool TextArgument(FunctionCallInfo fcinfo, int arg, bool array) {
  Oid type = get_fn_expr_argtype(fcinfo->flinfo, arg);
  if (array) type = get_element_type(type);
  if (type == INT8OID) return false;
  if (type != TEXTOID && type != VARCHAROID)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("a key must be a bigint or a text, not %s",
                           OidIsValid(type) ? format_type_be(type) : "unknown")));
  return true;
}

const char* CounterName(FunctionCallInfo fcinfo, int arg) {
  return text_to_cstring(PG_GETARG_TEXT_PP(arg));
}

// An array argument as a single server checks it: not NULL, one dimension, no NULL element.
ArrayType* Elements(FunctionCallInfo fcinfo, int arg, const char* name) {
  if (PG_ARGISNULL(arg))
    ereport(ERROR,
            (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", name)));
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(arg);
  if (ARR_NDIM(array) > 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("%s must be a one-dimensional array", name)));
  if (ARR_NDIM(array) == 1 && array_contains_nulls(array)) {
    bits8* bitmap = ARR_NULLBITMAP(array);
    int n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
    for (int i = 0; i < n; i++) {
      if (bitmap[i / 8] & (1 << (i % 8))) continue;
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                      errmsg("%s must not contain nulls", name),
                      errdetail("Element %d is null.", ARR_LBOUND(array)[0] + i)));
    }
  }
  return array;
}

void Deconstruct(ArrayType* array, Datum** values, int* count) {
  int16 length;
  bool byval;
  char align;
  get_typlenbyvalalign(ARR_ELEMTYPE(array), &length, &byval, &align);
  deconstruct_array(array, ARR_ELEMTYPE(array), length, byval, align, values, nullptr, count);
}

ArrayType* Construct(Datum* values, int count, Oid type) {
  int16 length;
  bool byval;
  char align;
  get_typlenbyvalalign(type, &length, &byval, &align);
  return construct_array(values, count, type, length, byval, align);
}

Datum ReturnRow(FunctionCallInfo fcinfo, Datum* values) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "return type must be a row type");
  bool nulls[4] = {false, false, false, false};
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

}  // namespace

Key ReadKey(FunctionCallInfo fcinfo, int arg, bool text_arg, const CounterRow& row,
            const char* counter) {
  if (PG_ARGISNULL(arg))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key must not be null")));
  Key key = {};
  if (!text_arg) {
    if (row.text_keys) KeyedByText(counter);
    key.value = PG_GETARG_DATUM(arg);
  } else if (row.text_keys) {
    key.text_form = true;
    key.value = PointerGetDatum(PG_GETARG_TEXT_PP(arg));
  } else {
    key.value =
        DirectFunctionCall1(int8in, CStringGetDatum(text_to_cstring(PG_GETARG_TEXT_PP(arg))));
  }
  key.hash = HashOf(key.text_form, key.value);
  return key;
}

int RandomNode() {
  return static_cast<int>(pg_prng_uint64_range(&pg_global_prng_state, 0, NodeCount() - 1));
}

}  // namespace sc_proxy

using namespace sc_proxy;

// counter_cluster(counter text, function text DEFAULT NULL) RETURNS text: the CLUSTER of a routed
// call on a whole counter; `function`, the user's call, for a write.
extern "C" Datum sc_proxy_counter_cluster(PG_FUNCTION_ARGS) {
  CheckCaller();
  if (!PG_ARGISNULL(1)) CheckWritable(text_to_cstring(PG_GETARG_TEXT_PP(1)));
  (void)LookupCounter(fcinfo, 0);
  PG_RETURN_TEXT_P(cstring_to_text(kServer));
}

// write_hash(function text, counter text, key anyelement, request_id text DEFAULT NULL,
// bounded boolean DEFAULT false) RETURNS integer: the node of a write of key (sc_incr_once,
// sc_incr_bounded): its home node, or for a spread counter the node of request_id when one is
// given (a retried sc_incr_once finds the id it left), else any node. `bounded`: 0A000 for a
// spread counter, whose nodes would each check the bound against their own share.
extern "C" Datum sc_proxy_write_hash(PG_FUNCTION_ARGS) {
  CheckCaller();
  const char* function = text_to_cstring(PG_GETARG_TEXT_PP(0));
  CheckWritable(function);
  CounterRow row = LookupCounter(fcinfo, 1);
  const char* counter = CounterName(fcinfo, 1);
  if (row.spread && PG_GETARG_BOOL(4))
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("counter \"%s\" is spread over the data nodes: %s needs each key on one node",
                    counter, function),
             errdetail("Each node would answer from its own share of the key only.")));
  Key key = ReadKey(fcinfo, 2, TextArgument(fcinfo, 2, false), row, counter);
  if (row.transactional) CheckAutocommit(counter);
  if (!row.spread) PG_RETURN_INT32(key.hash);
  if (!PG_ARGISNULL(3)) PG_RETURN_INT32(HashOf(true, PointerGetDatum(PG_GETARG_TEXT_PP(3))));
  PG_RETURN_INT32(RandomNode());
}

// read_hashes(counter text, key anyelement, ranked boolean DEFAULT false) RETURNS SETOF integer:
// the nodes a read of key asks, its home node or every node of a spread counter. `ranked`: 0A000
// for a spread counter, whose every node holds a share of every key, so that none can count the
// keys above a value.
extern "C" Datum sc_proxy_read_hashes(PG_FUNCTION_ARGS) {
  CheckCaller();
  CounterRow row = LookupCounter(fcinfo, 0);
  const char* counter = CounterName(fcinfo, 0);
  bool text_arg = TextArgument(fcinfo, 1, false);
  if (PG_ARGISNULL(1))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key must not be null")));
  if (!text_arg && row.text_keys) KeyedByText(counter);
  if (row.spread && PG_GETARG_BOOL(2))
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("counter \"%s\" is spread over the data nodes: its keys cannot be ranked",
                    counter),
             errdetail("Every node holds a share of every key, and counts only its own shares "
                       "above a value."),
             errhint("Count the keys above sc_sum(counter, key) in sc_top(counter, n) with n at "
                     "least the number of keys: that reads every key from every node.")));
  Key key = ReadKey(fcinfo, 1, text_arg, row, counter);
  InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  int count = row.spread ? NodeCount() : 1;
  for (int i = 0; i < count; i++) {
    Datum value = Int32GetDatum(row.spread ? i : key.hash);
    bool isnull = false;
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
  }
  return (Datum)0;
}

// split_keys(function text, counter text, keys anyarray, deltas bigint[], OUT hashes integer[],
// OUT positions integer[], OUT keys anyarray, OUT deltas bigint[]): a call on a group of keys
// split by node: each key's RUN ON value, its position (from 1), the keys and deltas with
// subscripts from 1. `function` NULL: a read (sc_sum_keys), whose spread counter sends every key
// to every node; else a write (sc_incr_batch), whose spread counter sends each key to a node at
// random. A key longer than a node takes (2,048 bytes: slotted_counter's kMaxTextKey) fails the
// batch here, as on a single server, before any node has counted its part.
extern "C" Datum sc_proxy_split_keys(PG_FUNCTION_ARGS) {
  constexpr int kMaxTextKey = 2048;
  bool write = !PG_ARGISNULL(0);
  CheckCaller();
  if (write) CheckWritable(text_to_cstring(PG_GETARG_TEXT_PP(0)));
  CounterRow row = LookupCounter(fcinfo, 1);
  const char* counter = CounterName(fcinfo, 1);
  ArrayType* keys = Elements(fcinfo, 2, "keys");
  ArrayType* deltas = write ? Elements(fcinfo, 3, "deltas") : nullptr;
  bool text_arg = TextArgument(fcinfo, 2, true);
  if (!text_arg && row.text_keys) KeyedByText(counter);
  Datum* key_values;
  int count;
  Deconstruct(keys, &key_values, &count);
  Datum* delta_values = nullptr;
  int delta_count = 0;
  if (write) Deconstruct(deltas, &delta_values, &delta_count);
  bool text_form = text_arg && row.text_keys;
  Datum* parsed = static_cast<Datum*>(palloc(sizeof(Datum) * (count + 1)));
  for (int i = 0; i < count; i++) {
    parsed[i] = text_arg && !text_form
                    ? DirectFunctionCall1(int8in, CStringGetDatum(TextDatumGetCString(
                                                      key_values[i])))
                    : key_values[i];
  }
  if (write && count != delta_count)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("keys and deltas must have the same length"),
                    errdetail("There are %d keys and %d deltas.", count, delta_count)));
  if (write && text_form) {
    for (int i = 0; i < count; i++) {
      int length = VARSIZE_ANY_EXHDR(DatumGetPointer(key_values[i]));
      if (length > kMaxTextKey)
        ereport(ERROR, (errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
                        errmsg("key of counter \"%s\" is too long", counter),
                        errdetail("A key is at most %d bytes; this one has %d.", kMaxTextKey,
                                  length)));
    }
  }
  if (write && count > 0 && row.transactional) CheckAutocommit(counter);
  // A read of a spread counter: every key once to every node.
  int copies = !write && row.spread && count > 0 ? NodeCount() : 1;
  int total = count * copies;
  Datum* hashes = static_cast<Datum*>(palloc(sizeof(Datum) * (total + 1)));
  Datum* positions = static_cast<Datum*>(palloc(sizeof(Datum) * (total + 1)));
  Datum* sent = static_cast<Datum*>(palloc(sizeof(Datum) * (total + 1)));
  for (int copy = 0, at = 0; copy < copies; copy++) {
    for (int i = 0; i < count; i++, at++) {
      int32 hash = !row.spread ? HashOf(text_form, parsed[i]) : write ? RandomNode() : copy;
      hashes[at] = Int32GetDatum(hash);
      positions[at] = Int32GetDatum(i + 1);
      sent[at] = key_values[i];
    }
  }
  Datum values[4] = {
      PointerGetDatum(Construct(hashes, total, INT4OID)),
      PointerGetDatum(Construct(positions, total, INT4OID)),
      PointerGetDatum(Construct(sent, total, ARR_ELEMTYPE(keys))),
      PointerGetDatum(Construct(delta_values, write ? delta_count : 0, INT8OID)),
  };
  return ReturnRow(fcinfo, values);
}

// set_route(counter text, key anyelement, value bigint, OUT hashes integer[], OUT vals bigint[]):
// sc_set split by node: the key's home node sets value; for a spread counter the first node takes
// the value and every other node's share becomes 0, in one round (a NULL value goes to the home
// node, which reports it).
extern "C" Datum sc_proxy_set_route(PG_FUNCTION_ARGS) {
  CheckCaller();
  CheckWritable("sc_set()");
  CounterRow row = LookupCounter(fcinfo, 0);
  const char* counter = CounterName(fcinfo, 0);
  Key key = ReadKey(fcinfo, 1, TextArgument(fcinfo, 1, false), row, counter);
  if (row.transactional) CheckAutocommit(counter);
  int count = row.spread && !PG_ARGISNULL(2) ? NodeCount() : 1;
  Datum* hashes = static_cast<Datum*>(palloc(sizeof(Datum) * count));
  Datum* vals = static_cast<Datum*>(palloc(sizeof(Datum) * count));
  bool* nulls = static_cast<bool*>(palloc0(sizeof(bool) * count));
  for (int i = 0; i < count; i++) {
    hashes[i] = Int32GetDatum(count > 1 ? i : key.hash);
    vals[i] = Int64GetDatum(i == 0 && !PG_ARGISNULL(2) ? PG_GETARG_INT64(2) : 0);
  }
  nulls[0] = PG_ARGISNULL(2);
  int dims[1] = {count};
  int lbs[1] = {1};
  int16 length;
  bool byval;
  char align;
  get_typlenbyvalalign(INT8OID, &length, &byval, &align);
  Datum values[2] = {
      PointerGetDatum(Construct(hashes, count, INT4OID)),
      PointerGetDatum(
          construct_md_array(vals, nulls, 1, dims, lbs, INT8OID, length, byval, align)),
  };
  return ReturnRow(fcinfo, values);
}

// top_n(counter text, n bigint, text_form boolean, OUT n_each bigint, OUT bigint_keys boolean):
// how many keys sc_top (text_form false) or sc_top_text asks of each node: n, or every key of a
// spread counter, whose every node holds a share of each; and whether the keys are bigints (ties
// go to the smaller key: by number, else by bytes).
extern "C" Datum sc_proxy_top_n(PG_FUNCTION_ARGS) {
  CheckCaller();
  CounterRow row = LookupCounter(fcinfo, 0);
  if (PG_ARGISNULL(1))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("n must not be null")));
  if (PG_GETARG_INT64(1) < 0)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("n must not be negative")));
  if (!PG_GETARG_BOOL(2) && row.text_keys) KeyedByText(CounterName(fcinfo, 0));
  Datum values[2] = {Int64GetDatum(row.spread ? PG_INT64_MAX : PG_GETARG_INT64(1)),
                     BoolGetDatum(!row.text_keys)};
  return ReturnRow(fcinfo, values);
}
