// late_cancel.hpp: a cancel that comes too late for a write that counted.
//
// A buffered write survives the abort of its transaction, like nextval: so a call that counted
// must return its value, and one that fails must have counted nothing (a client that retries on
// 57014 would count twice). A call that waits after it counted, or while the flusher counts for
// it (a batch's second phase, a write-through, a wait for a flusher after a write), waits with
// interrupts held (HOLD_INTERRUPTS), so that no error ends it then, and ends the held part with
// ResumeInterruptsCounted once it has nothing left to do but return: a cancel or timeout that
// came during it came too late, as one that comes while a transaction commits, and the call
// returns its value. A termination goes on: the connection ends, as it would after a commit.
//
// What the call cannot close is the statement's part after it returned: the executor checks for
// interrupts between rows, so a cancel that comes after the call returned fails the statement,
// whose calls counted what they returned (as nextval's value stays taken). A client that retries
// on an error uses sc_incr_once (request ids) or a transactional counter, whose increments go
// with the transaction that fails.
#pragma once

#include "pg.hpp"

namespace sc {

// Ends the part of a call that follows its count, entered with HOLD_INTERRUPTS: a cancel, a
// statement timeout or a lock timeout that came in it is forgotten, and interrupts resume.
inline void ResumeInterruptsCounted() {
  if (QueryCancelPending && !ProcDiePending) {
    QueryCancelPending = false;
    (void)get_timeout_indicator(STATEMENT_TIMEOUT, true);
    (void)get_timeout_indicator(LOCK_TIMEOUT, true);
  }
  RESUME_INTERRUPTS();
}

}  // namespace sc
