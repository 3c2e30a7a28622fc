// shmem.cpp: sizing and creating the shared state (layout and lock protocol: shmem.hpp).
#include <new>

#include "shared/shmem.hpp"

#include "shared/rank_registry.hpp"
#include "shared/request_ids.hpp"

#include "settings.hpp"

namespace sc {

SharedState* shared = nullptr;
int counted_partition = -1;

namespace {

// The sets of the shared text keys' cache that slotted_counter.shared_text_keys asks for (0:
// none), and their bytes.
uint32 SharedKeySetsWanted() {
  return settings.shared_text_keys > 0 ? SharedKeySets(uint32(settings.shared_text_keys)) : 0;
}

Size SharedKeysSize() {
  return mul_size(mul_size(SharedKeySetsWanted(), kKeySetWays), sizeof(SharedKeySlot));
}

// The shared memory found was made by a library of another layout (CreateSharedState).
bool layout_mismatch = false;

const char* const kTranche = "slotted_counter";

// Each database's filter of stored keys (core/stored_filter.hpp): a power of two of words.
Size StoredFilterBytes() {
  return Size(StoredFilterWords(uint64(settings.stored_keys_filter) * 1024) * sizeof(uint64));
}

// Every database's filter, in an allocation of its own ("slotted_counter stored keys" in
// pg_shmem_allocations): memory per database, not per value.
Size StoredFiltersSize() { return mul_size(StoredFilterBytes(), settings.max_databases); }

Size SharedStateSize() {
  Size size = MAXALIGN(sizeof(SharedState));
  size = add_size(size, MAXALIGN(mul_size(sizeof(DatabaseSlot), settings.max_databases)));
  size = add_size(size, MAXALIGN(mul_size(mul_size(sizeof(DirtyRef), settings.max_databases),
                                          DirtyRingCapacity(uint32(settings.max_entries)))));
  size = add_size(size, MAXALIGN(mul_size(sizeof(WriteThroughRequest), MaxBackends)));
  size = add_size(size, 64);  // the partition readers are cache-line aligned
  size = add_size(size, mul_size(sizeof(PartitionReaders), kPartitions));
  size = add_size(size, 64);  // the counter table is cache-line aligned
  size = add_size(size, CounterTable::BytesFor(uint32(settings.max_entries)));
  size = add_size(size, 64);  // the request ids are cache-line aligned
  size = add_size(size, RequestIdTableSize(settings.max_request_ids));
  size = add_size(size, 64);  // the rank indexes' registry is cache-line aligned
  size = add_size(size, RankIndexesSize());
  size = add_size(size, 64);  // the shared text keys are cache-line aligned
  size = add_size(size, SharedKeysSize());
  size = add_size(size, 64);  // the sketch pool is cache-line aligned
  size = add_size(size, SketchPool::BytesFor(uint32(settings.max_sketches),
                                             uint32(settings.max_entries)));
  size = add_size(size, MAXALIGN(mul_size(sizeof(slock_t), settings.max_sketches)));
  return size;
}

}  // namespace

void RequestSharedState() {
  RequestAddinShmemSpace(add_size(SharedStateSize(), StoredFiltersSize()));
  RequestNamedLWLockTranche(kTranche,
                            kPartitions + 1 + kIdParts + kApplyLocks + kRankLocks + kKeyCacheLocks);
}

bool CreateSharedState() {
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found;
  auto* s = static_cast<SharedState*>(ShmemInitStruct("slotted_counter", SharedStateSize(), &found));
  if (found && (s->layout_version != kLayoutVersion || s->layout_size != SharedStateSize())) {
    // Made by another build of the library: not a byte of it is ours to read.
    LWLockRelease(AddinShmemInitLock);
    layout_mismatch = true;
    return false;
  }
  if (!found) {
    s->layout_version = kLayoutVersion;
    s->layout_size = SharedStateSize();
    LWLockPadded* locks = GetNamedLWLockTranche(kTranche);
    s->slots_lock = &locks[0].lock;
    s->partition_locks = &locks[1];
    pg_atomic_init_u64(&s->catalog_epoch, 1);
    for (std::atomic<uint32_t>& cell : s->write_throughs_open.cells)
      new (&cell) std::atomic<uint32_t>(0);
    pg_atomic_init_u64(&s->evictions, 0);
    pg_atomic_init_u64(&s->room_wanted_at, 0);
    InitThroughHolds(s->through_holds);
    pg_atomic_init_u32(&s->batch_pins_used, 0);
    for (CommitWindow& window : s->commit_windows) InitCommitWindow(*new (&window) CommitWindow);
    SpinLockInit(&s->bucket_drops_mutex);
    for (BucketDrop& drop : s->bucket_drops) drop = BucketDrop{InvalidOid, 0, 0, 0};
    RegisterWaitEvents(s->wait_events);
    s->max_databases = settings.max_databases;
    s->max_requests = MaxBackends;

    char* p = reinterpret_cast<char*>(s) + MAXALIGN(sizeof(SharedState));
    s->slots = reinterpret_cast<DatabaseSlot*>(p);
    p += MAXALIGN(sizeof(DatabaseSlot) * settings.max_databases);
    int ring_capacity = DirtyRingCapacity(uint32(settings.max_entries));
    auto* ring_refs = reinterpret_cast<DirtyRef*>(p);
    p += MAXALIGN(sizeof(DirtyRef) * settings.max_databases * size_t(ring_capacity));
    uint64 filter_words = StoredFilterBytes() / sizeof(uint64);
    bool filters_found;
    auto* filter_words_at = static_cast<std::atomic<uint64_t>*>(
        ShmemInitStruct("slotted_counter stored keys", StoredFiltersSize(), &filters_found));
    Assert(!filters_found);
    for (int i = 0; i < settings.max_databases; i++) {
      DatabaseSlot* slot = &s->slots[i];
      memset(static_cast<void*>(slot), 0, sizeof(*slot));
      InitSlotClaim(*new (&slot->claim) SlotClaim);
      SpinLockInit(&slot->mutex);
      InitFlushTickets(slot->tickets);
      SpinLockInit(&slot->dirty_mutex);
      slot->dirty.overflow = true;
      slot->dirty.capacity = ring_capacity;
      slot->dirty.refs = ring_refs + size_t(i) * size_t(ring_capacity);
      SpinLockInit(&slot->fold_mutex);
      SpinLockInit(&slot->ids_mutex);
      InitKeyWrites(*new (&slot->key_writes) KeyWrites);
      InitFoldEpochs(*new (&slot->fold) FoldEpochs);
      InitStoredFilter(*new (&slot->stored) StoredFilter, filter_words_at + i * filter_words,
                       filter_words);
      ConditionVariableInit(&slot->done_cv);
    }
    s->requests = reinterpret_cast<WriteThroughRequest*>(p);
    p += MAXALIGN(sizeof(WriteThroughRequest) * MaxBackends);
    for (int i = 0; i < MaxBackends; i++) {
      WriteThroughRequest* r = &s->requests[i];
      memset(static_cast<void*>(r), 0, sizeof(*r));
      SpinLockInit(&r->mutex);
      r->request.state = kRequestEmpty;
    }
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->partition_readers = reinterpret_cast<PartitionReaders*>(p);
    for (uint32 i = 0; i < kPartitions; i++)
      new (&s->partition_readers[i]) PartitionReaders{{0}, {0}};
    p += sizeof(PartitionReaders) * kPartitions;
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->table = CounterTable::Create(p, uint32(settings.max_entries));
    p += CounterTable::BytesFor(uint32(settings.max_entries));
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->request_ids = CreateRequestIdTable(p, settings.max_request_ids, &locks[kPartitions + 1],
                                          &locks[kPartitions + 1 + kIdParts]);
    p += RequestIdTableSize(settings.max_request_ids);
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->rank_indexes = reinterpret_cast<RankIndexes*>(p);
    InitRankIndexes(s->rank_indexes, &locks[kPartitions + 1 + kIdParts + kApplyLocks]);
    p += RankIndexesSize();
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->shared_key_sets = SharedKeySetsWanted();
    s->shared_keys = reinterpret_cast<SharedKeySlot*>(p);
    s->shared_key_locks = &locks[kPartitions + 1 + kIdParts + kApplyLocks + kRankLocks];
    memset(p, 0, SharedKeysSize());
    p += SharedKeysSize();
    p = reinterpret_cast<char*>(TYPEALIGN(64, p));
    s->sketches = SketchPool::Create(p, uint32(settings.max_sketches),
                                     uint32(settings.max_entries));
    p += SketchPool::BytesFor(uint32(settings.max_sketches), uint32(settings.max_entries));
    s->sketch_locks = reinterpret_cast<slock_t*>(p);
    for (int i = 0; i < settings.max_sketches; i++) SpinLockInit(&s->sketch_locks[i]);
  }
  LWLockRelease(AddinShmemInitLock);
  shared = s;
  return !found;
}

void ForgetCountedReader() {
  if (counted_partition >= 0) Table().locks().ReleaseShared(uint32(counted_partition));
}

DatabaseSlot* FindSlot(Oid db) { return FindSlot(shared->slots, shared->max_databases, db); }

void ResetFoldEpochs(DatabaseSlot* slot) {
  SpinMutex mutex{&slot->fold_mutex};
  ResetFoldEpochs(slot->fold, mutex);
}

void PublishFold(DatabaseSlot* slot, uint32 epoch, const int32* skipped, int nskipped) {
  SpinMutex mutex{&slot->fold_mutex};
  PublishFold(slot->fold, mutex, epoch, skipped, nskipped);
}

bool Folded(DatabaseSlot* slot, int32 counter, uint32 epoch) {
  SpinMutex mutex{&slot->fold_mutex};
  return Folded(slot->fold, mutex, counter, epoch);
}

void NoteDirty(DatabaseSlot* slot, uint32 index, uint32 generation) {
  if (slot == nullptr) {
    // Not reached (every writer has its slot); but if so, no flush may trust its ring.
    for (int i = 0; i < shared->max_databases; i++) MarkDirtyUntracked(&shared->slots[i]);
    return;
  }
  SpinMutex mutex{&slot->dirty_mutex};
  RingNote(slot->dirty, mutex, index, generation);
}

void MarkDirtyUntracked(DatabaseSlot* slot) {
  SpinMutex mutex{&slot->dirty_mutex};
  RingMarkUntracked(slot->dirty, mutex);
}

void OpenTotalsWrite(DatabaseSlot* slot) {
  TimestampTz now = GetCurrentTimestamp();
  SpinLockAcquire(&slot->mutex);
  if (slot->totals_writers++ == 0 || now < slot->totals_writers_since)
    slot->totals_writers_since = now;
  SpinLockRelease(&slot->mutex);
}

void CloseTotalsWrite(DatabaseSlot* slot) {
  SpinLockAcquire(&slot->mutex);
  if (slot->totals_writers > 0) slot->totals_writers--;
  SpinLockRelease(&slot->mutex);
}

TimestampTz TotalsWatermark(DatabaseSlot* slot) {
  TimestampTz now = GetCurrentTimestamp();
  SpinLockAcquire(&slot->mutex);
  TimestampTz watermark = slot->totals_writers > 0 ? Min(now, slot->totals_writers_since) : now;
  SpinLockRelease(&slot->mutex);
  return watermark;
}

void ReportNotPreloaded() {
  // Preloaded, yet this copy of the library has no shared memory: the server started with
  // another file (the library was replaced while it runs, or this copy was loaded from another
  // path), whose shared memory this one must not touch.
  const char* preloaded = GetConfigOption("shared_preload_libraries", true, false);
  if (layout_mismatch || (preloaded != nullptr && strstr(preloaded, "slotted_counter") != nullptr))
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("this slotted_counter library is not the one the server started with"),
             errdetail("The library file was replaced, or loaded from another path, while the "
                       "server runs: the shared memory belongs to the copy the server preloaded, "
                       "and this copy (shared-memory layout %u) does not touch it.",
                       kLayoutVersion),
             errhint("Restart the server to use the installed library, then run ALTER "
                     "EXTENSION slotted_counter UPDATE in each database.")));
  ereport(ERROR,
          (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
           errmsg("slotted_counter must be loaded via \"shared_preload_libraries\""),
           errhint("Add slotted_counter to shared_preload_libraries in postgresql.conf "
                   "and restart the server.")));
}

}  // namespace sc
