// reserve.cpp: a transactional counter's commit: its deltas are reserved in their entries before
// the commit (bounds checked against the committed value plus every reservation) and settled
// after it, with the fold epoch the commit is visible in (core/fold_epochs.hpp). A commit too
// large to pin its keys holds its counters' loads instead and writes the rows of the keys out of
// the buffer itself (core/through_holds.hpp: ReserveOrWriteOwn).
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"

namespace sc {

namespace {

// A reservation refused for its value (kOverflow, kOutOfBounds): the commit's error.
void ReportRefused(Reserve result, const CounterDef& def, int64 key, int64 committed,
                   int64 delta, Bounds bounds) {
  if (result == Reserve::kOverflow) ReportOverflow(def, key, committed, delta);
  ereport(ERROR,
          (errcode(ERRCODE_CHECK_VIOLATION),
           errmsg("bounded increment of counter \"%s\" would leave its bounds", def.name),
           errdetail("Key %lld is %lld as committed; this transaction adds %lld, and its "
                     "bounded increments allow values in [%s, %s] whatever the "
                     "transactions committing with it do. Nothing of this transaction "
                     "is committed.",
                     (long long)key, (long long)committed, (long long)delta,
                     bounds.lower == INT64_MIN ? "-infinity"
                                               : psprintf("%lld", (long long)bounds.lower),
                     bounds.upper == INT64_MAX ? "infinity"
                                               : psprintf("%lld", (long long)bounds.upper))));
}

}  // namespace

void BufferReserve(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                   Bounds bounds, Write w, Reservation* out) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int waits = 0;
  TimestampTz no_room_since = 0;
  for (;;) {
    int64 committed = 0;
    Reserve result = Table().ReserveIfResident(k, hash, delta, out, &committed, bounds, w);
    switch (result) {
      case Reserve::kReserved:
        return;
      case Reserve::kOverflow:
      case Reserve::kOutOfBounds:
        ReportRefused(result, def, key, committed, delta, bounds);
        return;
      case Reserve::kLoading:
      case Reserve::kBusy:
        // Being loaded; or expired, and another commit that holds it decides whether this one
        // counts from 0: it settles right after its commit record.
        WaitForLoad(&waits);
        break;
      case Reserve::kMissing:
        if (!MakeResident(&def, k, hash, &waits))
          WaitForRoom(def, "commit", &no_room_since, &waits);
        break;
    }
  }
}

void HoldCounterLoads(int32 counter) {
  RaiseCounterHold(shared->through_holds, MyDatabaseId, counter);
}

void ReleaseCounterLoads(int32 counter) {
  ReleaseCounterHold(shared->through_holds, MyDatabaseId, counter);
}

Reserve BufferReserveOrWriteOwn(const CounterDef& def, int64 key, int64 bucket, int64 delta,
                                Bounds bounds, Write w, Reservation* out, uint64* row) {
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int waits = 0;
  auto table = Table();
  for (;;) {
    int64 committed = 0;
    Reserve result = ReserveOrWriteOwn(table, shared->through_holds, k, hash, delta, out,
                                       &committed, bounds, w, row);
    switch (result) {
      case Reserve::kOverflow:
      case Reserve::kOutOfBounds:
        ReportRefused(result, def, key, committed, delta, bounds);
        return result;
      case Reserve::kLoading:
        // A load that began before the hold: it waits for nothing of this commit's.
        WaitForLoad(&waits);
        break;
      default:
        return result;
    }
  }
}

void BufferWaitForSettle(int* waits) { WaitForLoad(waits); }

void BufferSettle(const Reservation& r, bool committed) {
  // The commit is visible by now, so a fold that takes this epoch (or a later one) sees it.
  DatabaseSlot* slot = FindSlot(MyDatabaseId);
  uint32 epoch = slot != nullptr ? CommitEpoch(slot->fold) : UINT32_MAX;
  bool ours = Table().SettleReservation(r, committed, epoch);
  // A drop purged the entry meanwhile (a bucket drop keeps deltas committed after its DELETE):
  // this commit's deltas now belong to a key that is not resident.
  if (!ours && committed && slot != nullptr) RequireDeltaReads(slot);
}

}  // namespace sc
