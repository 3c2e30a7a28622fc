// catalog.hpp: counter definitions, read from slotted_counter.counters and cached per backend.
#pragma once

#include "pg.hpp"
#include "time_bucket.hpp"

namespace sc {

enum class Durability : uint8 { kTransactional, kBuffered };

struct CounterDef {
  int32 id;
  Durability durability;
  bool bucketed;
  BucketWidth width;        // the bucket width, when bucketed
  char name[NAMEDATALEN];
};

// The definition of counter `id` of this database; fails with 42704 if there is none.
const CounterDef* GetCounter(int32 id);
// The definition, or nullptr.
const CounterDef* FindCounter(int32 id);
// The id of the counter named `name`, or -1.
int32 FindCounterByName(const char* name);
// Fails with 42704 (and a hint) when the name or id is unknown.
void ReportUnknownCounter(const char* what);

// The epoch the cached definitions were read under (compare with shared->catalog_epoch).
uint64 CachedCatalogEpoch();
// Drops every cached definition: after this transaction created or dropped counters, or when
// the shared epoch moved.
void ForgetCachedCounters();

}  // namespace sc
