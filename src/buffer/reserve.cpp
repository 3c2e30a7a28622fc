// reserve.cpp: a transactional counter's commit: its deltas are reserved in their entries before
// the commit (bounds checked against the committed value plus every reservation) and settled
// after it, with the fold epoch the commit is visible in (core/fold_epochs.hpp).
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/flusher_slots.hpp"
#include "shared/shmem.hpp"

namespace sc {

void BufferReserve(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                   Bounds bounds, Write w, Reservation* out) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int waits = 0;
  TimestampTz no_room_since = 0;
  for (;;) {
    int64 committed = 0;
    switch (Table().ReserveIfResident(k, hash, delta, out, &committed, bounds, w)) {
      case Reserve::kReserved:
        return;
      case Reserve::kOverflow:
        ReportOverflow(def, key, committed, delta);
        return;
      case Reserve::kOutOfBounds:
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
