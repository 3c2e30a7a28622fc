// route.hpp: the router's routing, once: a call's counter and key checked, and the node(s) it goes
// to. The router's own routing (routed.cpp) and the RUN ON, CLUSTER and split functions of its
// PL/Proxy functions (route.cpp, sql/slotted_counter_proxy--1.0.sql) are both made of these, so
// that a key reaches the same node, and a call fails the same way, whichever carries it.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
}

#include "catalog.hpp"

namespace sc_proxy {

// The counter named by argument `arg`: 22004 if NULL, 42704 if the router routes no such counter.
CounterRow LookupCounter(FunctionCallInfo fcinfo, int arg);

// A key as it goes to its node: a bigint or a text, and its home node's RUN ON value (as PL/Proxy
// hashes: hashint8, or hashtext of the bytes).
struct Key {
  bool text_form;
  Datum value;
  int32 hash;
};

// Argument `arg`, the key, of a function whose key is text when `text_arg` (else bigint), for
// `counter`: 22004 if NULL; 42804 for a bigint key of a counter keyed by text; a text key of a
// counter keyed by bigint is read as a bigint (22P02, 22003) and goes as one.
Key ReadKey(FunctionCallInfo fcinfo, int arg, bool text_arg, const CounterRow& row,
            const char* counter);

// A node at random, for a write of a spread counter.
int RandomNode();

}  // namespace sc_proxy
