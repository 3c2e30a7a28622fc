// text_ids.hpp: the flusher's part in the ids that backends give new text keys of buffered
// counters themselves (core/text_ids.hpp, definitions/text_keys.hpp): it writes the rows of the
// ids given, in the transaction that writes the values that use them, and counts its own other
// writes of slotted_counter.keys. (The ranges of ids are reserved where it serves backends:
// write_through.hpp, ReserveTextIds.)
#pragma once

#include "pg.hpp"
#include "shared/shmem.hpp"

namespace sc {

// Ids given but not written (their slots in the shared key cache), to mark written once the
// transaction that wrote them committed.
struct UnwrittenKey {
  uint64 hash;
  int64 id;
  int32 counter;
  uint16 len;
  char text[kSharedKeyText];
};
struct UnwrittenKeys {
  UnwrittenKey* keys;
  int n;
};

// Writes, in the current transaction (SPI connected), the rows of the ids given to texts of db's
// counters `counters` (sorted, ncounters of them): the ids found unwritten now, every one given
// before the values this transaction writes were claimed. What to mark is allocated in context.
UnwrittenKeys WriteUnwrittenKeys(Oid db, const int32* counters, int ncounters,
                                 MemoryContext context);

// After the commit that wrote them: the key writes move, then the slots are marked written (and
// may be forgotten). Allocates nothing, fails in nothing.
void MarkKeysWritten(Oid db, const UnwrittenKeys& written);

// The flusher's own gift of ids to texts (an intern request) as a write of keys a backend must
// not race: begun for the text's group (of the text of hash `hash`) before it looks at the
// shared key cache, ended for every group begun once its transaction ended (or on the way out
// of the process). End is a no-op when none is open.
void BeginKeysWrite(Oid db, uint64 hash);
void EndKeysWrite();

// The id a backend gave the text of counter `counter` that is not written yet, or 0, the
// text's group begun first (BeginKeysWrite): no backend gives it one until EndKeysWrite.
int64 GivenTextId(Oid db, int32 counter, const char* text, int len);

}  // namespace sc
