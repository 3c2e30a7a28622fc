#!/usr/bin/env python3
"""Mutation test of the core: each mutation below breaks one step of src/core/ (the counter table,
its protocol and lock policy, the handshakes of the shared state, the rank index) the way a
careless change would; the unit tests must fail for each.

First the unit tests are built against a scratch copy of src/ (test/unit/CMakeLists.txt with
SC_SRC_DIR) and run unmutated: they must pass. Then, for every mutation: make the one replacement
in the copy (its text must occur exactly once), rebuild, run the single-threaded tests, then the
threaded ones, then (for mutations marked tsan) the threaded ones under ThreadSanitizer. A
mutation is caught if any of them fails or times out (one that does not build, or whose build
times out, is reported BROKEN, not caught). Prints one line per mutation and the count; exits
non-zero if any survived or broke.

Usage: test/unit/mutate.py [NAME-SUBSTRING ...]
The first build, of everything, takes about 10 minutes on 2 cores shared with other builds. Each
mutation then rebuilds the tests that include the file it changes and runs them: 1 to 3 minutes
there (20 of the protocol's, whose files nearly every test includes, took 52 minutes in all), so
hours for all 224. Not part of test/run.sh.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "src"))

PH = "core/protocol_hits.hpp"
PLD = "core/protocol_loads.hpp"
PF = "core/protocol_flush.hpp"
PHD = "core/protocol_holds.hpp"
PS = "core/protocol_sums.hpp"
PP = "core/protocol_purges.hpp"
CT = "core/counter_table.hpp"
CTC = "core/counter_table.cpp"
PL = "core/partition_lock.hpp"
FE = "core/fold_epochs.hpp"
DS = "core/database_slot.hpp"
WTR = "core/write_through_request.hpp"
TH = "core/through_holds.hpp"
SK = "core/shared_key_cache.hpp"
DR = "core/dirty_ring.hpp"
RI = "core/rank_index.hpp"
RIB = "core/rank_index_blocks.hpp"
CW = "core/commit_window.hpp"
FS = "core/fair_share.hpp"

# (name, file, text, replacement, also under ThreadSanitizer)
MUTATIONS = [
    # claim and settle
    ("a flush asks a row for a difference beyond bigint", PF,
         "  return flushed == INT64_MIN ? INT64_MAX : -flushed;",
         "  return int64_t(uint64_t(value) - uint64_t(flushed));", False),
    # sums
    ("the hot path leaves the sum entry out", PH,
         "  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n      AddToSum(sum, delta);",
         "  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n      (void)sum;", False),
    ("a stamped add leaves the sum entry out", PH,
         "  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n      AddToSum(sum, delta);",
         "  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n      (void)sum;", False),
    ("a settled flush leaves the sum entry as it was", PF,
         "      if (sum != nullptr) AddDifferenceToSum(*sum, 0, claim.delta);",
         "      (void)sum;", False),
    ("a sum entry leaves while a key differs from its row", PS,
         "    if (e.value.load(std::memory_order_acquire) != e.flushed.load(std::memory_order_acquire) ||",
         "    if (false ||", False),
    ("a set leaves the sum entry out", PH,
         "    AddDifferenceToSum(sum, new_value, *old_value);",
         "    (void)sum;", False),
    # the commit window
    ("a read across a commit is kept", CW,
     "  return w.generation.load(std::memory_order_seq_cst) == generation;",
     "  (void)w;\n  (void)generation;\n  return true;", False),
    ("a read starts while a window is open", CW,
     "  return w.open.load(std::memory_order_seq_cst) == 0;",
     "  return true;", False),
    # the hot path
    ("hot path takes no lock", PH,
         "Probe Protocol<Locks>::WithWritable(const CounterKey& k, uint32_t hash, Op&& op) noexcept {\n  uint32_t p = CounterTable::PartitionOf(hash);\n  locks_.Shared(p);\n",
         "Probe Protocol<Locks>::WithWritable(const CounterKey& k, uint32_t hash, Op&& op) noexcept {\n  uint32_t p = CounterTable::PartitionOf(hash);\n", True),
    ("a hot read takes no lock", PH,
         "Probe Protocol<Locks>::WithResident(const CounterKey& k, uint32_t hash, Op&& op) noexcept {\n  uint32_t p = CounterTable::PartitionOf(hash);\n  locks_.Shared(p);\n",
         "Probe Protocol<Locks>::WithResident(const CounterKey& k, uint32_t hash, Op&& op) noexcept {\n  uint32_t p = CounterTable::PartitionOf(hash);\n", True),
    ("hot path releases before the add", PH,
         "    if (probe == Probe::kFound) op(index, e);\n  }\n  locks_.ReleaseShared(p);",
         "    locks_.ReleaseShared(p);\n    if (probe == Probe::kFound) op(index, e);\n    return probe;\n  }\n  locks_.ReleaseShared(p);", False),
    ("a loading entry counts as found", PH,
         "    probe = e.state.load(std::memory_order_acquire) == kResident ? Probe::kFound : Probe::kLoading;\n    if (probe == Probe::kFound) {\n",
         "    probe = Probe::kFound;\n    if (probe == Probe::kFound) {\n", False),
    ("a loading entry reads as found", PH,
         "    probe = e.state.load(std::memory_order_acquire) == kResident ? Probe::kFound : Probe::kLoading;\n    if (probe == Probe::kFound) op(index, e);",
         "    probe = Probe::kFound;\n    if (probe == Probe::kFound) op(index, e);", False),
    ("overflow reports a stale value", PH,
         "  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n",
         "  return WithWritable(k, hash, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (!*overflow) {\n", False),
    ("a stamped add's overflow reports a stale value", PH,
         "  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (*overflow) {\n      *value = e.value.load(std::memory_order_acquire);\n    } else {\n",
         "  return WriteResident(k, hash, w, dirtied, [&](uint32_t index, Entry& e, Entry& sum) {\n    *overflow = !CounterTable::Add(e, delta, value);\n    if (!*overflow) {\n", False),
    ("dirtied note on every add", DR,
     "if (old_value != new_value && old_value == e.flushed.load(std::memory_order_seq_cst))",
     "if (old_value != new_value)", False),
    ("dirtied note inverted", DR,
     "if (old_value != new_value && old_value == e.flushed.load(std::memory_order_seq_cst))",
     "if (old_value != new_value && old_value != e.flushed.load(std::memory_order_seq_cst))", False),
    ("set does not mark the entry used", PH,
         "    e.usage.store(1, std::memory_order_relaxed);\n    CheckDirtied(index, e, *old_value",
         "    CheckDirtied(index, e, *old_value", False),
    # take and evict
    ("sweep ignores the try-lock", PLD,
         "    if (!locks_.TryExclusive(p)) continue;",
         "    (void)locks_.TryExclusive(p);", False),
    ("sweep does not re-check the partition", PLD,
         "    if (CounterTable::PartitionOf(e.hash.load(std::memory_order_acquire)) == p &&\n        e.state",
         "    if (e.state", False),
    ("sweep ignores the caller's veto", PLD,
         "CounterTable::AgeAndTestEvictable(e, own) &&\n              may_evict(static_cast<const Entry&>(e)) && (!IsSum",
         "CounterTable::AgeAndTestEvictable(e, own) &&\n              (!IsSum", False),
    # fair shares of the buffer between databases
    ("sweep evicts any database's entries", PLD,
         "evict = (own || crowds(e)) && ",
         "evict = ", False),
    ("a database over its share does not yield", PLD,
         "  if (index != kNil || yield) return index;",
         "  if (index != kNil) return index;", False),
    ("a link is not counted", CTC,
     "  head.store(index, std::memory_order_release);\n  CountLinked(e.id.db, 1);",
     "  head.store(index, std::memory_order_release);", False),
    ("an unlink is not counted", CTC,
     "      es[index].state.store(kOwned, std::memory_order_release);\n      CountLinked(es[index].id.db, -1);",
     "      es[index].state.store(kOwned, std::memory_order_release);", False),
    ("occupancy changed with a load and a store", CTC,
     "    if (occupancy_[c].compare_exchange_strong(seen, next, std::memory_order_relaxed)) return;",
     "    occupancy_[c].store(next, std::memory_order_relaxed);\n    return;", True),
    ("sweep does not unlink", PLD,
         "    if (evict) t_.Unlink(i);\n    locks_.Release(p);",
         "    locks_.Release(p);", False),
    ("sweep ignores its limit", PLD,
         "uint32_t limit = sweep_limit < t_.capacity() ? sweep_limit : t_.capacity();",
         "uint32_t limit = 2 * t_.capacity();", False),
    ("evictions not counted", PLD,
         "      (*evicted)++;\n",
         "", False),
    # load
    ("load links a key already linked", PLD,
         "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : refuse();",
         "LoadStart start = refuse();", True),
    ("load ignores a refusal", PLD,
         "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : refuse();",
         "LoadStart start = t_.Find(k, hash) != kNil ? LoadStart::kRetry : (refuse(), LoadStart::kLinked);", False),
    ("refused load keeps its entry", PLD,
         "    locks_.Release(p);\n    t_.Release(index);\n    return start;",
         "    locks_.Release(p);\n    return start;", False),
    ("load links resident before reading", PLD,
         "  e.state.store(kLoading, std::memory_order_release);\n  t_.Link(index);",
         "  e.state.store(kResident, std::memory_order_release);\n  t_.Link(index);", True),
    ("load links under a shared lock", PLD,
         "  uint32_t p = CounterTable::PartitionOf(hash);\n  locks_.Exclusive(p);\n  LoadStart start",
         "  uint32_t p = CounterTable::PartitionOf(hash);\n  locks_.Shared(p);\n  LoadStart start", True),
    ("loaded entry is not clean", PLD,
         "    e.value.store(stored, std::memory_order_relaxed);\n    e.flushed.store(stored, std::memory_order_relaxed);\n",
         "    e.value.store(stored, std::memory_order_relaxed);\n", False),
    ("stale load becomes resident", PLD,
         "  bool gone = stale();",
         "  bool gone = (stale(), false);", False),
    ("stale load leaks its entry", PLD,
         "  if (gone) t_.Release(loading.index);\n  return !gone;",
         "  return !gone;", False),
    ("abandon ignores the generation", PLD,
         "  bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&\n              e.state.load(std::memory_order_relaxed) == kLoading;",
         "  bool ours = e.state.load(std::memory_order_relaxed) == kLoading;", False),
    ("abandon removes a finished load", PLD,
         "  bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation &&\n              e.state.load(std::memory_order_relaxed) == kLoading;",
         "  bool ours = e.generation.load(std::memory_order_relaxed) == loading.generation;", False),
    # claim and settle
    ("claim ignores the database", PF,
         "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
         "if (e.state.load(std::memory_order_acquire) != kResident) return Take::kClean;", False),
    ("claim takes a loading entry", PF,
         "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
         "if (e.id.db != db) return Take::kClean;", False),
    ("claim reads the id before the state", PF,
         "if (e.state.load(std::memory_order_acquire) != kResident || e.id.db != db) return Take::kClean;",
         "if (e.id.db != db || e.state.load(std::memory_order_acquire) != kResident) return Take::kClean;", True),
    ("claim ignores eligibility", PF,
         "  if (!eligible(static_cast<const Entry&>(e)))\n",
         "  if (false && !eligible(static_cast<const Entry&>(e)))\n", False),
    ("ineligible clean entry reported left", PF,
         "    return CounterTable::Clean(e) ? Take::kClean : Take::kLeft;",
         "    return Take::kLeft;", False),
    ("claim with load-then-store (the old model's drift)", PF,
         "  if (e.in_flush.exchange(1, std::memory_order_acq_rel) != 0) return Take::kClean;",
         "  if (e.in_flush.load(std::memory_order_acquire) != 0) return Take::kClean;\n  e.in_flush.store(1, std::memory_order_release);", True),
    ("claim of a clean entry keeps it claimed", PF,
         "e.flushed.load(std::memory_order_relaxed) == 0))) {\n    e.in_flush.store(0, std::memory_order_release);\n    return Take::kClean;",
         "e.flushed.load(std::memory_order_relaxed) == 0))) {\n    return Take::kClean;", False),
    ("claim-all ignores room", PF,
         "      if (!room()) {",
         "      if (false && !room()) {", False),
    ("claim-noted ignores the generation", PF,
         "    bool same = e.generation.load(std::memory_order_relaxed) == refs[i].generation &&\n",
         "    bool same =\n", False),
    ("settle ignores the generation", PF,
         "  if (e.generation.load(std::memory_order_relaxed) == claim.generation &&\n      e.state.load(std::memory_order_acquire) == kResident) {\n    if (committed) {",
         "  if (e.state.load(std::memory_order_acquire) == kResident) {\n    if (committed) {", True),
    ("settle advances after a failed flush", PF,
         "    if (committed) {\n      int64_t now_flushed =",
         "    if (true) {\n      int64_t now_flushed =", False),
    ("settle leaves the entry claimed", PF,
         "    dirty = !CounterTable::Clean(e);\n    e.in_flush.store(0, std::memory_order_release);",
         "    dirty = !CounterTable::Clean(e);", False),
    ("settle never reports dirty", PF,
         "  locks_.ReleaseShared(claim.partition);\n  return dirty;",
         "  locks_.ReleaseShared(claim.partition);\n  return false;", True),
    # bounded adds
    ("bounded add checks the upper bound only", CT,
     "if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {",
     "if (__builtin_add_overflow(old, delta, &sum) || sum > bounds.upper) {", False),
    ("bounded add checks outside its compare-and-swap", CT,
     "    do {\n      if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {\n        *value = old;\n        return false;\n      }\n    } while (!e.value.compare_exchange_weak(old, sum, std::memory_order_seq_cst,\n                                            std::memory_order_relaxed));",
     "    if (__builtin_add_overflow(old, delta, &sum) || !bounds.Admit(sum)) {\n      *value = old;\n      return false;\n    }\n    sum = e.value.fetch_add(delta) + delta;", False),
    # reserve and settle
    ("reservation does not pin", PHD,
         "      side.store(reserved + delta, std::memory_order_relaxed);\n      e.pins.fetch_add(1, std::memory_order_relaxed);",
         "      side.store(reserved + delta, std::memory_order_relaxed);", True),
    ("reservation checks nothing", PHD,
         "    result = fits ? Reserve::kReserved : Reserve::kOverflow;",
         "    fits = true;\n    result = Reserve::kReserved;", False),
    ("reservation on one side only", PHD,
         "    std::atomic<int64_t>& side = delta >= 0 ? e.reserved_up : e.reserved_down;\n    int64_t reserved",
         "    std::atomic<int64_t>& side = e.reserved_up;\n    int64_t reserved", False),
    ("bounded reservation checks one end only", PHD,
         "if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {",
         "if (!bounds.Admit(sum)) {", False),
    ("bounded reservation ignores the others' reservations", PHD,
         "if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {",
         "if (!bounds.Admit(*committed + delta) || !bounds.Admit(other_end)) {", False),
    ("bounded reservation ignores the other side's reservations", PHD,
         "int64_t other_end = *committed + other.load(std::memory_order_relaxed) + delta;",
         "int64_t other_end = *committed + delta;", False),
    ("bounded reservation refused but pinned", PHD,
         "      if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {\n        fits = false;\n",
         "      if (!bounds.Admit(sum) || !bounds.Admit(other_end)) {\n", False),
    ("reservation of a loading entry", PHD,
         "if (index != kNil && t_.at(index).state.load(std::memory_order_acquire) == kResident) {",
         "if (index != kNil) {", False),
    ("abort adds its delta", PHD,
         "    if (committed && !__builtin_add_overflow(value, r.delta - r.expired, &value))",
         "    if (!__builtin_add_overflow(value, r.delta - r.expired, &value))", False),
    ("settled reservation stays pinned", PHD,
         "    side.store(side.load(std::memory_order_relaxed) - r.delta, std::memory_order_relaxed);\n    e.pins.fetch_sub(1, std::memory_order_relaxed);",
         "    side.store(side.load(std::memory_order_relaxed) - r.delta, std::memory_order_relaxed);", False),
    ("committed value left dirty", PHD,
         "    e.flushed.store(e.value.load(std::memory_order_relaxed), std::memory_order_release);\n  }\n  locks_.Release(r.partition);",
         "  }\n  locks_.Release(r.partition);", False),
    ("an older commit epoch overwrites a newer", PHD,
         "    if (committed && epoch > e.commit_epoch.load(std::memory_order_relaxed))",
         "    if (committed)", False),
    ("reservation settle ignores the generation", PHD,
         "  bool ours = e.generation.load(std::memory_order_relaxed) == r.generation &&\n              e.state.load(std::memory_order_relaxed) == kResident;\n  if (ours) {\n    // Concurrent",
         "  bool ours = e.state.load(std::memory_order_relaxed) == kResident;\n  if (ours) {\n    // Concurrent", False),
    # pins
    ("pin takes no pin", PHD,
         "  e.pins.fetch_add(1, std::memory_order_relaxed);\n  *pin = Pin{",
         "  *pin = Pin{", False),
    ("pin of a loading entry", PHD,
         "  if (e.state.load(std::memory_order_relaxed) != kResident) return Probe::kLoading;\n",
         "", False),
    ("unpin ignores the generation", PHD,
         "  if (e.generation.load(std::memory_order_relaxed) == pin.generation)\n    e.pins.fetch_sub",
         "  if (true)\n    e.pins.fetch_sub", False),
    ("pinned add ignores the generation", PHD,
         "  bool ours = e.generation.load(std::memory_order_relaxed) == pin.generation &&\n              e.state.load(std::memory_order_relaxed) == kResident;\n  bool ok = true;",
         "  bool ours = e.state.load(std::memory_order_relaxed) == kResident;\n  bool ok = true;", False),
    # purge
    ("purge removes a loading entry", PP,
         "      return e.state.load(std::memory_order_relaxed) == kResident && pred(e);",
         "      return pred(e);", False),
    ("bucket purge removes reserved entries", PP,
         "kResident && pred(e) && !reserved(e);",
         "kResident && pred(e);", False),
    ("bucket purge does not empty reserved entries", PP,
         "        e.value.store(0, std::memory_order_relaxed);\n        e.flushed.store(0, std::memory_order_relaxed);\n      }",
         "      }", False),
    ("purge-clean removes pinned entries", PP,
         "                   e.pins.load(std::memory_order_relaxed) == 0 && may_evict(e) &&",
         "                   may_evict(e) &&", False),
    ("purge-clean removes claimed entries", PP,
         "                   e.in_flush.load(std::memory_order_relaxed) == 0 &&\n",
         "", False),
    ("purge-clean ignores the database", PP,
         "      if (e.id.db != db) return false;\n      bool clean",
         "      bool clean", False),
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
    ("expiry unlinks a dirty entry", PF,
         "    bool clean = e.state.load(std::memory_order_relaxed) == kResident &&\n                 CounterTable::Clean(e) &&\n",
         "    bool clean = e.state.load(std::memory_order_relaxed) == kResident &&\n", False),
    ("expiry unlinks a reserved entry", PF,
         "                 e.reserved_up.load(std::memory_order_relaxed) == 0 &&\n                 e.reserved_down.load(std::memory_order_relaxed) == 0 &&\n                 may_evict(static_cast<const Entry&>(e));\n    expirable[i]",
         "                 may_evict(static_cast<const Entry&>(e));\n    expirable[i]", False),
    ("expiry holds after the lock", PF,
         "  hold();\n  locks_.Release(p);\n}",
         "  locks_.Release(p);\n  hold();\n}", False),
    ("expiry unlinks without freeing", PF,
         "      t_.Unlink(index);\n      t_.Release(index);\n    }\n  }\n  hold();",
         "      t_.Unlink(index);\n    }\n  }\n  hold();", False),
    ("allocated entry keeps old pins", CTC,
     "      e.pins.store(0, std::memory_order_relaxed);\n      e.commit_epoch.store(0, std::memory_order_relaxed);\n      used_",
     "      e.commit_epoch.store(0, std::memory_order_relaxed);\n      used_", False),
    # the fold epochs (core/fold_epochs.hpp)
    ("fold: take does not move the epoch on", FE,
     "  uint32_t epoch = f.fold_epoch.fetch_add(1, std::memory_order_seq_cst);",
     "  uint32_t epoch = f.fold_epoch.load(std::memory_order_seq_cst);", False),
    ("fold: a commit tags the epoch before", FE,
     "  return f.fold_epoch.load(std::memory_order_seq_cst);\n}",
     "  return f.fold_epoch.load(std::memory_order_seq_cst) - 1;\n}", True),
    ("fold: a fold that skipped counters completes the fold", FE,
     "  if (nskipped == 0 && epoch > folded) f.folded_epoch",
     "  if (epoch > folded) f.folded_epoch", True),
    ("fold: an older fold moves folded back", FE,
     "  if (nskipped == 0 && epoch > folded) f.folded_epoch",
     "  if (nskipped == 0) f.folded_epoch", False),
    ("fold: an older fold moves evictable back", FE,
     "  if (epoch > evictable) {", "  if (epoch != evictable) {", False),
    ("fold: skipped counters not recorded", FE,
     "    f.unfolded_count = nskipped;", "    f.unfolded_count = 0;", True),
    ("fold: a fold that skipped too many publishes some", FE,
     "  if (nskipped > kMaxUnfolded) return;", "  if (nskipped > kMaxUnfolded) nskipped = kMaxUnfolded;",
     False),
    ("fold: a fold that skipped the most allowed publishes nothing", FE,
     "  if (nskipped > kMaxUnfolded) return;", "  if (nskipped >= kMaxUnfolded) return;", False),
    ("fold: publish writes without the mutex", FE,
     "  mutex.lock();\n  uint32_t evictable = f.evictable_epoch.load(std::memory_order_relaxed);",
     "  uint32_t evictable = f.evictable_epoch.load(std::memory_order_relaxed);", True),
    ("fold: folded ignores the skipped counters", FE,
     "  for (int i = 0; folded && i < f.unfolded_count; i++) folded = f.unfolded[i] != counter;\n",
     "", True),
    ("fold: folded counts the evictable epoch out", FE,
     "  bool folded = epoch <= f.evictable_epoch", "  bool folded = epoch < f.evictable_epoch", False),
    ("fold: folded counts the taken epoch in", FE,
     "  bool folded = epoch <= f.evictable_epoch.load(std::memory_order_relaxed);",
     "  bool folded = epoch <= f.evictable_epoch.load(std::memory_order_relaxed) + 1;", True),
    ("fold: folded reads without the mutex", FE,
     "  mutex.lock();\n  SC_ASSERT(f.unfolded_count >= 0 && f.unfolded_count <= kMaxUnfolded);",
     "  SC_ASSERT(f.unfolded_count >= 0 && f.unfolded_count <= kMaxUnfolded);", True),
    ("fold: a bucket drop does not make loads read deltas", FE,
     "  while (until < epoch && !f.deltas_until.compare_exchange_weak(until, epoch)) {\n  }\n",
     "", True),
    ("fold: loads read deltas until the last taken epoch", FE,
     "  while (until < epoch && !f.deltas_until.compare_exchange_weak(until, epoch)) {",
     "  while (until + 1 < epoch && !f.deltas_until.compare_exchange_weak(until, epoch - 1)) {", True),
    ("fold: loads stop reading deltas at the epoch", FE,
     "  return f.folded_epoch.load(std::memory_order_seq_cst) <\n         f.deltas_until",
     "  return f.folded_epoch.load(std::memory_order_seq_cst) + 1 <\n         f.deltas_until", True),
    ("fold: reset does not move the epoch on", FE,
     "  uint32_t previous = f.fold_epoch.fetch_add(1, std::memory_order_seq_cst);",
     "  uint32_t previous = f.fold_epoch.load(std::memory_order_seq_cst) - 1;", False),
    ("fold: reset keeps the old database's skipped counters", FE,
     "  f.unfolded_count = 0;\n  mutex.unlock();\n  RequireDeltaReads(f);",
     "  mutex.unlock();\n  RequireDeltaReads(f);", False),
    ("fold: reset does not make loads read deltas", FE,
     "  mutex.unlock();\n  RequireDeltaReads(f);\n}", "  mutex.unlock();\n}", False),
    # the slot life cycle, the flusher's claim and hand-over, flush tickets (core/database_slot.hpp)
    ("slot: named before its reset", DS,
     "  reset(*free_slot);\n  c.db.store(db, std::memory_order_release);",
     "  c.db.store(db, std::memory_order_release);\n  reset(*free_slot);", False),
    ("slot: a free slot is never assigned", DS,
     "    if (owner == 0 && free_slot == nullptr) free_slot = &slots[i];",
     "    if (owner == 0 && free_slot != nullptr) free_slot = &slots[i];", False),
    ("slot: a start while a flusher runs", DS,
     "    if (c.worker_pid.load(std::memory_order_relaxed) == 0 &&\n        c.closing",
     "    if (c.closing", False),
    ("slot: a start while closing", DS,
     "    if (c.worker_pid.load(std::memory_order_relaxed) == 0 &&\n        c.closing.load(std::memory_order_seq_cst) == 0) {",
     "    if (c.worker_pid.load(std::memory_order_relaxed) == 0) {", False),
    ("slot: a start asked again within the retry time", DS,
     "      r.start = c.start_requested == 0 || now - c.start_requested >= retry_us;",
     "      r.start = true;", True),
    ("slot: a failed start frees a slot it did not assign", DS,
     "  if (r.fresh && c.db.load", "  if (c.db.load", False),
    ("slot: a failed start frees a closing slot", DS,
     "      c.worker_pid.load(std::memory_order_relaxed) == 0 &&\n      c.closing.load(std::memory_order_seq_cst) == 0)\n    FreeLocked(c);",
     "      c.worker_pid.load(std::memory_order_relaxed) == 0)\n    FreeLocked(c);", False),
    ("slot: a failed start keeps its request", DS,
     "  c.start_requested = 0;\n  if (r.fresh", "  if (r.fresh", False),
    ("slot: a second flusher claims", DS,
     "    if (c.worker_pid.load(std::memory_order_relaxed) == 0) {\n      SC_ASSERT(c.db",
     "    if (true) {\n      SC_ASSERT(c.db", True),
    ("slot: a claim without the lock", DS,
     "  SC_ASSERT(pid != 0);\n  lock.lock();", "  SC_ASSERT(pid != 0);", False),
    ("slot: a leave clears another flusher's claim", DS,
     "  bool owned = c.worker_pid.load(std::memory_order_relaxed) == pid;",
     "  bool owned = true;", True),
    ("slot: a leave keeps the start request", DS,
     "    c.start_requested = 0;\n  }\n  lock.unlock();\n  return owned;",
     "  }\n  lock.unlock();\n  return owned;", False),
    ("slot: an idle slot freed under a claimant", DS,
     "  bool freed = c.db.load(std::memory_order_relaxed) == db &&\n               c.worker_pid.load(std::memory_order_relaxed) == 0 && c.start_requested == 0 &&",
     "  bool freed = c.db.load(std::memory_order_relaxed) == db && c.start_requested == 0 &&", True),
    ("slot: an idle slot freed with a start asked for", DS,
     "c.worker_pid.load(std::memory_order_relaxed) == 0 && c.start_requested == 0 &&",
     "c.worker_pid.load(std::memory_order_relaxed) == 0 &&", True),
    ("slot: an idle slot freed while closing", DS,
     "               c.closing.load(std::memory_order_seq_cst) == 0 && may_free();",
     "               may_free();", False),
    ("slot: an idle slot freed despite its clients", DS,
     "               c.closing.load(std::memory_order_seq_cst) == 0 && may_free();",
     "               c.closing.load(std::memory_order_seq_cst) == 0;", True),
    ("slot: the extension gone frees a closing slot", DS,
     "  if (c.worker_pid.load(std::memory_order_relaxed) == 0 &&\n      c.closing.load(std::memory_order_seq_cst) == 0 && c.db",
     "  if (c.worker_pid.load(std::memory_order_relaxed) == 0 && c.db", False),
    ("slot: a drop that cannot free keeps its mark", DS,
     "  if (freed) FreeLocked(c);\n  UnmarkClosing(c);",
     "  if (freed) {\n    FreeLocked(c);\n    UnmarkClosing(c);\n  }", False),
    ("slot: a drop frees under a flusher", DS,
     "  bool freed = c.db.load(std::memory_order_relaxed) == db &&\n               c.worker_pid.load(std::memory_order_relaxed) == 0 && may_free();",
     "  bool freed = c.db.load(std::memory_order_relaxed) == db && may_free();", False),
    ("slot: its own database's flusher asked to leave", DS,
     "    if (c.db.load(std::memory_order_relaxed) == db ||\n        c.worker_pid",
     "    if (c.worker_pid", False),
    ("slot: a leave request is never taken back", DS,
     "  return c.leave_requested.exchange(0, std::memory_order_seq_cst) != 0;",
     "  return c.leave_requested.load(std::memory_order_seq_cst) != 0;", False),
    ("slot: a flusher runs for any database", DS,
     "  return c.worker_pid.load(std::memory_order_seq_cst) != 0 &&\n         c.db.load(std::memory_order_acquire) == db;",
     "  return c.worker_pid.load(std::memory_order_seq_cst) != 0;", False),
    ("ticket: a flush answers the tickets asked during it", DS,
     "    if (ticket > t.done) t.done = ticket;", "    t.done = t.requested;", True),
    ("ticket: flush_done goes backwards", DS,
     "    if (ticket > t.done) t.done = ticket;", "    t.done = ticket;", False),
    ("ticket: a failure fails the tickets asked during it", DS,
     "    if (ticket > t.failed) t.failed = ticket;", "    t.failed = t.requested;", True),
    ("ticket: a done ticket reported failed", DS,
     "  o.failed = !o.done && t.failed >= ticket;", "  o.failed = t.failed >= ticket;", False),
    ("ticket: two requests share a ticket", DS,
     "  uint64_t ticket = ++t.requested;", "  uint64_t ticket = t.requested + 1;", True),
    ("ticket: asking adds a flush while one is to come", DS,
     "  if (t.requested <= t.done) ++t.requested;", "  ++t.requested;", False),
    ("ticket: a stale flush answers the next database's tickets", DS,
     "  if (ticket > t.requested) ticket = 0;\n", "", False),
    ("ticket: a flush begins without the mutex", DS,
     "  mutex.lock();\n  SC_ASSERT(t.done <= t.requested);\n  FlushBegun b",
     "  SC_ASSERT(t.done <= t.requested);\n  FlushBegun b", True),
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
         "    if (!resident) Publish(i, k, delta, 0, 0, w, false);\n    table.locks().Release(p);",
         "    table.locks().Release(p);\n    if (!resident) Publish(i, k, delta, 0, 0, w, false);", True),
    ("request: published for a resident key", WTR,
     "    bool resident = table.table().Find(k, hash) != kNil;", "    bool resident = false;", False),
    ("request: a new request keeps the old cancel", WTR,
     "  r.server_pid = 0;\n  r.cancel = false;", "  r.server_pid = 0;", False),
    ("request: cancel withdraws nothing", WTR,
     "        if (cancelled || withdraw_due) {", "        if (withdraw_due) {", False),
    ("request: a taken request is withdrawn", WTR,
     "      case kRequestTaken:\n        look.server = r.server_pid;\n        if (cancelled) request_step::Cancel(r);\n        break;",
     "      case kRequestTaken:\n        look.server = r.server_pid;\n        if (cancelled) request_step::Cancel(r);\n        if (withdraw_due) {\n          request_step::Withdraw(r, open_.Of(r.key.db));\n          look.step = AwaitStep::kWithdrawn;\n        }\n        break;", False),
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
     "    if (open_.Of(k.db).load() == 0) return false;\n    for (int i = 0; i < requests_.size(); i++) {\n      auto mutex = requests_.mutex(i);\n      mutex.lock();\n      const ThroughRequest& r = requests_.at(i);\n      bool match",
     "    if (open_.Of(k.db).load() <= 1) return false;\n    for (int i = 0; i < requests_.size(); i++) {\n      auto mutex = requests_.mutex(i);\n      mutex.lock();\n      const ThroughRequest& r = requests_.at(i);\n      bool match", False),
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
    ("shared keys: a slot answers for any epoch", SK,
     " s.epoch == epoch &&", "", False),
    ("shared keys: a slot answers for another text of the same hash and length", SK,
     "          s.len == len && memcmp(s.text, text, len) == 0)", "          s.len == len)", False),
    ("shared keys: a slot answers for another database", SK,
     " s.db == db && s.counter == counter &&", " s.counter == counter &&", False),
    ("shared keys: a purge forgets every database's keys", SK,
     "if (s.hash != 0 && s.db == db && (counter == 0 || s.counter == counter)) s.hash = 0;",
     "if (s.hash != 0 && (counter == 0 || s.counter == counter)) s.hash = 0;", False),
    ("shared keys: a newer slot is taken for stale", SK,
     "first[w].epoch < epoch", "first[w].epoch != epoch", False),
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
    # the rank index (sc_rank): its order, its blocks, its map, and a refused allocation
    ("rank: CountGreater counts equal values too", RI,
     "uint64_t in_block = c - uint32_t(std::upper_bound(block, block + c, v) - block);",
     "uint64_t in_block = c - uint32_t(std::lower_bound(block, block + c, v) - block);", False),
    ("rank: CountGreater below every value counts none", RI,
     "    if (i < 0) return size;  // v is below every value",
     "    if (i < 0) return 0;  // v is below every value", False),
    ("rank: CountGreater's prefix sum stops a block short", RI,
     "uint64_t through_i = Prefix(d, uint32_t(i) + 1);", "uint64_t through_i = Prefix(d, uint32_t(i));", False),
    ("rank: a value's block is the first whose first value is not below it", RIB,
         "return int64_t(std::upper_bound(d.first, d.first + n, v) - d.first) - 1;",
         "return int64_t(std::lower_bound(d.first, d.first + n, v) - d.first) - 1;", False),
    ("rank: a replaced value stays in the multiset", RI,
     "      EraseValue(a, old);\n      *held = value;", "      *held = value;", False),
    ("rank: a split puts the new value into the upper half", RIB,
         "uint32_t j = v < right[0] ? i : i + 1;",
         "uint32_t j = i + 1;", False),
    ("rank: a split leaves the new block's first value unset", RIB,
         "  d.first[i + 1] = right[0];\n",
         "", False),
    ("rank: a removal leaves the block's first value stale", RIB,
         "  d.first[i] = block[0];\n  TreeAdd(d, i, -1);",
         "  TreeAdd(d, i, -1);", False),
    ("rank: a removal leaves the Fenwick tree as it was", RIB,
         "  d.first[i] = block[0];\n  TreeAdd(d, i, -1);",
         "  d.first[i] = block[0];", False),
    ("rank: an emptied block stays", RIB,
         "  d.count[i] = --c;\n  if (c == 0) {",
         "  d.count[i] = --c;\n  if (false) {", False),
    ("rank: neighbours merge only below half", RIB,
         "if (i + 1 < blocks && c + d.count[i + 1] <= block_values / 2)",
         "if (i + 1 < blocks && c + d.count[i + 1] < block_values / 2)", False),
    ("rank: a block merges with its right neighbour only", RIB,
         "  else if (i > 0 && d.count[i - 1] + c <= block_values / 2)\n    Merge(a, d, i - 1);",
         "", False),
    ("rank: a grown directory loses the counts", RIB,
         "      std::memcpy(to.count, from.count, blocks * sizeof(uint32_t));\n",
         "", False),
    ("rank: a split's block is not counted in bytes", RIB,
         "  blocks++;\n  bytes += block_values * sizeof(int64_t);\n  uint32_t j",
         "  blocks++;\n  uint32_t j", False),
    ("rank: a map removal leaves a hole in the probe run", RI,
     "      if (stays) continue;\n      s[i] = s[j];", "      if (true) continue;\n      s[i] = s[j];", False),
    ("rank: a map removal ignores runs across the end", RI,
     "bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);",
     "bool stays = i < home && home <= j;", False),
    ("rank: the map fills to 19/20", RI,
     "return keys * 20 <= slots * 17;", "return keys * 20 <= slots * 19;", False),
    ("rank: the map's growth leaks when the block cannot be had", RI,
     "      if (grown != 0) a.Free(grown);\n      return false;", "      return false;", False),
    ("rank: a refused block leaks the directory planned with it", RIB,
         "    if (plan->directory != 0) a.Free(plan->directory);\n",
         "", False),
    ("rank: the empty marker is found in an index without it", RI,
     "      if (has_empty_key) *value = empty_key_value;\n      return has_empty_key != 0;",
     "      *value = empty_key_value;\n      return true;", False),
    ("rank: Build keeps a repeated key's first value", RI,
     "        s[i].value = values[j];\n", "", False),
    ("rank: a failed Build leaks what it built", RI,
     "      fresh.Destroy(a);\n      return false;", "      return false;", False),
    ("rank: Build fills the blocks full", RI,
     "    uint32_t fill = block_values_ / 4 * 3;", "    uint32_t fill = block_values_;", False),
    ("rank: BuildBytes leaves the directory out", RI,
     "    return BuildCapacity(n) * sizeof(RankSlot) + DirectoryBytes(uint32_t(blocks < 4 ? 4 : blocks)) +",
     "    return BuildCapacity(n) * sizeof(RankSlot) +", False),
    # the fair share
    ("fair: a party above its share takes free units whatever others lack", FS,
     "  return v.free - want >= v.reserve + v.lacking;", "  return true;", False),
    ("fair: no reserve for a party that holds none", FS,
     "  return kind == PoolKind::kHeldUntilDone ? capacity / kReserveDivisor : 0;", "  return 0;", False),
    ("fair: the asker is not counted among the parties", FS,
     "  if (!counted) parties++;", "", False),
    ("fair: a party takes back beyond its share", FS,
     "  return v.kind == PoolKind::kTakesBack && v.held + want <= v.share;",
     "  return v.kind == PoolKind::kTakesBack;", False),
    ("fair: a party at its share counts as above it", FS,
     "inline bool AboveShare(uint64_t held, uint64_t share) noexcept { return held > share; }",
     "inline bool AboveShare(uint64_t held, uint64_t share) noexcept { return held >= share; }", False),
    ("fair: a party above its share counts as lacking", FS,
     "    if (holdings[i].party != asker && holdings[i].held > 0 && holdings[i].held < v.share)",
     "    if (holdings[i].party != asker && holdings[i].held > 0)", False),
    ("request: every database's requests counted in one cell", WTR,
     "  std::atomic<uint32_t>& Of(uint32_t db) noexcept { return cells[db % kOpenCells]; }",
     "  std::atomic<uint32_t>& Of(uint32_t) noexcept { return cells[0]; }", False),
    ("request: a flusher skips its scan by another database's count", WTR,
     "    if (open_.Of(db).load() == 0) return 0;", "    if (open_.Of(db + 1).load() == 0) return 0;", False),
    ("rank: Destroy leaks the blocks", RI,
     "      for (uint32_t i = 0; i < blocks; i++) a.Free(d.handle[i]);\n", "", False),
    ("rank: a replacement removes the old value before it has memory for the new", RI,
     "      InsertPlan plan;\n      if (!PlanInsert(a, value, &plan)) return false;\n      InsertValue(a, value, plan);\n      EraseValue(a, old);",
     "      EraseValue(a, old);\n      InsertPlan plan;\n      if (!PlanInsert(a, value, &plan)) return false;\n      InsertValue(a, value, plan);", False),
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
    # The unmutated core first: the whole build is the long one (a mutation rebuilds only what
    # its file reaches), and its tests must pass, or a failure below means nothing. (The
    # ThreadSanitizer build is whole at the first mutation that needs it: its longer time limit.)
    if run(["cmake", "--build", builds["normal"], "-j2"], 7200) != 0:
        print("the unmutated core does not build")
        shutil.rmtree(work, ignore_errors=True)
        return 2
    for binary in ("sc_unit_tests", "sc_thread_tests"):
        if run([os.path.join(builds["normal"], binary), "--gtest_brief=1"], 600) != 0:
            print(f"the unmutated core fails {binary}")
            shutil.rmtree(work, ignore_errors=True)
            return 2
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
        rc = run(["cmake", "--build", builds["normal"], "-j2"], 1800)
        if rc != 0:
            # A mutation must be a program the tests run, not a compile error.
            print(f"BROKEN  {name}: " + ("its build timed out" if rc == "timeout" else
                                         "does not build"), flush=True)
            survived.append(name)
            shutil.copy(os.path.join(SRC, fname), path)
            continue
        for binary in ("sc_unit_tests", "sc_thread_tests"):
            rc = run([os.path.join(builds["normal"], binary), "--gtest_brief=1"], 300)
            if rc != 0:
                how = f"{binary} failed" if rc != "timeout" else f"{binary} timed out"
                break
        if how is None and tsan:
            rc = run(["cmake", "--build", builds["tsan"], "-j2", "--target", "sc_thread_tests"],
                     3600)
            if rc != 0:
                print(f"BROKEN  {name}: " + ("its ThreadSanitizer build timed out"
                                             if rc == "timeout" else
                                             "does not build under ThreadSanitizer"), flush=True)
                survived.append(name)
                shutil.copy(os.path.join(SRC, fname), path)
                continue
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
