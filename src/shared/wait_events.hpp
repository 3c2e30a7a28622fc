// wait_events.hpp: the names under which the extension's waits show in pg_stat_activity
// (wait_event_type Extension), registered once for the server when the shared state is made
// (wait_events.cpp). PostgreSQL 17 and later show each name; 15 and 16 show every one of them as
// "Extension" (compat.hpp: ExtensionWaitEvent). docs/reference.md lists them.
#pragma once

#include "pg.hpp"

namespace sc {

enum class Wait : uint8 {
  kPartitionWriter,  // a writer of a partition waits for its counted readers to leave
  kCommitWindow,     // sc_total waits for a flush's commit and settle to be seen together
  kLoad,             // a key waits for another backend's load of it
  kWriteThrough,     // an increment with no room waits for the flusher to write it through
  kRequestId,        // sc_incr_once waits for a request id another call is recording
  kBucketDrops,      // sc_drop_buckets waits for room among the drops being committed
  kFlusherStart,     // a backend waits for its database's flusher to start
  kRollup,           // sc_rollup waits for the flush it asked for
  kWorkersStop,      // DROP DATABASE and its kin wait for the database's workers to leave
  kFlusherMain,      // the flusher waits for its next flush or request
  kCount
};

// Registers every name (in the postmaster, as the shared state is made) into ids.
void RegisterWaitEvents(uint32* ids);

}  // namespace sc
