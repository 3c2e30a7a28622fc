// throttles.hpp: a transactional rate limiter's calls belong to their transaction.
//
// A call takes its cost in the buffer at once (BufferThrottle), so that every other caller sees it
// and concurrent callers admit exactly what the limit allows; the transaction keeps what it took.
// A rollback, of the transaction or of the subtransaction that called, gives it back
// (BufferGiveBack: to the key's entry if the buffer still holds it). A commit first waits for a
// flush that starts after it (sc_rollup's, shared by every commit waiting with it), which writes
// the keys' arrival times to slotted_counter.key_values, so that what a committed call took
// survives a crash. A transaction that took anything cannot be prepared.
#pragma once

#include "definitions/catalog.hpp"

namespace sc {

// Makes room for one more call to keep (may fail: call it before the call takes anything).
void ReserveThrottled();
// Keeps a call of this transaction that took `cost` (> 0) of key on limiter `counter` of limit
// `limit`; cannot fail after ReserveThrottled.
void NoteThrottled(int32 counter, const GcraLimit& limit, int64 key, int64 cost);

// Transaction callbacks (xact.cpp): the commit's wait for the flush (may fail: the commit then
// fails, and gives everything back); PREPARE refused; the end; a subtransaction's end.
void ThrottlesPreCommit();
void ThrottlesPrePrepare();
void ThrottlesEnd(bool committed);
void ThrottlesSubEnd(bool committed, int level);

}  // namespace sc
