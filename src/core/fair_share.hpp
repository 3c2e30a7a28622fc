// fair_share.hpp: the one rule by which the parties of a server share a pool of fixed size: the
// databases share the buffer (counter_table.hpp: OverShare), the request ids of buffered
// sc_incr_once calls (shared/request_ids.hpp), the slots and the memory of sc_rank's indexes
// (buffer/rank_indexes.hpp); the roles of a database share that database's part of the last two.
//
// Pure C++ (no PostgreSQL header), no state: the callers read the holdings under their pool's
// lock and pass them in.
//
// The rule: a party below its share of a pool never waits on a party above its share.
//   - A party's share is the capacity less the reserve, split evenly among the parties that hold
//     units, the asker counted (a party alone may use all but the reserve).
//   - In a pool whose units can be taken back (an index can be dropped, a clean entry evicted):
//     anyone takes free units; an asker within its share that finds too few takes units back
//     from the parties above their share; one beyond its share gives way (is refused, or takes
//     back one of its own).
//   - In a pool whose units come back only when their holder is done with them (a request id, at
//     its flush): an asker within its share takes free units as long as there are any; one beyond
//     it takes a free unit only if what stays free covers the reserve and what the other parties
//     below their share lack, and otherwise waits for its own units. The reserve is kept for a
//     party that holds none yet, so that it finds units at once however full the others keep the
//     pool; once it holds units it is a party, and the others above their share take none of
//     what it lacks (with every holder a party, one above its share takes nothing but the
//     remainder of the division).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sc {

// How a pool's units come back. kTakesBack: an asker within its share that finds too few free
// units takes back units of the parties above their share (an index is dropped, a clean entry
// evicted); so anyone takes free units, and no reserve is kept. kHeldUntilDone: a unit comes
// back only when its holder is done with it (a request id, at its database's flush); so a reserve
// of a sixteenth of the pool is kept for a party that holds none yet, and a party above its share
// takes free units only beyond the reserve and what the others below their share lack.
enum class PoolKind { kTakesBack, kHeldUntilDone };

constexpr uint64_t kReserveDivisor = 16;

// What one party (a database, or a role within a database) holds of a pool.
struct Holding {
  uint64_t party;
  uint64_t held;
};

// A pool as one party, the asker, sees it.
struct ShareView {
  PoolKind kind;
  uint64_t share;    // each party's
  uint64_t held;     // the asker's
  uint64_t free;     // units nobody holds
  uint64_t reserve;  // kept free for a party that holds none yet
  uint64_t lacking;  // what the parties other than the asker below their share lack to reach it
};

inline uint64_t ReserveOf(uint64_t capacity, PoolKind kind) noexcept {
  return kind == PoolKind::kHeldUntilDone ? capacity / kReserveDivisor : 0;
}

// capacity less reserve, split among `parties` (the asker counted); at least 1 party.
inline uint64_t FairShare(uint64_t capacity, uint64_t reserve, uint64_t parties) noexcept {
  uint64_t usable = capacity > reserve ? capacity - reserve : 0;
  return usable / (parties > 0 ? parties : 1);
}

// A holder above its share: its units are the ones taken back, and it takes none from others.
inline bool AboveShare(uint64_t held, uint64_t share) noexcept { return held > share; }

// The pool as `asker` sees it, from the holdings of every party that holds units (each party
// at most once, in any order; the asker's own, if it holds any, among them).
inline ShareView ViewOf(const Holding* holdings, size_t n, uint64_t asker, uint64_t capacity,
                        PoolKind kind) noexcept {
  uint64_t parties = 0, total = 0, held = 0;
  bool counted = false;
  for (size_t i = 0; i < n; i++) {
    if (holdings[i].held == 0) continue;
    parties++;
    total += holdings[i].held;
    if (holdings[i].party == asker) {
      counted = true;
      held = holdings[i].held;
    }
  }
  if (!counted) parties++;
  uint64_t reserve = ReserveOf(capacity, kind);
  ShareView v{kind, FairShare(capacity, reserve, parties), held,
              total < capacity ? capacity - total : 0, reserve, 0};
  for (size_t i = 0; i < n; i++)
    if (holdings[i].party != asker && holdings[i].held > 0 && holdings[i].held < v.share)
      v.lacking += v.share - holdings[i].held;
  return v;
}

// Whether the asker may take `want` free units.
inline bool MayTakeFree(const ShareView& v, uint64_t want) noexcept {
  if (v.free < want) return false;
  if (v.kind == PoolKind::kTakesBack || v.held + want <= v.share) return true;
  return v.free - want >= v.reserve + v.lacking;
}

// Whether the asker, finding too few free units, may take `want` back from the parties above
// their share (a pool of kind kTakesBack).
inline bool MayTakeBack(const ShareView& v, uint64_t want) noexcept {
  return v.kind == PoolKind::kTakesBack && v.held + want <= v.share;
}

}  // namespace sc
