// once.hpp: increments that apply once per request id (sc_incr_once; once.cpp).
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// Adds delta to key (of bucket) unless a call with the same request id applied to the counter
// within slotted_counter.dedupe_window; returns the value the first call returned. 22023 for an
// empty id or one longer than kMaxRequestIdLen bytes.
int64 IncrementOnce(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                    const text* request_id);

// The flusher's pass: deletes the rows of slotted_counter.requests older than the window.
// Inside a transaction, with SPI connected.
void ForgetOldRequests();

}  // namespace sc
