// changes.hpp: what the current transaction did to counters, their buckets and the tables
// attachments write, level by level (changes.cpp). Recorded as it happens; acted on at the end
// of the (sub)transaction (xact.cpp) and consulted before then by the code that must not act as if
// a change had not happened (catalog, buffer, batch, bucketed reads). Backend-local: no lock.
#pragma once

#include "pg.hpp"

namespace sc {

enum class Change : uint8 { kCreated, kDropped, kExtensionDropped, kBucketsDropped, kAltered,
                            kRelationDropped, kRetentionSet };

struct NotedChange {
  int32 id;      // the counter (0: the extension, or a table)
  Change change;
  int level;     // transaction nesting level that did it
  int64 before;  // kBucketsDropped: buckets that start before it
  Oid relid;     // kRelationDropped: the table
  uint64 xid;    // the (sub)transaction that did it (a FullTransactionId; 0 if it has none)
};

// Records a change of the current (sub)transaction. Allocates: call it where an error is allowed.
void NoteChange(int32 id, Change change, int64 before = 0, Oid relid = InvalidOid);

// sc_create and sc_drop record what the current (sub)transaction did, so that its commit or abort
// can tell the buffer and every backend's cache.
void NoteCounterCreated(int32 id);
void NoteCounterDropped(int32 id);
// sc_grant, sc_revoke and sc_alter_owner: the commit makes every backend read the row again.
void NoteCounterAltered(int32 id);
// sc_alter_retention gave a counter that had none a retention: the commit stamps the counter's
// values in the buffer (buffer.hpp: StampCounter), as their writes were not.
void NoteRetentionSet(int32 id);
// sc_drop_buckets records the buckets it dropped; the commit purges them from the buffer.
void NoteBucketsDropped(int32 id, int64 before);

// Whether this transaction (or a subtransaction of it that has not aborted) dropped the counter:
// then it no longer exists for this transaction, even before the drop commits.
bool DroppedInThisTransaction(int32 id);
// Whether this transaction dropped the counter's bucket (reads leave its resident value out).
bool BucketDroppedInThisTransaction(int32 id, int64 bucket);
// Whether this transaction dropped buckets of the counter (and so holds its row FOR UPDATE).
bool BucketsDroppedInThisTransaction(int32 id);
// Whether this transaction (or a subtransaction of it still alive) dropped the extension.
bool ExtensionDroppedInThisTransaction();
// Whether this transaction (or a subtransaction of it still alive) created counter id.
bool CounterCreatedInThisTransaction(int32 id);
// The (sub)transaction of this transaction that created counter id (a FullTransactionId), or 0
// if it was not created here.
uint64 CreatorOf(int32 id);

// For the end of a (sub)transaction (xact.cpp); none of these can fail.
int NotedCount();
const NotedChange* NotedChanges();
// Keeps, in order, only the changes for which keep(change, arg) is true.
void KeepNotedChanges(bool (*keep)(const NotedChange&, void*), void* arg);
// A subtransaction of nesting level `level` committed: its changes become its parent's.
void PromoteNotedChanges(int level);
// It aborted: what it dropped or altered is forgotten (it is back as it was); what it created
// stays noted, at its level, for the abort to purge.
void ForgetAbortedChanges(int level);

}  // namespace sc
