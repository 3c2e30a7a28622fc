// wait_events.cpp: the names of the extension's waits (wait_events.hpp).
#include "shared/wait_events.hpp"

namespace sc {

namespace {

// In Wait's order.
const char* const kNames[] = {
    "SlottedCounterPartitionWriter", "SlottedCounterCommitWindow", "SlottedCounterLoad",
    "SlottedCounterWriteThrough",    "SlottedCounterRequestId",    "SlottedCounterBucketDrops",
    "SlottedCounterFlusherStart",    "SlottedCounterRollup",       "SlottedCounterWorkersStop",
    "SlottedCounterFlusherMain"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Wait::kCount), "a name per wait");

}  // namespace

void RegisterWaitEvents(uint32* ids) {
  for (size_t i = 0; i < size_t(Wait::kCount); i++) ids[i] = ExtensionWaitEvent(kNames[i]);
}

}  // namespace sc
