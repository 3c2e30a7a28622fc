// throttles.cpp: what a transaction took from transactional rate limiters (throttles.hpp).
//
// The calls are kept in an array in TopMemoryContext, in call order, each with the nesting level
// of the subtransaction that made it; a call of the same key, limiter and level as the one before
// adds to it. Everything here that runs at an end takes only LWLocks and cannot fail.
#include "transactions/throttles.hpp"

#include "buffer/buffer.hpp"
#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

struct Taken {
  int32 counter;
  int level;
  GcraLimit limit;
  int64 key;
  int64 cost;
};

Taken* taken = nullptr;
int ntaken = 0;
int capacity = 0;

// Gives back what the calls from index `from` on took, latest first, and forgets them.
void GiveBackFrom(int from) {
  for (int i = ntaken - 1; i >= from; i--)
    BufferGiveBack(taken[i].counter, taken[i].limit, taken[i].key, taken[i].cost);
  ntaken = from;
}

}  // namespace

void ReserveThrottled() {
  if (ntaken < capacity) return;
  int grown = capacity == 0 ? 16 : capacity * 2;
  size_t bytes = sizeof(Taken) * size_t(grown);
  taken = static_cast<Taken*>(taken == nullptr ? MemoryContextAlloc(TopMemoryContext, bytes)
                                               : repalloc(taken, bytes));
  capacity = grown;
}

void NoteThrottled(int32 counter, const GcraLimit& limit, int64 key, int64 cost) {
  Assert(cost > 0 && ntaken < capacity);
  int level = GetCurrentTransactionNestLevel();
  if (ntaken > 0) {
    Taken& last = taken[ntaken - 1];
    int64 sum;
    if (last.counter == counter && last.key == key && last.level == level &&
        !__builtin_add_overflow(last.cost, cost, &sum)) {
      last.cost = sum;
      return;
    }
  }
  taken[ntaken++] = Taken{counter, level, limit, key, cost};
}

namespace {

void CommitContext(void*) {
  errcontext("COMMIT of a transaction that took from transactional rate limiters, which waits "
             "for a flush of their keys; failed, it gives their costs back");
}

}  // namespace

void ThrottlesPreCommit() {
  if (ntaken == 0) return;
  // Fails with the flush's own error if it failed (or a cancel's): the commit fails, and the end
  // gives back; the error's context says so.
  ErrorContextCallback context{error_context_stack, CommitContext, nullptr};
  error_context_stack = &context;
  // Its writes only: no retention pass, which a flush asked for by sc_rollup runs before it
  // answers, is waited for.
  (void)RequestFlush(EnsureFlusher(), false);
  error_context_stack = context.previous;
}

void ThrottlesPrePrepare() {
  if (ntaken == 0) return;
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("cannot PREPARE a transaction that called sc_throttle() on a "
                         "transactional rate limiter")));
}

void ThrottlesEnd(bool committed) {
  if (ntaken == 0) return;
  if (committed)
    ntaken = 0;
  else
    GiveBackFrom(0);
}

void ThrottlesSubEnd(bool committed, int level) {
  int from = ntaken;
  while (from > 0 && taken[from - 1].level >= level) from--;
  if (!committed) {
    GiveBackFrom(from);
    return;
  }
  // Committed: its calls are its parent's.
  for (int i = from; i < ntaken; i++) taken[i].level = level - 1;
}

}  // namespace sc
