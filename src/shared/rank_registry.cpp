// rank_registry.cpp: the registry of sc_rank's indexes, as shared memory is made.
#include "shared/rank_registry.hpp"

namespace sc {

Size RankIndexesSize() { return MAXALIGN(sizeof(RankIndexes)); }

void InitRankIndexes(RankIndexes* r, LWLockPadded* locks) {
  memset(static_cast<void*>(r), 0, sizeof(*r));
  r->lock = &locks[0].lock;
  r->area = DSM_HANDLE_INVALID;
  r->tranche = LWLockNewTrancheId();
  pg_atomic_init_u64(&r->bytes, 0);
  for (int i = 0; i < kRankSlots; i++) {
    RankIndexSlot& s = r->slots[i];
    s.state = kRankFree;
    pg_atomic_init_u64(&s.used_at, 0);
    pg_atomic_init_u64(&s.bytes, 0);
    s.lock = &locks[1 + i].lock;
    s.index.Init();
  }
}

}  // namespace sc
