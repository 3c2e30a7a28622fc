// xact.cpp: end-of-transaction work (transaction and subtransaction callbacks, object access hook).
//
// Transactional increments are written at pre-commit and settled at the end (transactional.cpp).
// Creating and dropping counters is transactional, like any DDL; the buffer is not. So the buffer
// hears of it only at the end: a committed drop (or DROP EXTENSION) and an aborted create remove
// the counter's entries from the buffer, after bumping shared->catalog_epoch so that no backend
// goes on using a cached definition (and no loader links an entry for it: buffer/load.cpp re-checks
// the epoch under the partition lock). A transaction that did either cannot be prepared.
//
// Dropping old buckets (sc_drop_buckets) is transactional too: the rows go with the transaction,
// the buffer's entries when it commits. From its pre-commit until that purge, the drop is
// registered in shared->bucket_drops, so that a flusher keeps off the dropped entries between the
// commit and the purge (the lock protocol: shmem.hpp).
//
// A change of grants or owner bumps the epoch at commit, so that every backend reads the row again.
// A dropped table takes its attachments with it, as it takes its triggers: the drops are noted by
// the object access hook and the attachments deleted at pre-commit (or pre-prepare), in the same
// transaction.
#include "transactions/xact.hpp"

#include "definitions/drop.hpp"
#include "buffer/buffer.hpp"
#include "definitions/catalog.hpp"
#include "definitions/role_commands.hpp"
#include "definitions/sums.hpp"
#include "definitions/changes.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"
#include "transactions/distinct_adds.hpp"
#include "transactions/throttles.hpp"
#include "transactions/transactional.hpp"

extern "C" {
#include "catalog/dependency.h"
}

namespace sc {

namespace {

object_access_hook_type prev_object_access_hook = nullptr;

bool drops_registered = false;

// Removes from the buffer what the ended (sub)transaction made obsolete. Runs in a commit or
// abort callback: takes only LWLocks and cannot fail.
void SettleNotedChanges(bool committed, int level) {
  bool bumped = false;
  bool ask_flush = false;
  const NotedChange* noted = NotedChanges();
  for (int i = 0; i < NotedCount(); i++) {
    const NotedChange& n = noted[i];
    if (n.level < level || n.change == Change::kRelationDropped) continue;  // the latter: done
    // A counter altered (its retention set, sc_alter_retention): a flush, and the retention pass
    // after it, start after this commit and see it, so the flusher stays if it must expire.
    if (committed && n.id != 0 && n.change == Change::kAltered) ask_flush = true;
    // Its first retention: its values written without a stamp count as written now.
    if (committed && n.change == Change::kRetentionSet) {
      StampCounter(MyDatabaseId, n.id, GetCurrentTimestamp());
      continue;
    }
    bool purge = committed ? n.change != Change::kCreated : n.change == Change::kCreated;
    if (purge) {
      if (!bumped) pg_atomic_fetch_add_u64(&shared->catalog_epoch, 1);
      bumped = true;
      if (n.change == Change::kExtensionDropped)
        PurgeDatabase(MyDatabaseId);
      else if (n.change == Change::kBucketsDropped)
        PurgeBuckets(MyDatabaseId, n.id, n.before);
      else if (n.change != Change::kAltered)
        PurgeCounter(MyDatabaseId, n.id);
    }
  }
  KeepNotedChanges(
      [](const NotedChange& n, void* arg) { return n.level < *static_cast<int*>(arg); }, &level);
  ForgetCachedCounters();
  if (ask_flush)
    if (DatabaseSlot* slot = FindSlot(MyDatabaseId)) AskForFlush(slot);
}

constexpr int kRegisterWaitMs = 10000;

// At pre-commit: registers this transaction's bucket drops (waiting up to 10 s for a
// free slot; they are held only from a pre-commit to the end of that commit).
void RegisterBucketDrops() {
  TimestampTz since = GetCurrentTimestamp();
  const NotedChange* noted = NotedChanges();
  for (int i = 0; i < NotedCount(); i++) {
    if (noted[i].change != Change::kBucketsDropped) continue;
    for (;;) {
      bool done = false;
      SpinLockAcquire(&shared->bucket_drops_mutex);
      for (BucketDrop& drop : shared->bucket_drops)
        if (drop.db == InvalidOid) {
          drop = BucketDrop{MyDatabaseId, noted[i].id, noted[i].before, MyProcPid};
          done = true;
          break;
        }
      SpinLockRelease(&shared->bucket_drops_mutex);
      drops_registered = drops_registered || done;
      if (done) break;
      if (TimestampDifferenceExceeds(since, GetCurrentTimestamp(), kRegisterWaitMs))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("too many transactions are committing bucket drops"),
                        errdetail("At most %d drops can be between their commit and their "
                                  "purge of the buffer at once.", kMaxBucketDrops)));
      SleepAs(Wait::kBucketDrops, 1000L);
      CHECK_FOR_INTERRUPTS();
    }
  }
}

// At pre-commit or pre-prepare: the attachments of the tables this transaction dropped go with them.
void ForgetDroppedTargets() {
  const NotedChange* noted = NotedChanges();
  int n = 0;
  for (int i = 0; i < NotedCount(); i++)
    if (noted[i].change == Change::kRelationDropped) n++;
  if (n == 0) return;
  auto* relids = static_cast<Oid*>(palloc(sizeof(Oid) * n));
  n = 0;
  for (int i = 0; i < NotedCount(); i++)
    if (noted[i].change == Change::kRelationDropped) relids[n++] = noted[i].relid;
  DetachDroppedTargets(relids, n);
  // Done: neither PREPARE nor the end has anything left to do for them.
  KeepNotedChanges(
      [](const NotedChange& c, void*) { return c.change != Change::kRelationDropped; }, nullptr);
}

// At the end: after the purge (commit) or instead of it (abort). Cannot fail.
void UnregisterBucketDrops() {
  if (!drops_registered) return;
  SpinLockAcquire(&shared->bucket_drops_mutex);
  for (BucketDrop& drop : shared->bucket_drops)
    if (drop.db != InvalidOid && drop.pid == MyProcPid) drop.db = InvalidOid;
  SpinLockRelease(&shared->bucket_drops_mutex);
  drops_registered = false;
}

void OnXactEvent(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_PRE_COMMIT:
      ThrottlesPreCommit();  // first: it waits for a flush, which this commit must not hold up
      TransactionalPreCommit();
      SketchesPreCommit();
      if (NotedCount() > 0) ForgetDroppedTargets();
      if (NotedCount() > 0) RegisterBucketDrops();
      break;
    case XACT_EVENT_PRE_PREPARE:
      ThrottlesPrePrepare();
      SketchesPrePrepare();
      TransactionalPrePrepare();
      if (NotedCount() > 0) ForgetDroppedTargets();
      if (NotedCount() > 0)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("cannot PREPARE a transaction that created, dropped or changed "
                               "counters or buckets")));
      break;
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
      ForgetRowSums(1);
      ThrottlesEnd(true);
      SketchesEnd(true);
      TransactionalEnd(true);
      if (NotedCount() > 0) SettleNotedChanges(true, 0);
      UnregisterBucketDrops();
      break;
    case XACT_EVENT_PREPARE:
      ForgetRowSums(1);
      TransactionalEnd(false);  // only a transaction with nothing pending gets here
      SketchesEnd(false);
      break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
      ForgetCountedReader();  // first: what follows may take partition locks EXCLUSIVE
      ForgetRowSums(1);
      BufferBatchAbort();
      ThrottlesEnd(false);
      SketchesEnd(false);
      TransactionalEnd(false);
      if (NotedCount() > 0) SettleNotedChanges(false, 0);
      UnregisterBucketDrops();
      break;
    default:
      break;
  }
}

void OnSubXactEvent(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
  int level = GetCurrentTransactionNestLevel();
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    ForgetCountedReader();
    BufferBatchAbort();
    ForgetRowSums(level);
  }
  if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB) {
    ThrottlesSubEnd(event == SUBXACT_EVENT_COMMIT_SUB, level);
    SketchesSubEnd(event == SUBXACT_EVENT_COMMIT_SUB, level);
    TransactionalSubEnd(event == SUBXACT_EVENT_COMMIT_SUB, level);
  }
  if (NotedCount() == 0) return;
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    // What an aborted subtransaction created is gone; what it dropped is back.
    ForgetAbortedChanges(level);
    SettleNotedChanges(false, level);
  } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
    PromoteNotedChanges(level);
  }
}

void OnObjectAccess(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id,
                    void* arg) {
  if (prev_object_access_hook) prev_object_access_hook(access, class_id, object_id, sub_id, arg);
  if (class_id == ExtensionRelationId && (access == OAT_DROP || access == OAT_POST_ALTER)) {
    // Dropped: purge the database's buffer. Altered (ALTER EXTENSION ... UPDATE, from a later
    // version on): every backend reads the definitions again.
    char* name = get_extension_name(object_id);
    if (name != nullptr && strcmp(name, "slotted_counter") == 0)
      NoteChange(0, access == OAT_DROP ? Change::kExtensionDropped : Change::kAltered);
    return;
  }
  if (access != OAT_DROP) return;
  // A table a user dropped (not the transient heap of a rewrite, which is dropped internally),
  // and only one that could be attached: a permanent or unlogged table, plain or partitioned.
  if (class_id == RelationRelationId && sub_id == 0)
    CheckGuardDrop(object_id, static_cast<ObjectAccessDrop*>(arg)->dropflags);
  if (class_id == RelationRelationId && sub_id == 0 &&
      (static_cast<ObjectAccessDrop*>(arg)->dropflags & PERFORM_DELETION_INTERNAL) == 0) {
    char relkind = get_rel_relkind(object_id);
    if ((relkind == RELKIND_RELATION || relkind == RELKIND_PARTITIONED_TABLE) &&
        get_rel_persistence(object_id) != RELPERSISTENCE_TEMP)
      NoteChange(0, Change::kRelationDropped, 0, object_id);
  }
}

}  // namespace

void InstallTransactionHooks() {
  RegisterXactCallback(OnXactEvent, nullptr);
  RegisterSubXactCallback(OnSubXactEvent, nullptr);
  prev_object_access_hook = object_access_hook;
  object_access_hook = OnObjectAccess;
}

}  // namespace sc
