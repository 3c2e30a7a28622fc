// write_through.cpp: the requester's half of a write-through, an increment written to
// slotted_counter.key_values by the flusher when the buffer has no room (write_through.hpp; the
// requests' states and lock rule are in core/write_through_request.hpp; the flusher's half is
// workers/write_through.cpp).
//
// The requester publishes its request (for a single key: under the key's partition lock
// exclusive, having checked the key is not resident; a batch holds its partitions instead) and
// sleeps on its database slot's condition variable until the flusher answered. The flusher serves
// every pending request of its database in one transaction, a subtransaction each, and answers
// after that transaction ended.
#include "shared/write_through.hpp"

#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

int CompareItems(const void* a, const void* b) {
  int64 x = static_cast<const ThroughItem*>(a)->key, y = static_cast<const ThroughItem*>(b)->key;
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

ThroughItem* FindThroughItem(ThroughItem* items, int n, int64 key) {
  ThroughItem probe{key, 0, 0};
  return static_cast<ThroughItem*>(bsearch(&probe, items, n, sizeof(ThroughItem), CompareItems));
}

bool WriteThroughPendingFor(const CounterKey& k) { return Requests().OpenFor(k); }

bool PublishForKey(WriteThroughRequest* r, const CounterKey& k, uint32 hash, int64 delta,
                   Write w) {
  auto table = Table();
  return Requests().PublishForKey(table, int(r - shared->requests), k, hash, delta, w);
}

void PublishBatch(WriteThroughRequest* r, const CounterKey& k, int nbatch, dsm_handle batch,
                  Write w) {
  Requests().PublishBatch(int(r - shared->requests), k, nbatch, batch, w);
}

void PublishIntern(WriteThroughRequest* r, int32 counter, int nbatch, dsm_handle batch,
                   uint64 creator) {
  Requests().PublishIntern(int(r - shared->requests), MyDatabaseId, counter, nbatch, batch,
                           creator);
}

RequestAnswer AwaitAnswer(WriteThroughRequest* r, bool held, int withdraw_after_ms) {
  auto requests = Requests();
  int i = int(r - shared->requests);
  DatabaseSlot* slot = EnsureFlusher(held);
  TimestampTz start = GetCurrentTimestamp();
  TimestampTz checked = start;
  RequestAnswer answer;
  for (;;) {
    TimestampTz now = GetCurrentTimestamp();
    // With interrupts held, a cancel, a statement timeout or a termination only sets its flag:
    // the request is withdrawn, or the flusher asked to give it up.
    bool cancelled = held && (QueryCancelPending || ProcDiePending);
    Look look = requests.LookAt(
        i, cancelled,
        withdraw_after_ms > 0 && TimestampDifferenceExceeds(start, now, withdraw_after_ms));
    if (look.step == AwaitStep::kAnswered) {
      answer = look.answer;
      break;
    }
    if (look.step == AwaitStep::kWithdrawn) {
      answer = RequestAnswer{kRequestFailed, 0,
                             cancelled ? ERRCODE_QUERY_CANCELED
                                       : ERRCODE_CONFIGURATION_LIMIT_EXCEEDED};
      break;
    }
    if (TimestampDifferenceExceeds(checked, now, 1000)) {
      checked = now;
      // A flusher that took the request and is gone leaves it taken: give it back to the next
      // flusher.
      if (look.server != 0 && BackendPidGetProc(look.server) == nullptr)
        (void)requests.GiveBackFromGone(i, look.server);
      // The flusher may have left meanwhile.
      slot = EnsureFlusher(held);
    }
    if (slot != nullptr) {
      WakeFlusher(slot);
      ConditionVariableTimedSleep(&slot->done_cv, 100, WaitEventOf(Wait::kWriteThrough));
    } else {
      SleepAs(Wait::kWriteThrough, 100000);
    }
  }
  ConditionVariableCancelSleep();
  return answer;
}

// This backend's request, once no earlier request of it is open (a call that waited for its
// answer leaves none: the wait ends with the answer, or with the request withdrawn). One left by
// a process of another database that had this process index is withdrawn if no flusher has taken
// it: its requester is gone, and this database's flusher would never serve it.
WriteThroughRequest* FreeRequest() {
  WriteThroughRequest* r = &shared->requests[MyProcIndex()];
  (void)Requests().ForgetForeign(MyProcIndex(), MyDatabaseId);
  (void)AwaitAnswer(r, false, 0);
  return r;
}

// Fails the pending write-through requests of a dropped counter (counter 0: of a database whose
// extension was dropped): the requester, if it still waits, gets 42704, and no later flusher
// adds a stale delta to a counter that reuses the id.
void FailRequests(Oid db, int32 counter) {
  (void)Requests().FailPending(db, counter, ERRCODE_UNDEFINED_OBJECT);
}

}  // namespace sc
