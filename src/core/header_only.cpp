// header_only.cpp: the header-only files of the core (templates over their lock policies) compiled
// once where no PostgreSQL header may be included, so that one reached from any of them is a
// compile error (cpp_only_file.hpp, included last).
#include "core/checked_math.hpp"
#include "core/core_assert.hpp"
#include "core/database_slot.hpp"
#include "core/dirty_ring.hpp"
#include "core/entry_handles.hpp"
#include "core/fair_share.hpp"
#include "core/fold_epochs.hpp"
#include "core/gcra.hpp"
#include "core/hll.hpp"
#include "core/key_cache.hpp"
#include "core/murmur3.hpp"
#include "core/partition_lock.hpp"
#include "core/pending_table.hpp"
#include "core/protocol.hpp"
#include "core/rank_index.hpp"
#include "core/shared_key_cache.hpp"
#include "core/stored_filter.hpp"
#include "core/through_holds.hpp"
#include "core/write_through_request.hpp"

#include "core/cpp_only_file.hpp"
