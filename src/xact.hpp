// xact.hpp: what slotted_counter does at the end of a transaction.
#pragma once

#include "pg.hpp"

namespace sc {

void InstallTransactionHooks();

// sc_create and sc_drop record what the current (sub)transaction did, so that its commit or abort
// can tell the buffer and every backend's cache.
void NoteCounterCreated(int32 id);
void NoteCounterDropped(int32 id);
// sc_grant, sc_revoke and sc_alter_owner: the commit makes every backend read the row again.
void NoteCounterAltered(int32 id);
// Whether this transaction (or a subtransaction of it that has not aborted) dropped the counter:
// then it no longer exists for this transaction, even before the drop commits.
bool DroppedInThisTransaction(int32 id);

// sc_drop_buckets records the buckets it dropped; the commit purges them from the buffer.
void NoteBucketsDropped(int32 id, int64 before);
// Whether this transaction dropped the counter's bucket (reads leave its resident value out).
bool BucketDroppedInThisTransaction(int32 id, int64 bucket);
// Whether this transaction dropped buckets of the counter (and so holds its row FOR UPDATE).
bool BucketsDroppedInThisTransaction(int32 id);
// Whether this transaction (or a subtransaction of it still alive) created counter id.
bool CounterCreatedInThisTransaction(int32 id);

}  // namespace sc
