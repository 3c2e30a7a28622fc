// increment.cpp: the writes to a key: sc_incr (the hot path: the partition lock SHARED, find the
// entry, an atomic add), bounded and once-only increments, a limiter's call, sc_set. A key not resident is loaded
// (load.cpp); with no room, a plain increment asks the flusher to apply it to the table in its own
// transaction (a write-through) and waits for the new value, while the others wait for room.
// The lock protocols are in core/protocol.hpp and core/write_through_request.hpp.
#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "core/checked_math.hpp"
#include "definitions/changes.hpp"
#include "shared/late_cancel.hpp"
#include "shared/request_ids.hpp"
#include "shared/shmem.hpp"
#include "shared/write_through.hpp"

namespace sc {

void ReportOverflow(const CounterDef& def, int64 key, int64 value, int64 delta) {
  ReportValueOutOfRange(def.name,
                        psprintf("Key %lld holds %lld; adding %lld leaves the bigint range.",
                                 (long long)key, (long long)value, (long long)delta));
}

namespace {

// Has the flusher add delta to the stored value of the non-resident key k. *retry: k became
// resident meanwhile, add to the buffer instead.
// The wait is a batch's (batch.cpp): with interrupts held, a cancel, a timeout or a termination
// withdraws the request if no flusher took it yet, and the call fails having counted nothing
// (a wait that ended in an error while the request stayed, to be served later, counted what it
// said it did not); a flusher that took it answers, and once the answer says it counted, the
// call returns its value (shared/late_cancel.hpp).
int64 WriteThrough(const CounterDef& def, const CounterKey& k, uint32 hash, int64 delta, Write w,
                   bool* retry) {
  WriteThroughRequest* r = FreeRequest();
  *retry = !PublishForKey(r, k, hash, delta, w);
  if (*retry) return 0;

  HOLD_INTERRUPTS();
  RequestAnswer answer = AwaitAnswer(r, true, 0);
  if (answer.state != kRequestFailed) {
    ResumeInterruptsCounted();
    return answer.result;
  }
  RESUME_INTERRUPTS();
  if (answer.sqlerrcode == ERRCODE_QUERY_CANCELED) {
    CHECK_FOR_INTERRUPTS();
    ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                    errmsg("canceling statement due to user request")));
  }
  if (answer.sqlerrcode == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE)
    ReportOverflow(def, k.key, BufferRead(def, k.key, k.bucket, false), delta);
  ReportUnknownCounter(def.name);
  return 0;
}

// The hot path's steps (protocol.hpp), noting an entry that turned dirty after the lock. The
// keys of most counters never expire, and their writes carry no time: the step without either.
inline Probe AddResident(const CounterKey& k, uint32 hash, int64 delta, int64* value,
                         bool* overflow) {
  Dirtied dirtied;
  Probe probe = Table().AddIfResident(k, hash, delta, value, overflow, &dirtied);
  NoteDirtied(dirtied);
  return probe;
}

// w: the write's stamp, and its counter's cutoff (an expired key counts from 0).
Probe AddResident(const CounterKey& k, uint32 hash, int64 delta, Write w, int64* value,
                  bool* overflow) {
  if (w.stamp == kNoWrite && w.cutoff == kNeverExpires)
    return AddResident(k, hash, delta, value, overflow);
  Dirtied dirtied;
  Probe probe = Table().AddIfResident(k, hash, delta, value, overflow, &dirtied, w);
  NoteDirtied(dirtied);
  return probe;
}

Probe AddResidentWithin(const CounterKey& k, uint32 hash, int64 delta, Bounds bounds,
                        int64* value, bool* refused) {
  Dirtied dirtied;
  Probe probe = Table().AddIfResidentWithin(k, hash, delta, bounds, value, refused, &dirtied);
  NoteDirtied(dirtied);
  return probe;
}

// The same for a counter whose keys expire: w, the write's stamp and cutoff.
Probe AddResidentWithin(const CounterKey& k, uint32 hash, int64 delta, Bounds bounds, Write w,
                        int64* value, bool* refused) {
  Dirtied dirtied;
  Probe probe =
      Table().AddIfResidentWithin(k, hash, delta, bounds, value, refused, &dirtied, w);
  NoteDirtied(dirtied);
  return probe;
}

inline Probe ExchangeResident(const CounterKey& k, uint32 hash, int64 new_value, Write w,
                              int64* old_value) {
  Dirtied dirtied;
  Probe probe = Table().ExchangeIfResident(k, hash, new_value, old_value, &dirtied, w);
  NoteDirtied(dirtied);
  return probe;
}

// BufferIncrement of a key that was not resident at the first probe. Out of line, so that the
// hot path's frame holds only what a resident key needs.
pg_noinline int64 IncrementNotResident(const CounterDef& counter, const CounterKey& k,
                                       uint32 hash, int64 delta) {
  Write w = WriteNow(counter);
  int64 key = k.key;
  int64 value;
  bool overflow;
  // Loading may look the definition up again (after a drop made it stale), which can free the
  // one the caller passed; work on a copy.
  CounterDef def = counter;
  int waits = 0;
  for (;;) {
    Probe probe = AddResident(k, hash, delta, w, &value, &overflow);
    if (probe == Probe::kFound) {
      if (overflow) ReportOverflow(def, key, value, delta);
      return value;
    }
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!MakeResident(&def, k, hash, &waits)) {
      // The flusher would wait for this transaction's own lock on the counter's row.
      if (BucketsDroppedInThisTransaction(def.id))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("no room in the slotted_counter buffer for counter \"%s\"",
                               def.name),
                        errdetail("The buffer is full, and this transaction holds the counter "
                                  "for sc_drop_buckets, so the flusher cannot write the "
                                  "increment through."),
                        errhint("Count in a transaction of its own.")));
      bool retry;
      value = WriteThrough(def, k, hash, delta, w, &retry);
      if (!retry) return value;
    }
  }
}

}  // namespace

int64 BufferIncrement(const CounterDef& counter, int64 key, int64 bucket, int64 delta) {
  CounterKey k{MyDatabaseId, counter.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int64 value;
  bool overflow;
  Probe probe = likely(!KeysExpire(counter))
                    ? AddResident(k, hash, delta, &value, &overflow)
                    : AddResident(k, hash, delta, WriteNow(counter), &value, &overflow);
  if (likely(probe == Probe::kFound)) {
    if (unlikely(overflow)) ReportOverflow(counter, key, value, delta);
    return value;
  }
  return IncrementNotResident(counter, k, hash, delta);
}

bool BufferIncrementWithin(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                           Bounds bounds, int64* value) {
  CounterDef def = counter;  // as in BufferIncrement
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  bool refused = false;
  if (likely(!KeysExpire(def))) {
    UntilResident(&def, k, hash, "count into",
                  [&] { return AddResidentWithin(k, hash, delta, bounds, value, &refused); });
  } else {
    Write w = WriteNow(def);
    UntilResident(&def, k, hash, "count into",
                  [&] { return AddResidentWithin(k, hash, delta, bounds, w, value, &refused); });
  }
  // Leaving bigint is an error, as for any increment, not a refusal by the bounds.
  int64 sum;
  if (refused && __builtin_add_overflow(*value, delta, &sum))
    ReportOverflow(def, key, *value, delta);
  return !refused;
}

int64 BufferIncrementOnce(const CounterDef& counter, int64 key, int64 bucket, int64 delta,
                          uint32 id_index) {
  CounterDef def = counter;  // as in BufferIncrement
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  RequestIdTable* ids = shared->request_ids;
  Write w = WriteNow(def);
  int64 value = 0;
  bool overflow = false;
  // Not written through: the increment must be in the buffer, for the flush that writes it to
  // write the id too. The add and the id's kPending are one section under the database's apply
  // lock SHARED (request_ids.hpp).
  UntilResident(&def, k, hash, "count into", [&] {
    LWLockAcquire(ApplyLockOf(ids, MyDatabaseId), LW_SHARED);
    Probe probe = AddResident(k, hash, delta, w, &value, &overflow);
    if (probe == Probe::kFound && !overflow)
      AppliedRequestId(ids, id_index, key, bucket, value, GetCurrentTimestamp());
    LWLockRelease(ApplyLockOf(ids, MyDatabaseId));
    return probe;
  });
  if (overflow) ReportOverflow(def, key, value, delta);
  return value;
}

// A limiter's write at `now`: its retention is its tolerance, so its cutoff is now less the
// tolerance, without the interval arithmetic of a retention's (WriteNow).
inline Write LimiterWrite(const GcraLimit& limit, TimestampTz now) {
  return Write{now, now - limit.tolerance};
}

GcraAnswer BufferThrottle(const CounterDef& counter, int64 key, int64 cost) {
  CounterDef def = counter;  // as in BufferIncrement
  CounterKey k{MyDatabaseId, def.id, key, kNoBucket};
  uint32 hash = HashCounterKey(k);
  Write w = LimiterWrite(def.limit, GetCurrentTimestamp());
  GcraAnswer answer;
  UntilResident(&def, k, hash, "throttle", [&] {
    Dirtied dirtied;
    Probe probe = Table().ThrottleIfResident(k, hash, cost, def.limit, w, &answer, &dirtied);
    NoteDirtied(dirtied);
    return probe;
  });
  return answer;
}

void BufferGiveBack(int32 counter, const GcraLimit& limit, int64 key, int64 cost) {
  CounterKey k{MyDatabaseId, counter, key, kNoBucket};
  Write w = LimiterWrite(limit, GetCurrentTimestamp());
  Dirtied dirtied;
  (void)Table().GiveBackIfResident(k, HashCounterKey(k), cost, limit, w, &dirtied);
  NoteDirtied(dirtied);
}

int64 BufferSet(const CounterDef& counter, int64 key, int64 bucket, int64 value) {
  CounterDef def = counter;
  CounterKey k{MyDatabaseId, def.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  // A set is not written through: it waits for the flusher to make room.
  Write w = WriteNow(def);
  int64 old = 0;
  UntilResident(&def, k, hash, "set", [&] { return ExchangeResident(k, hash, value, w, &old); });
  return old;
}

}  // namespace sc
