// sketches.cpp: the router's union of its nodes' sketches of a distinct counter (sc_count_keys,
// sc_count_total, sc_sketch: sql/slotted_counter_proxy--1.0.sql), with the data node's reading
// of a sketch's bytes and its union (../src/sketch_bytes.hpp, core/sketch_set.hpp).
//
// No C++ object with a destructor lives in these frames: an ereport from below is safe.
#include "sketch_bytes.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_proxy_sketch_union);
PG_FUNCTION_INFO_V1(sc_proxy_sketch_count);
}

// slotted_counter_proxy.sketch_union(a bytea, b bytea) RETURNS bytea: the union (22023 for a
// value that is no sketch, or sketches of different shapes); also the step of sketch_union_agg.
extern "C" Datum sc_proxy_sketch_union(PG_FUNCTION_ARGS) {
  sc::SketchSet* a = sc::SketchArgument(fcinfo, 0);
  sc::UnionSketchArguments(a, sc::SketchArgument(fcinfo, 1));
  PG_RETURN_BYTEA_P(sc::SketchBytes(*a));
}

// slotted_counter_proxy.sketch_count(sketch bytea) RETURNS bigint: its estimate, rounded, as a
// data node's sc_count gives it.
extern "C" Datum sc_proxy_sketch_count(PG_FUNCTION_ARGS) {
  PG_RETURN_INT64(sc::SketchSetCount(*sc::SketchArgument(fcinfo, 0)));
}
