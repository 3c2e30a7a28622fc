# slotted_counter: PGXS build. C++17; the server is built with LLVM, so every .cpp is also
# compiled to bitcode by clang and needs the same flags. The folders of src/ are the architecture
# (docs/design.md); files include each other by their path under src/.
# The router's extension, slotted_counter_proxy, is built from its own folder, proxy/.

MODULE_big = slotted_counter
OBJS = \
	src/module.o \
	src/spi.o \
	src/core/counter_table.o \
	src/core/header_only.o \
	src/core/time_bucket.o \
	src/shared/flusher_slots.o \
	src/shared/rank_registry.o \
	src/shared/request_ids.o \
	src/shared/saved_values.o \
	src/shared/shmem.o \
	src/shared/stored_keys.o \
	src/shared/wait_events.o \
	src/shared/write_through.o \
	src/definitions/catalog.o \
	src/definitions/changes.o \
	src/definitions/counter_type.o \
	src/definitions/drop.o \
	src/definitions/expiry.o \
	src/definitions/guards.o \
	src/definitions/kinds.o \
	src/definitions/privileges.o \
	src/definitions/role_commands.o \
	src/definitions/sketch_rows.o \
	src/definitions/key_values_rows.o \
	src/definitions/limiters.o \
	src/definitions/sums.o \
	src/definitions/text_keys.o \
	src/buffer/batch.o \
	src/buffer/increment.o \
	src/buffer/load.o \
	src/buffer/rank_indexes.o \
	src/buffer/read.o \
	src/buffer/reserve.o \
	src/buffer/sketches.o \
	src/buffer/stored.o \
	src/transactions/distinct_adds.o \
	src/transactions/large_commit.o \
	src/transactions/throttles.o \
	src/transactions/transactional.o \
	src/transactions/xact.o \
	src/functions/attach.o \
	src/functions/bucketed.o \
	src/functions/create_drop.o \
	src/functions/distinct.o \
	src/functions/functions.o \
	src/functions/once.o \
	src/functions/rank.o \
	src/functions/reads.o \
	src/functions/retention.o \
	src/functions/stats.o \
	src/functions/text_key_functions.o \
	src/functions/throttle.o \
	src/functions/totals.o \
	src/functions/writes.o \
	src/workers/attach_run.o \
	src/workers/databases.o \
	src/workers/flush.o \
	src/workers/flush_copy.o \
	src/workers/flush_sketches.o \
	src/workers/flush_insert.o \
	src/workers/flush_txn.o \
	src/workers/flush_update.o \
	src/workers/flush_write.o \
	src/workers/fold.o \
	src/workers/session.o \
	src/workers/text_ids.o \
	src/workers/worker.o \
	src/workers/write_through.o

EXTENSION = slotted_counter
DATA = sql/slotted_counter--1.0.sql
PGFILEDESC = "slotted_counter - hot counters without row locks"

# SC_VERSION: the version the library reports (PostgreSQL 18's pg_get_loaded_modules), the control
# file's.
SC_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/$(EXTENSION).control)
PG_CPPFLAGS = -I$(srcdir)/src -DSC_VERSION='"$(SC_VERSION)"'
# The C++ rules are the compiler's: no exceptions, no RTTI, every warning of -Wall -Wextra (but
# unused parameters, which PostgreSQL's own inline functions have); errors with WERROR=1, as the
# test command builds. g++ also warns of a local that shadows another, as PostgreSQL 16 and later
# build (clang, which makes the bitcode, has no such option).
SC_CXXFLAGS = -std=c++17 -Wno-register -fno-exceptions -fno-rtti -Wall -Wextra \
	-Wno-unused-parameter $(if $(WERROR),-Werror)
PG_CXXFLAGS = $(SC_CXXFLAGS) -Wshadow=compatible-local
# -Bsymbolic: the library's references to its own symbols bind to its own definitions. Without
# it a second copy of the library loaded into a backend (the file replaced by an upgrade while the
# server runs) would bind to the preloaded copy's globals, its shared-memory pointer among them,
# and use them with its own layout.
SHLIB_LINK = -lstdc++ -Wl,-Bsymbolic

# pg_regress and the isolation tester start their own instance with the library preloaded; their
# inputs and expected output are under test/ (sql/ holds the install script alone).
REGRESS = setup type api errors buffer transactional batch set bounded retention expiry once top \
	top_scale rank_total attach buckets privileges placeholders text_keys throttle distinct
REGRESS_OPTS = --inputdir=test --temp-instance=tmp_check --temp-config=test/regress.conf
ISOLATION = incr_interleave drop_while_incr txn_overflow txn_interleave set_concurrent \
	bucket_drop revoke drop_extension bounded_concurrent once_concurrent top_concurrent \
	expiry_concurrent rank_total_concurrent text_keys_concurrent throttle_concurrent \
	distinct_concurrent
ISOLATION_OPTS = --inputdir=test --temp-instance=tmp_check_iso --temp-config=test/isolation.conf

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
# The pure core's assertions (core/core_assert.hpp) are live where PostgreSQL's own are.
ifneq (,$(findstring enable-cassert,$(shell $(PG_CONFIG) --configure)))
PG_CPPFLAGS += -DSC_CORE_ASSERTS
endif
include $(PGXS)

BITCODE_CXXFLAGS += $(SC_CXXFLAGS)

# Every object depends on the headers (the shared-memory layout lives in them): a stale object
# with an old layout would corrupt shared memory.
$(OBJS): $(wildcard $(srcdir)/src/*.hpp $(srcdir)/src/*/*.hpp)

# Out of the tree (make -f path/Makefile VPATH=path, as the Debian packages build), the folders of
# the objects are made first (when the Makefile is read: as prerequisites, make would find the
# source folders of the same names through VPATH).
ifdef VPATH
$(shell $(MKDIR_P) $(sort $(dir $(OBJS))))
endif
