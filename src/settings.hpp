// settings.hpp: the slotted_counter.* settings, defined in module.cpp.
#pragma once

namespace sc {

struct Settings {
  int max_entries;     // slotted_counter.max_entries (postmaster): buffer size in counter values
  int max_databases;   // slotted_counter.max_databases (postmaster): databases with a flusher
  int flush_interval;  // slotted_counter.flush_interval (sighup), ms; 0 = only on demand
  int attach_timeout;  // slotted_counter.attach_timeout (sighup), ms; 0 = no limit
  int idle_timeout;    // slotted_counter.idle_timeout (sighup), ms; 0 = the flusher stays
  int max_request_ids; // slotted_counter.max_request_ids (postmaster): buffered sc_incr_once ids
  int dedupe_window;   // slotted_counter.dedupe_window (sighup), s: how long an id applies once
  int rank_memory;     // slotted_counter.rank_memory (sighup), MB: the rank indexes' shared memory
  int shared_text_keys;  // slotted_counter.shared_text_keys (postmaster): text keys' ids shared
  int max_transaction_keys;  // slotted_counter.max_transaction_keys (user): keys one txn changes
  int stored_keys_filter;    // slotted_counter.stored_keys_filter (postmaster), kB per database
  int max_sketches;    // slotted_counter.max_sketches (postmaster): resident distinct counts
};

extern Settings settings;

}  // namespace sc
