// catalog.hpp: the router's catalog, slotted_counter_proxy.counters, read by a counter's name
// (catalog.cpp, which is also its only writer).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace sc_proxy {

// What the router knows of a counter it routes.
struct CounterRow {
  bool transactional;
  bool spread;
  bool text_keys;
  Oid owner;
};

// The row of counter `name`, read through the table's primary key in the active snapshot (the
// catalog's own, when there is none); false if the router routes no such counter.
bool ReadCounterRow(const text* name, CounterRow* row);

}  // namespace sc_proxy
