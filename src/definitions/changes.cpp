// changes.cpp: what the current transaction did (changes.hpp). A list in TopMemoryContext, grown
// only by NoteChange; everything else shrinks it in place, so the end of a transaction, which
// must not fail, allocates nothing.
#include "definitions/changes.hpp"

namespace sc {

namespace {

NotedChange* noted = nullptr;
int noted_count = 0;
int noted_space = 0;

bool Any(Change change, int32 id) {
  for (int i = 0; i < noted_count; i++)
    if (noted[i].change == change && noted[i].id == id) return true;
  return false;
}

}  // namespace

void NoteChange(int32 id, Change change, int64 before, Oid relid) {
  if (noted_count == noted_space) {
    noted_space = noted_space == 0 ? 8 : noted_space * 2;
    noted = noted == nullptr
                ? static_cast<NotedChange*>(MemoryContextAlloc(TopMemoryContext,
                                                               noted_space * sizeof(NotedChange)))
                : static_cast<NotedChange*>(repalloc(noted, noted_space * sizeof(NotedChange)));
  }
  noted[noted_count++] =
      NotedChange{id, change, GetCurrentTransactionNestLevel(), before, relid,
                  U64FromFullTransactionId(GetCurrentFullTransactionIdIfAny())};
}

void NoteCounterCreated(int32 id) { NoteChange(id, Change::kCreated); }
void NoteCounterDropped(int32 id) { NoteChange(id, Change::kDropped); }
void NoteCounterAltered(int32 id) { NoteChange(id, Change::kAltered); }

void NoteRetentionSet(int32 id) { NoteChange(id, Change::kRetentionSet); }
void NoteBucketsDropped(int32 id, int64 before) { NoteChange(id, Change::kBucketsDropped, before); }

bool DroppedInThisTransaction(int32 id) { return Any(Change::kDropped, id); }
bool BucketsDroppedInThisTransaction(int32 id) { return Any(Change::kBucketsDropped, id); }
bool CounterCreatedInThisTransaction(int32 id) { return Any(Change::kCreated, id); }

bool ExtensionDroppedInThisTransaction() { return Any(Change::kExtensionDropped, 0); }

uint64 CreatorOf(int32 id) {
  for (int i = 0; i < noted_count; i++)
    if (noted[i].change == Change::kCreated && noted[i].id == id) return noted[i].xid;
  return 0;
}

bool BucketDroppedInThisTransaction(int32 id, int64 bucket) {
  for (int i = 0; i < noted_count; i++)
    if (noted[i].change == Change::kBucketsDropped && noted[i].id == id &&
        bucket < noted[i].before)
      return true;
  return false;
}

int NotedCount() { return noted_count; }
const NotedChange* NotedChanges() { return noted; }

void KeepNotedChanges(bool (*keep)(const NotedChange&, void*), void* arg) {
  int kept = 0;
  for (int i = 0; i < noted_count; i++)
    if (keep(noted[i], arg)) noted[kept++] = noted[i];
  noted_count = kept;
}

void PromoteNotedChanges(int level) {
  for (int i = 0; i < noted_count; i++)
    if (noted[i].level >= level) noted[i].level = level - 1;
}

void ForgetAbortedChanges(int level) {
  KeepNotedChanges(
      [](const NotedChange& n, void* arg) {
        return n.level < *static_cast<int*>(arg) || n.change == Change::kCreated;
      },
      &level);
}

}  // namespace sc
