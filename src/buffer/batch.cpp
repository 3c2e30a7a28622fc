// batch.cpp: sc_incr_batch on a buffered counter, all or nothing (buffer.hpp,
// BufferIncrementBatch; the lock protocol of pins is in core/protocol.hpp, that of partition
// holds in core/through_holds.hpp).
//
// Phase 1, where an error changes nothing: the keys are made resident and pinned (batches
// together pin a quarter of the buffer at most); the keys left over are summed per key into a
// dynamic shared memory segment, and their partitions are held against loads. Phase 2, with
// interrupts held: the adds to the pinned entries, one write-through of the other keys by the
// flusher (one statement, answered after its transaction ended), and the undo of the adds if that
// failed. Pins and holds are given back by the batch, or by the abort of its (sub)transaction
// (xact.cpp), never in an error handler.
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "definitions/changes.hpp"
#include "core/checked_math.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"
#include "shared/write_through.hpp"

namespace sc {

namespace {

// A buffered batch in progress (BufferIncrementBatch): the entries it pinned, its share of the
// pin budget, and the partitions it holds for its write-through; given back by the batch or, if
// it fails before its adds, by the abort of its transaction (BufferBatchAbort). In
// TopMemoryContext.
Pin* batch_pins = nullptr;
int batch_npins = 0;
uint32 batch_budget = 0;
bool batch_holds[kPartitions];
bool batch_holding = false;

// How long a batch waits for the flusher to take its write-through, and, once taken, how long
// before it checks that the flusher serving it still runs.
constexpr int kBatchThroughWaitMs = 10000;

// Batches together pin at most a quarter of the buffer: the rest stays for loads, commits and
// sets.
uint32 TakePinBudget(uint32 wanted) {
  uint32 budget = Max(1u, shared->table->capacity() / 4);
  uint32 used = pg_atomic_read_u32(&shared->batch_pins_used);
  for (;;) {
    uint32 take = used >= budget ? 0 : Min(wanted, budget - used);
    if (take == 0) return 0;
    if (pg_atomic_compare_exchange_u32(&shared->batch_pins_used, &used, used + take)) return take;
  }
}

// Pins the resident entry of k, if there is one; false otherwise (*loading: it is being loaded).
// The pin is recorded under the lock that took it, so that no error can leak it. A key that has
// expired for cutoff holds 0 from then on (protocol.hpp: PinLocked).
bool PinIfResident(const CounterKey& k, uint32 hash, int64 cutoff, bool* loading, int* pin_of) {
  auto table = Table();
  Probe probe = Probe::kMissing;
  Dirtied dirtied;
  table.Exclusively(CounterTable::PartitionOf(hash), [&] {
    probe = table.PinLocked(k, hash, &batch_pins[batch_npins], cutoff, &dirtied);
    if (probe == Probe::kFound) *pin_of = batch_npins++;
  });
  NoteDirtied(dirtied);
  *loading = probe == Probe::kLoading;
  return probe == Probe::kFound;
}

// Makes k resident and pins it; false if no entry can be had.
bool PinResident(CounterDef* def, const CounterKey& k, uint32 hash, int64 cutoff, int* pin_of) {
  int waits = 0;
  for (;;) {
    bool loading;
    if (PinIfResident(k, hash, cutoff, &loading, pin_of)) return true;
    if (loading)
      WaitForLoad(&waits);
    else if (!MakeResident(def, k, hash, &waits))
      return false;
  }
}

void ReleaseBatch() {
  for (int i = 0; i < batch_npins; i++) Table().Unpin(batch_pins[i]);
  batch_npins = 0;
  if (batch_pins != nullptr) pfree(batch_pins);
  batch_pins = nullptr;
  if (batch_budget > 0) pg_atomic_fetch_sub_u32(&shared->batch_pins_used, batch_budget);
  batch_budget = 0;
  if (batch_holding)
    for (uint32 p = 0; p < kPartitions; p++)
      if (batch_holds[p]) {
        ReleaseHold(shared->through_holds, MyDatabaseId, p);
        batch_holds[p] = false;
      }
  batch_holding = false;
}

// One occurrence of a key that is to be written through.
struct ThroughKey {
  uint32 partition;
  uint32 hash;
  int occurrence;  // index into the batch's keys
  int64 key;
};

int CompareByPartition(const void* a, const void* b) {
  const auto* x = static_cast<const ThroughKey*>(a);
  const auto* y = static_cast<const ThroughKey*>(b);
  if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
  return x->occurrence < y->occurrence ? -1 : x->occurrence > y->occurrence ? 1 : 0;
}

int CompareByKey(const void* a, const void* b) {
  const auto* x = static_cast<const ThroughKey*>(a);
  const auto* y = static_cast<const ThroughKey*>(b);
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->occurrence < y->occurrence ? -1 : x->occurrence > y->occurrence ? 1 : 0;
}

// Holds the partitions of the keys `through` (sorted by partition) against loads, one partition
// lock at a time in partition order. An occurrence whose key is resident by then is pinned
// instead (pinned[], pin_of[]); one whose key is being loaded waits for that load.
void HoldPartitions(const CounterDef& def, int64 bucket, const ThroughKey* through, int nthrough,
                    bool* pinned, int* pin_of) {
  memset(batch_holds, 0, sizeof(batch_holds));
  batch_holding = true;
  auto table = Table();
  for (int first = 0; first < nthrough;) {
    uint32 p = through[first].partition;
    int end = first;
    while (end < nthrough && through[end].partition == p) end++;
    int waits = 0;
    auto key_of = [&](int j, CounterKey* k, uint32* hash) {
      if (pinned[through[first + j].occurrence]) return false;
      *k = CounterKey{MyDatabaseId, def.id, through[first + j].key, bucket};
      *hash = through[first + j].hash;
      return true;
    };
    // The pin is recorded under the lock that took it, so that no error can leak it.
    auto pin = [&](int j, const Pin& taken) {
      batch_pins[batch_npins] = taken;
      pin_of[through[first + j].occurrence] = batch_npins++;
      pinned[through[first + j].occurrence] = true;
    };
    while (!HoldPartitionForBatch(table, shared->through_holds, MyDatabaseId, p, end - first,
                                  key_of, pin))
      WaitForLoad(&waits);
    batch_holds[p] = true;
    first = end;
  }
}

// The outcome of a batch's write-through.
struct ThroughOutcome {
  bool done;
  int sqlerrcode;
};

// Publishes this backend's request (free: FreeRequest) for the m items in `segment` and waits for
// the flusher's answer, with interrupts held, raising no error: a request still pending after
// kBatchThroughWaitMs is withdrawn; one that a flusher took is waited for as long as that flusher
// runs (the flusher answers after its transaction ended, one way or the other).
ThroughOutcome AwaitBatchThrough(const CounterDef& def, int64 bucket, dsm_segment* segment,
                                 int m, Write w) {
  WriteThroughRequest* r = &shared->requests[MyProcIndex()];
  PublishBatch(r, CounterKey{MyDatabaseId, def.id, 0, bucket}, m, dsm_segment_handle(segment),
               w);
  RequestAnswer answer = AwaitAnswer(r, true, kBatchThroughWaitMs);
  return ThroughOutcome{answer.state == kRequestDone, answer.sqlerrcode};
}

// Adds delta to a pinned entry; false if that leaves the bigint range (nothing changed then).
// An entry whose counter was dropped meanwhile (a new generation) takes nothing: the increment
// falls before the drop.
bool AddPinned(const Pin& pin, int64 delta, int64* value) {
  Dirtied dirtied;
  bool ok = Table().AddPinned(pin, delta, value, &dirtied);
  NoteDirtied(dirtied);
  return ok;
}

// Once the batch is counted: its keys were written at `stamp`.
void StampPinned(const Pin& pin, int64 stamp) {
  Dirtied dirtied;
  Table().StampPinned(pin, stamp, &dirtied);
  NoteDirtied(dirtied);
}

}  // namespace


void BufferBatchAbort() {
  if (batch_npins > 0 || batch_holding || batch_pins != nullptr || batch_budget > 0)
    ReleaseBatch();
}

void BufferIncrementBatch(const CounterDef& counter, const int64* keys, const int64* deltas,
                          int n, int64 bucket, int64* values) {
  if (n == 0) {
    HOLD_INTERRUPTS();  // as a batch that counted returns
    return;
  }
  CounterDef def = counter;
  Write w = WriteNow(def);
  BufferBatchAbort();  // nothing is left of an earlier batch; but if so, give it back
  // The flusher cannot write keys of a counter this transaction created (it cannot see it) or
  // holds locked to drop buckets: then every key must be resident.
  bool through_allowed = !CounterCreatedInThisTransaction(def.id) &&
                         !BucketsDroppedInThisTransaction(def.id);
  batch_pins = static_cast<Pin*>(
      MemoryContextAllocHuge(TopMemoryContext, sizeof(Pin) * size_t(n)));
  batch_budget = through_allowed ? TakePinBudget(uint32(n)) : 0;
  auto* pin_of = static_cast<int*>(palloc(sizeof(int) * n));
  auto* pinned = static_cast<bool*>(palloc0(sizeof(bool) * n));
  auto* through = static_cast<ThroughKey*>(palloc(sizeof(ThroughKey) * n));
  int nthrough = 0;

  // Phase 1, where an error changes nothing: pin what can be resident.
  for (int i = 0; i < n; i++) {
    if ((i & 1023) == 0) CHECK_FOR_INTERRUPTS();
    CounterKey k{MyDatabaseId, def.id, keys[i], bucket};
    uint32 hash = HashCounterKey(k);
    if ((!through_allowed || batch_npins < int(batch_budget)) &&
        PinResident(&def, k, hash, w.cutoff, &pin_of[i])) {
      pinned[i] = true;
      continue;
    }
    if (!through_allowed)
      ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                      errmsg("no room in the slotted_counter buffer for counter \"%s\"", def.name),
                      errdetail("The buffer is full, and this transaction created the counter or "
                                "holds it for sc_drop_buckets, so the flusher cannot write the "
                                "batch through."),
                      errhint("Count in a transaction of its own, or raise "
                              "slotted_counter.max_entries.")));
    through[nthrough++] = ThroughKey{CounterTable::PartitionOf(hash), hash, i, keys[i]};
  }
  ThroughItem* items = nullptr;
  int m = 0;
  dsm_segment* segment = nullptr;
  if (nthrough > 0) {
    (void)FreeRequest();
    qsort(through, nthrough, sizeof(ThroughKey), CompareByPartition);
    HoldPartitions(def, bucket, through, nthrough, pinned, pin_of);
    int kept = 0;
    for (int j = 0; j < nthrough; j++)
      if (!pinned[through[j].occurrence]) through[kept++] = through[j];
    nthrough = kept;
  }
  if (nthrough > 0) {
    // One item per key, its deltas summed in the batch's order.
    qsort(through, nthrough, sizeof(ThroughKey), CompareByKey);
    segment = dsm_create(sizeof(ThroughItem) * size_t(nthrough), 0);
    items = static_cast<ThroughItem*>(dsm_segment_address(segment));
    for (int j = 0; j < nthrough; j++) {
      int64 delta = deltas[through[j].occurrence];
      if (m > 0 && items[m - 1].key == through[j].key) {
        if (!CheckedAdd(items[m - 1].delta, delta, &items[m - 1].delta))
          ReportValueOutOfRange(def.name,
                                psprintf("The deltas of key %lld in this batch add up past the "
                                         "bigint range.",
                                         (long long)through[j].key));
      } else {
        items[m++] = ThroughItem{through[j].key, delta, 0};
      }
    }
  }

  // Phase 2, with interrupts held: the adds, the write-through, and the undo if it failed. It
  // starts with no cancel pending (one that came before ends the batch here, having changed
  // nothing). A cancel, statement timeout or termination that comes while the flusher writes the
  // batch through withdraws it (the flusher gives it up before its next chunk of keys), and the
  // batch changes nothing; one that comes after the keys are in, or when no key is written
  // through, comes too late, as one that comes while a transaction commits: interrupts stay held
  // until the call returns (shared/late_cancel.hpp).
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    HOLD_INTERRUPTS();
    if (!QueryCancelPending && !ProcDiePending) break;
    RESUME_INTERRUPTS();
  }
  int applied = 0;
  bool overflow = false;
  for (; applied < n; applied++) {
    if (!pinned[applied]) continue;
    if (!AddPinned(batch_pins[pin_of[applied]], deltas[applied], &values[applied])) {
      overflow = true;
      break;
    }
  }
  ThroughOutcome outcome{true, 0};
  if (!overflow && m > 0) outcome = AwaitBatchThrough(def, bucket, segment, m, w);
  bool counted = !overflow && outcome.done;
  if (!counted) {
    // Takes back what was added, last first. (At the very edge of the bigint range a concurrent
    // add can make a take-back itself overflow; it is then left out.)
    for (int i = applied - 1; i >= 0; i--) {
      int64 ignored;
      if (pinned[i]) (void)AddPinned(batch_pins[pin_of[i]], -deltas[i], &ignored);
    }
  }
  // Counted: its keys were written now (a batch that changed nothing wrote nothing).
  if (counted)
    for (int i = 0; i < n; i++)
      if (pinned[i]) StampPinned(batch_pins[pin_of[i]], w.stamp);
  ReleaseBatch();

  if (!counted) {
    // Nothing counted: the error comes now, with interrupts resumed.
    RESUME_INTERRUPTS();
    if (segment != nullptr) dsm_detach(segment);
    // Withdrawn: the cancel, timeout or termination that did it ends the statement now.
    if (!outcome.done && outcome.sqlerrcode == ERRCODE_QUERY_CANCELED) {
      CHECK_FOR_INTERRUPTS();
      ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                      errmsg("canceling statement due to user request")));
    }
    if (overflow)
      ReportOverflow(def, keys[applied], BufferRead(def, keys[applied], bucket, false),
                     deltas[applied]);
    if (outcome.sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)
      ReportValueOutOfRange(def.name, "A key written through to the table would leave the bigint "
                                      "range; nothing of the batch was counted.");
    if (outcome.sqlerrcode == ERRCODE_UNDEFINED_OBJECT) ReportUnknownCounter(def.name);
    ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                    errmsg("no room in the slotted_counter buffer for the batch on counter \"%s\"",
                           def.name),
                    errdetail("%d of its keys had to be written through to the table, and no "
                              "flusher took them within %d seconds; nothing of the batch was "
                              "counted.",
                              m, kBatchThroughWaitMs / 1000),
                    errhint("slotted_counter.stats shows the flusher's last error. Raise "
                            "slotted_counter.max_entries.")));
  }
  // The new values of the keys written through, occurrence by occurrence: a later occurrence of
  // a key comes after an earlier one.
  for (int i = n - 1; i >= 0; i--) {
    if (pinned[i]) continue;
    ThroughItem* item = FindThroughItem(items, m, keys[i]);
    values[i] = item->result;
    (void)__builtin_sub_overflow(item->result, deltas[i], &item->result);
  }
  if (segment != nullptr) dsm_detach(segment);
}

}  // namespace sc
