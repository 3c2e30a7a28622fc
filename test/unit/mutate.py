#!/usr/bin/env python3
"""Mutation test of the core: each mutation below breaks one step of src/core/ (the counter table,
its protocol and lock policy, the handshakes of the shared state) the way a careless change
would; the unit tests must fail for each.

For every mutation: copy src/ to a scratch directory, make the one replacement (its text must
occur exactly once), build the unit tests against that copy (test/unit/CMakeLists.txt with
SC_SRC_DIR), run the single-threaded tests, then the threaded ones, then (for mutations marked
tsan) the threaded ones under ThreadSanitizer. A mutation is caught if any of them fails or
times out (one that does not build is reported BROKEN, not caught). Prints one line per mutation and the count; exits non-zero if any survived.

Usage: test/unit/mutate.py [NAME-SUBSTRING ...]     (about 30 s per mutation)
Not part of test/run.sh: it takes 20 minutes.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "src"))

P = "core/protocol.hpp"
CT = "core/counter_table.hpp"
CTC = "core/counter_table.cpp"
PL = "core/partition_lock.hpp"
WTR = "core/write_through_request.hpp"
TH = "core/through_holds.hpp"
DR = "core/dirty_ring.hpp"

# (name, file, text, replacement, also under ThreadSanitizer)
MUTATIONS = [
    # the hot path
    ("hot path takes no lock", P,
     "    locks_.Shared(p);\n    uint32_t index = t_.Find(k, hash);\n    Probe probe = Probe::kMissing;",
     "    uint32_t index = t_.Find(k, hash);\n    Probe probe = Probe::kMissing;", True),
    ("hot path releases before the add", P,
     "      if (probe == Probe::kFound) op(index, e);\n    }\n    locks_.ReleaseShared(p);",
     "      locks_.ReleaseShared(p);\n      if (probe == Probe::kFound) op(index, e);\n      return probe;\n    }\n    locks_.ReleaseShared(p);", False),
    ("a loading entry counts as found", P,
     "e.state.load(std::memory_order_acquire) == kResident ? Probe::kFound : Probe::kLoading;",
     "Probe::kFound;", False),
    ("overflow reports a stale value", P,
     "      if (*overflow)\n        *value = e.value.load(std::memory_order_acquire);\n      else\n",
     "      if (!*overflow)\n", False),
    ("dirtied note on every add", DR,
     "if (old_value != new_value && old_value == e.flushed.load(std::memory_order_seq_cst))",
     "if (old_value != new_value)", False),
    ("dirtied note inverted", DR,
     "if (old_value != new_value && old_value == e.flushed.load(std::memory_order_seq_cst))",
     "if (old_value != new_value && old_value != e.flushed.load(std::memory_order_seq_cst))", False),
    ("set does not mark the entry used", P,
     "      e.usage.store(1, std::memory_order_relaxed);\n      CheckDirtied(index, e, *old_value",
     "      CheckDirtied(index, e, *old_value", False),
    # take and evict
    ("sweep ignores the try-lock", P,
     "      if (!locks_.TryExclusive(p)) continue;",
     "      (void)locks_.TryExclusive(p);", False),
    ("sweep does not re-check the partition", P,
     "      if (CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire)) == p &&\n          e.state",
     "      if (e.state", False),
    ("sweep ignores the caller's veto", P,
     "CounterTable::AgeAndTestEvictable(e, own) &&\n                may_evict(static_cast<const Entry&>(e));",
     "CounterTable::AgeAndTestEvictable(e, own);", False),
    # fair shares of the buffer between databases
    ("sweep evicts any database's entries", P,
     "evict = (own || crowds(e)) && ", "evict = ", False),
    ("a database over its share does not yield", P,
     "    if (index != kNil || yield) return index;", "    if (index != kNil) return index;", False),
    ("a link is not counted", CTC,
     "  head.store(index, std::memory_order_release);\n  CountLinked(e.id.db, 1);",
     "  head.store(index, std::memory_order_release);", False),
    ("an unlink is not counted", CTC,
     "      es[index].state.store(kOwned, std::memory_order_release);\n      CountLinked(es[index].id.db, -1);",
     "      es[index].state.store(kOwned, std::memory_order_release);", False),
    ("occupancy changed with a load and a store", CTC,
     "    if (occupancy_[c].compare_exchange_strong(seen, next, std::memory_order_relaxed)) return;",
     "    occupancy_[c].store(next, std::memory_order_relaxed);\n    return;", True),
    ("sweep does not unlink", P,
     "      if (evict) t_.Unlink(i);\n      locks_.Release(p);",
     "      locks_.Release(p);", False),
    ("sweep ignores its limit", P,
     "uint32_t limit = sweep_limit < t_.capacity() ? sweep_limit : t_.capacity();",
     "uint32_t limit = 2 * t_.capacity();", False),
    ("evictions not counted", P, "        (*evicted)++;\n", "", False),
    # load
    ("load links a key already linked", P,
     "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : refuse();",
     "LoadStart start = refuse();", True),
    ("load ignores a refusal", P,
     "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : refuse();",
     "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : (refuse(), LoadStart::kLinked);", False),
    ("refused load keeps its entry", P,
     "      locks_.Release(p);\n      t_.Release(index);\n      return start;",
     "      locks_.Release(p);\n      return start;", False),
    ("load links resident before reading", P,
     "    e.state.store(kLoading, std::memory_order_release);\n    t_.Link(index);",
     "    e.state.store(kResident, std::memory_order_release);\n    t_.Link(index);", True),
    ("load links under a shared lock", P,
     "    uint32_t p = CounterTable::PartitionOf(hash);\n    locks_.Exclusive(p);\n    LoadStart start",
     "    uint32_t p = CounterTable::PartitionOf(hash);\n    locks_.Shared(p);\n    LoadStart start", True),
    ("loaded entry is not clean", P,
     "      e.value.store(stored, std::memory_order_relaxed);\n      e.flushed.store(stored, std::memory_order_relaxed);\n      e.state.store(kResident",
     "      e.value.store(stored, std::memory_order_relaxed);\n      e.state.store(kResident", False),
    ("stale load becomes resident", P,
     "    bool gone = stale();", "    bool gone = (stale(), false);", False),
    ("stale load leaks its entry", P,
     "    if (gone) t_.Release(loading.index);\n    return !gone;", "    return !gone;", False),
    ("abandon ignores the generation", P,
     "    bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&\n                e.state.load(std::memory_order_relaxed) == kLoading;",
     "    bool ours = e.state.load(std::memory_order_relaxed) == kLoading;", False),
    ("abandon removes a finished load", P,
     "    bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&\n                e.state.load(std::memory_order_relaxed) == kLoading;",
     "    bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation;", False),
    # claim and settle
    ("claim ignores the database", P,
     "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
     "if (e.state.load(std::memory_order_acquire) != kResident) return Take::kClean;", False),
    ("claim takes a loading entry", P,
     "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
     "if (e.id.db != db) return Take::kClean;", False),
    ("claim reads the id before the state", P,
     "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
     "if (e.id.db != db || e.state.load(std::memory_order_acquire) != kResident) return Take::kClean;", True),
    ("claim ignores eligibility", P,
     "    if (!eligible(static_cast<const Entry&>(e)))\n",
     "    if (false && !eligible(static_cast<const Entry&>(e)))\n", False),
    ("ineligible clean entry reported left", P,
     "return e.value.load() != e.flushed.load() ? Take::kLeft : Take::kClean;",
     "return Take::kLeft;", False),
    ("claim with load-then-store (the old model's drift)", P,
     "    if (e.in_flush.exchange(1, std::memory_order_acq_rel) != 0) return Take::kClean;",
     "    if (e.in_flush.load(std::memory_order_acquire) != 0) return Take::kClean;\n    e.in_flush.store(1, std::memory_order_release);", True),
    ("claim of a clean entry keeps it claimed", P,
     "    if (delta == 0) {\n      e.in_flush.store(0, std::memory_order_release);\n      return Take::kClean;",
     "    if (delta == 0) {\n      return Take::kClean;", False),
    ("claim-all ignores room", P,
     "        if (!room()) {", "        if (false && !room()) {", False),
    ("claim-noted ignores the generation", P,
     "      bool same = e.generation.load(std::memory_order_relaxed) == refs[i].generation &&\n",
     "      bool same =\n", False),
    ("settle ignores the generation", P,
     "    if (e.generation.load(std::memory_order_relaxed) == claim.generation &&\n        e.state.load(std::memory_order_acquire) == kResident) {\n      if (committed) e.flushed",
     "    if (e.state.load(std::memory_order_acquire) == kResident) {\n      if (committed) e.flushed", True),
    ("settle advances after a failed flush", P,
     "      if (committed) e.flushed.fetch_add(claim.delta, std::memory_order_seq_cst);",
     "      e.flushed.fetch_add(claim.delta, std::memory_order_seq_cst);", False),
    ("settle leaves the entry claimed", P,
     "      dirty = e.value.load(std::memory_order_seq_cst) != e.flushed.load(std::memory_order_seq_cst);\n      e.in_flush.store(0, std::memory_order_release);",
     "      dirty = e.value.load(std::memory_order_seq_cst) != e.flushed.load(std::memory_order_seq_cst);", False),
    ("settle never reports dirty", P,
     "    locks_.ReleaseShared(claim.partition);\n    return dirty;", "    locks_.ReleaseShared(claim.partition);\n    return false;", True),
    # bounded adds
    ("bounded add checks the upper bound only", CT,
     "if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {",
     "if (__builtin_add_overflow(old, delta, &sum) || sum > bounds.upper) {", False),
    ("bounded add checks outside its compare-and-swap", CT,
     "    do {\n      if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {\n        *value = old;\n        return false;\n      }\n    } while (!e.value.compare_exchange_weak(old, sum, std::memory_order_seq_cst,\n                                            std::memory_order_relaxed));",
     "    if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {\n      *value = old;\n      return false;\n    }\n    sum = e.value.fetch_add(delta) + delta;", False),
    # reserve and settle
    ("reservation does not pin", P,
     "        side.store(reserved + delta, std::memory_order_relaxed);\n        e.pins.fetch_add(1, std::memory_order_relaxed);",
     "        side.store(reserved + delta, std::memory_order_relaxed);", True),
    ("reservation checks nothing", P,
     "      result = fits ? Reserve::kReserved : Reserve::kOverflow;",
     "      fits = true;\n      result = Reserve::kReserved;", False),
    ("reservation on one side only", P,
     "      std::atomic<int64_t>& side = delta >= 0 ? e.reserved_up : e.reserved_down;\n      int64_t reserved",
     "      std::atomic<int64_t>& side = e.reserved_up;\n      int64_t reserved", False),
    ("bounded reservation checks one end only", P,
     "if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {", "if (!bounds.Admit(sum)) {", False),
    ("bounded reservation ignores the others' reservations", P,
     "if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {",
     "if (!bounds.Admit(*committed + delta) || !bounds.Admit(other_end)) {", False),
    ("bounded reservation ignores the other side's reservations", P,
     "int64_t other_end = *committed + other.load(std::memory_order_relaxed) + delta;",
     "int64_t other_end = *committed + delta;", False),
    ("bounded reservation refused but pinned", P,
     "        if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {\n          fits = false;\n",
     "        if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {\n", False),
    ("reservation of a loading entry", P,
     "if (index != kNil && t_.at(index).state.load(std::memory_order_acquire) == kResident) {",
     "if (index != kNil) {", False),
    ("abort adds its delta", P,
     "      if (committed && !__builtin_add_overflow(value, r.delta, &value))",
     "      if (!__builtin_add_overflow(value, r.delta, &value))", False),
    ("settled reservation stays pinned", P,
     "      side.store(side.load(std::memory_order_relaxed) - r.delta, std::memory_order_relaxed);\n      e.pins.fetch_sub(1, std::memory_order_relaxed);",
     "      side.store(side.load(std::memory_order_relaxed) - r.delta, std::memory_order_relaxed);", False),
    ("committed value left dirty", P,
     "      e.flushed.store(e.value.load(std::memory_order_relaxed), std::memory_order_release);\n    }\n    locks_.Release(r.partition);",
     "    }\n    locks_.Release(r.partition);", False),
    ("an older commit epoch overwrites a newer", P,
     "      if (committed && epoch > e.commit_epoch.load(std::memory_order_relaxed))",
     "      if (committed)", False),
    ("reservation settle ignores the generation", P,
     "    bool ours = e.generation.load(std::memory_order_relaxed) == r.generation &&\n                e.state.load(std::memory_order_relaxed) == kResident;\n    if (ours) {\n      // Concurrent",
     "    bool ours = e.state.load(std::memory_order_relaxed) == kResident;\n    if (ours) {\n      // Concurrent", False),
    # pins
    ("pin takes no pin", P,
     "    e.pins.fetch_add(1, std::memory_order_relaxed);\n    *pin = Pin{",
     "    *pin = Pin{", False),
    ("pin of a loading entry", P,
     "    if (e.state.load(std::memory_order_relaxed) != kResident) return Probe::kLoading;\n",
     "", False),
    ("unpin ignores the generation", P,
     "    if (e.generation.load(std::memory_order_relaxed) == pin.generation)\n      e.pins.fetch_sub",
     "    if (true)\n      e.pins.fetch_sub", False),
    ("pinned add ignores the generation", P,
     "    bool ours = e.generation.load(std::memory_order_relaxed) == pin.generation &&\n                e.state.load(std::memory_order_relaxed) == kResident;\n    bool ok = true;",
     "    bool ours = e.state.load(std::memory_order_relaxed) == kResident;\n    bool ok = true;", False),
    # purge
    ("purge removes a loading entry", P,
     "        return e.state.load(std::memory_order_relaxed) == kResident && pred(e);",
     "        return pred(e);", False),
    ("bucket purge removes reserved entries", P,
     "kResident && pred(e) && !reserved(e);", "kResident && pred(e);", False),
    ("bucket purge does not empty reserved entries", P,
     "          e.value.store(0, std::memory_order_relaxed);\n          e.flushed.store(0, std::memory_order_relaxed);\n        }",
     "        }", False),
    ("purge-clean removes pinned entries", P,
     "                     e.pins.load(std::memory_order_relaxed) == 0 && may_evict(e);",
     "                     may_evict(e);", False),
    ("purge-clean removes claimed entries", P,
     "                     e.in_flush.load(std::memory_order_relaxed) == 0 &&\n", "", False),
    ("purge-clean ignores the database", P,
     "        if (e.id.db != db) return false;\n        bool clean", "        bool clean", False),
    # the dirty ring
    ("full ring does not overflow", DR,
     "  else\n    ring.overflow = true;\n  mutex.unlock();", "  mutex.unlock();", False),
    ("ring take keeps its refs", DR, "  ring.count = 0;\n  if (*scan_all)", "  if (*scan_all)", False),
    ("ring take drops an overflow it has no room for", DR,
     "  *scan_all = room_for_all && ring.overflow;", "  *scan_all = ring.overflow;", False),
    ("ring fills past its capacity", DR,
     "  if (ring.count < ring.capacity)", "  if (ring.count < int(kMaxDirtyRing))", False),
    ("ring capacity has no upper bound", DR,
     "max_entries / 8 > kMaxDirtyRing ? kMaxDirtyRing", "false ? kMaxDirtyRing", False),
    ("reset ring does not make the next flush scan", DR,
     "  ring.count = 0;\n  ring.overflow = true;", "  ring.count = 0;", False),
    # the partition lock
    ("reader ignores the writer flag", PL,
     "    if (__builtin_expect(r.writer.load(std::memory_order_seq_cst) == 0, 1)) return;",
     "    return;", True),
    ("writer does not wait for counted readers", PL,
     "    while (r.readers.load(std::memory_order_seq_cst) != 0) backoff();\n", "", True),
    ("try-exclusive ignores counted readers", PL,
     "    if (r.readers.load(std::memory_order_seq_cst) == 0) return true;",
     "    return true;", True),
    ("slow reader keeps a stale writer flag", PL,
     "      r.writer.store(0, std::memory_order_relaxed);", "      ;", False),
    ("slow reader is not counted", PL,
     "    r.readers.fetch_add(1, std::memory_order_seq_cst);\n    slow_.ReleaseShared(p);",
     "    slow_.ReleaseShared(p);", True),
    ("release leaves the writer flag", PL,
     "    readers_[p].writer.store(0, std::memory_order_release);\n    slow_.Release(p);",
     "    slow_.Release(p);", False),
    # the table itself
    ("no second chance", CTC,
     "  if (second_chance && e.usage.load(std::memory_order_relaxed) != 0) {\n    e.usage.store(0, std::memory_order_relaxed);\n    return false;\n  }",
     "", False),
    ("pinned entries evictable", CTC,
     "  if (e.pins.load(std::memory_order_acquire) != 0) return false;\n", "", False),
    ("claimed entries evictable", CTC,
     "  if (e.in_flush.load(std::memory_order_acquire) != 0) return false;\n", "", True),
    ("free list without the ABA tag", CTC,
     "    uint64_t tagged = ((head >> 32) + 1) << 32 | next;", "    uint64_t tagged = next;", True),
    ("released slot keeps its generation", CTC,
     "  e.generation.fetch_add(1, std::memory_order_relaxed);\n  e.state.store(kFree", "  e.state.store(kFree", False),
    ("unlinked entry stays resident", CTC,
     "      es[index].state.store(kOwned, std::memory_order_release);\n", "", True),
    ("add wraps on overflow", CT,
     "      if (__builtin_add_overflow(old, delta, &sum)) return false;",
     "      sum = int64_t(uint64_t(old) + uint64_t(delta));", False),
    # expiry (retention of unbucketed keys)
    ("expiry unlinks a dirty entry", P,
     "      bool clean = e.state.load(std::memory_order_relaxed) == kResident &&\n                   e.value.load(std::memory_order_relaxed) ==\n                       e.flushed.load(std::memory_order_relaxed) &&\n                   e.in_flush",
     "      bool clean = e.state.load(std::memory_order_relaxed) == kResident &&\n                   e.in_flush", False),
    ("expiry unlinks a reserved entry", P,
     "                   e.reserved_up.load(std::memory_order_relaxed) == 0 &&\n                   e.reserved_down.load(std::memory_order_relaxed) == 0 &&\n                   may_evict(static_cast<const Entry&>(e));\n      expirable[i]",
     "                   may_evict(static_cast<const Entry&>(e));\n      expirable[i]", False),
    ("expiry holds after the lock", P,
     "    hold();\n    locks_.Release(p);\n  }",
     "    locks_.Release(p);\n    hold();\n  }", False),
    ("expiry unlinks without freeing", P,
     "        t_.Unlink(index);\n        t_.Release(index);\n      }\n    }\n    hold();",
     "        t_.Unlink(index);\n      }\n    }\n    hold();", False),
    ("allocated entry keeps old pins", CTC,
     "      e.pins.store(0, std::memory_order_relaxed);\n      e.commit_epoch.store(0, std::memory_order_relaxed);\n      used_",
     "      e.commit_epoch.store(0, std::memory_order_relaxed);\n      used_", False),
    # the clock's usage bit: every write marks its entry used (eviction reads it)
    ("bounded add does not mark the entry used", CT,
     "    if (e.usage.load(std::memory_order_relaxed) == 0) e.usage.store(1, std::memory_order_relaxed);\n    *value = sum;",
     "    *value = sum;", False),
    ("add does not mark the entry used", CT,
     "    if (e.usage.load(std::memory_order_relaxed) == 0) e.usage.store(1, std::memory_order_relaxed);\n    *new_value = sum;",
     "    *new_value = sum;", False),
    ("a loaded entry is not marked used", CTC,
     "      e.usage.store(1, std::memory_order_relaxed);\n      e.in_flush.store(0",
     "      e.in_flush.store(0", False),
    ("sweep does not clear the usage bit", CTC,
     "    e.usage.store(0, std::memory_order_relaxed);\n    return false;",
     "    return false;", False),
    # the write-through request (requester, flusher, drops, loaders)
    ("request: publish does not count it open", WTR,
     "  r.state = kRequestPending;\n  EnterOpen(open);", "  r.state = kRequestPending;", False),
    ("request: withdraw does not uncount it", WTR,
     "  r.state = kRequestEmpty;\n  r.nbatch = 0;\n  LeaveOpen(open);", "  r.state = kRequestEmpty;\n  r.nbatch = 0;", False),
    ("request: answer does not uncount it", WTR,
     "  r.sqlerrcode = sqlerrcode;\n  LeaveOpen(open);\n}\n\ninline void Fail",
     "  r.sqlerrcode = sqlerrcode;\n}\n\ninline void Fail", False),
    ("request: a drop's fail does not uncount it", WTR,
     "  r.state = kRequestFailed;\n  r.sqlerrcode = sqlerrcode;\n  LeaveOpen(open);",
     "  r.state = kRequestFailed;\n  r.sqlerrcode = sqlerrcode;", False),
    ("request: published after the partition lock", WTR,
     "    if (!resident) Publish(i, k, delta, 0, 0);\n    table.locks().Release(p);",
     "    table.locks().Release(p);\n    if (!resident) Publish(i, k, delta, 0, 0);", True),
    ("request: published for a resident key", WTR,
     "    bool resident = table.table().Find(k, hash) != kNil;", "    bool resident = false;", False),
    ("request: a new request keeps the old cancel", WTR,
     "  r.server_pid = 0;\n  r.cancel = false;", "  r.server_pid = 0;", False),
    ("request: cancel withdraws nothing", WTR,
     "        if (cancelled || withdraw_due) {", "        if (withdraw_due) {", False),
    ("request: a taken request is withdrawn", WTR,
     "      case kRequestTaken:\n        look.server = r.server_pid;\n        if (cancelled) request_step::Cancel(r);\n        break;",
     "      case kRequestTaken:\n        look.server = r.server_pid;\n        if (cancelled) request_step::Cancel(r);\n        if (withdraw_due) {\n          request_step::Withdraw(r, open_);\n          look.step = AwaitStep::kWithdrawn;\n        }\n        break;", False),
    ("request: a cancel is not passed to the flusher", WTR,
     "        if (cancelled) request_step::Cancel(r);\n", "", False),
    ("request: the requester does not learn its server", WTR,
     "        look.server = r.server_pid;\n", "", False),
    ("request: give-back from a gone server ignores which server", WTR,
     "    bool give = r.state == kRequestTaken && r.server_pid == server;",
     "    bool give = r.state == kRequestTaken;", False),
    ("request: another database's request is forgotten even when taken", WTR,
     "    bool foreign = r.state == kRequestPending && r.key.db != db;",
     "    bool foreign = r.state != kRequestEmpty && r.key.db != db;", False),
    ("request: a backend forgets its own database's request", WTR,
     "    bool foreign = r.state == kRequestPending && r.key.db != db;",
     "    bool foreign = r.state == kRequestPending;", False),
    ("request: loaders ignore a taken request", WTR,
     "      bool match = (r.state == kRequestPending || r.state == kRequestTaken) && r.nbatch == 0 &&",
     "      bool match = r.state == kRequestPending && r.nbatch == 0 &&", True),
    ("request: loaders wait for batches", WTR,
     "r.state == kRequestTaken) && r.nbatch == 0 &&\n                   r.key == k;",
     "r.state == kRequestTaken) &&\n                   r.key == k;", False),
    ("request: loaders always skip the scan", WTR,
     "    if (open_.load() == 0) return false;\n    for (int i = 0; i < requests_.size(); i++) {\n      auto mutex = requests_.mutex(i);\n      mutex.lock();\n      const ThroughRequest& r = requests_.at(i);\n      bool match",
     "    if (open_.load() <= 1) return false;\n    for (int i = 0; i < requests_.size(); i++) {\n      auto mutex = requests_.mutex(i);\n      mutex.lock();\n      const ThroughRequest& r = requests_.at(i);\n      bool match", False),
    ("request: a drop fails every counter of the database", WTR,
     "                  (counter == 0 || r.key.counter == counter);", "                  true;", False),
    ("request: a drop fails taken requests", WTR,
     "      bool fail = r.state == kRequestPending && r.key.db == db &&",
     "      bool fail = (r.state == kRequestPending || r.state == kRequestTaken) && r.key.db == db &&", False),
    ("request: the flusher takes other databases' requests", WTR,
     "      if (r.state == kRequestPending && r.key.db == db) {", "      if (r.state == kRequestPending) {", False),
    ("request: the flusher takes requests already taken", WTR,
     "      if (r.state == kRequestPending && r.key.db == db) {",
     "      if ((r.state == kRequestPending || r.state == kRequestTaken) && r.key.db == db) {", True),
    ("request: a take does not record its server", WTR,
     "  r.state = kRequestTaken;\n  r.server_pid = server_pid;", "  r.state = kRequestTaken;", False),
    ("request: a retry answers instead of giving back", WTR,
     "    if (outcome == kRequestPending)\n      request_step::GiveBack(r);\n    else\n      request_step::Answer",
     "    if (false)\n      request_step::GiveBack(r);\n    else\n      request_step::Answer", False),
    ("request: a batch answers one key", WTR,
     "    int keys = r.nbatch > 0 ? r.nbatch : 1;", "    int keys = 1;", False),
    ("request: a given-back request stays taken", WTR,
     "  SC_ASSERT(r.state == kRequestTaken);\n  r.state = kRequestPending;", "  SC_ASSERT(r.state == kRequestTaken);", False),
    ("request: collect leaves the answer in place", WTR,
     "  RequestAnswer answer{RequestState(r.state), r.result, r.sqlerrcode};\n  r.state = kRequestEmpty;",
     "  RequestAnswer answer{RequestState(r.state), r.result, r.sqlerrcode};", False),
    # the partition holds against loads
    ("hold: a batch holds while a key is being loaded", TH,
     "    if (!loading) hold_step::Raise(holds, db, p);", "    hold_step::Raise(holds, db, p);", False),
    ("hold: a batch's hold is raised after the lock", TH,
     "    if (!loading) hold_step::Raise(holds, db, p);\n  });",
     "  });\n  if (!loading) hold_step::Raise(holds, db, p);", False),
    ("hold: a batch leaves a resident key unpinned", TH,
     "      if (probe == Probe::kFound) pinned(j, pin);\n", "", True),
    ("hold: a batch stops at nothing", TH,
     "      loading = probe == Probe::kLoading;", "      loading = loading || probe == Probe::kLoading;\n      loading = false;", False),
    ("hold: loaders ignore the hold", TH,
     "    return LoadsHeld(holds, k.db, CounterTable::PartitionOf(hash)) ? LoadStart::kRetry : refuse();",
     "    return refuse();", True),
    ("hold: loaders ignore the caller's refusal", TH,
     "LoadStart::kRetry : refuse();", "LoadStart::kRetry : LoadStart::kLinked;", False),
    ("hold: an expiry holds nothing", TH,
     "                        [&] { hold_step::Raise(holds, db, p); });", "                        [&] {});", False),
    ("hold: a release does not lower the hold", TH,
     "  uint32_t before = HoldOf(holds, db, p).fetch_sub(1, std::memory_order_seq_cst);",
     "  uint32_t before = HoldOf(holds, db, p).load(std::memory_order_seq_cst);", True),
    ("hold: every database in one group", TH,
     "inline uint32_t HoldGroup(uint32_t db) noexcept { return uint32_t(MixBits(db) % kHoldGroups); }",
     "inline uint32_t HoldGroup(uint32_t db) noexcept { return 0 * db; }", False),
    ("hold: holds start as garbage", TH,
     "    for (std::atomic<uint32_t>& hold : group) hold.store(0, std::memory_order_relaxed);",
     "    for (std::atomic<uint32_t>& hold : group) (void)hold;", False),
]


def run(cmd, timeout, **kw):
    try:
        return subprocess.run(cmd, timeout=timeout, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, **kw).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def main():
    wanted = sys.argv[1:]
    work = tempfile.mkdtemp(prefix="sc-mutate-")
    src = os.path.join(work, "src")
    builds = {"normal": os.path.join(work, "normal"), "tsan": os.path.join(work, "tsan")}
    shutil.copytree(SRC, src)
    for kind, build in builds.items():
        flags = ["-DSC_TSAN=ON"] if kind == "tsan" else []
        subprocess.run(["cmake", "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DSC_SRC_DIR=" + src, "-DSC_WERROR=OFF"] + flags, check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    caught = tried = 0
    survived = []
    for name, fname, text, replacement, tsan in MUTATIONS:
        if wanted and not any(w in name for w in wanted):
            continue
        original = open(os.path.join(SRC, fname)).read()
        if original.count(text) != 1:
            print(f"BROKEN  {name}: its text occurs {original.count(text)} times in {fname}")
            survived.append(name)
            continue
        tried += 1
        path = os.path.join(src, fname)
        with open(path, "w") as f:
            f.write(original.replace(text, replacement))
        how = None
        if run(["cmake", "--build", builds["normal"], "-j2"], 600) != 0:
            # A mutation must be a program the tests run, not a compile error.
            print(f"BROKEN  {name}: does not build", flush=True)
            survived.append(name)
            shutil.copy(os.path.join(SRC, fname), path)
            continue
        else:
            for binary in ("sc_unit_tests", "sc_thread_tests"):
                rc = run([os.path.join(builds["normal"], binary), "--gtest_brief=1"], 300)
                if rc != 0:
                    how = f"{binary} failed" if rc != "timeout" else f"{binary} timed out"
                    break
            if how is None and tsan:
                if run(["cmake", "--build", builds["tsan"], "-j2", "--target", "sc_thread_tests"],
                       600) == 0:
                    rc = run(["setarch", os.uname().machine, "-R",
                              os.path.join(builds["tsan"], "sc_thread_tests"), "--gtest_brief=1"],
                             600, env=env)
                    if rc != 0:
                        how = "sc_thread_tests under ThreadSanitizer " + (
                            "failed" if rc != "timeout" else "timed out")
        shutil.copy(os.path.join(SRC, fname), path)
        if how is None:
            survived.append(name)
            print(f"SURVIVED {name}", flush=True)
        else:
            caught += 1
            print(f"caught   {name}: {how}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{caught} of {tried} mutations caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
