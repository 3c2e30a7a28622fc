# slotted_counter: PGXS build. C++17; the server is built with LLVM, so every .cpp is also
# compiled to bitcode by clang and needs the same flags.

MODULE_big = slotted_counter
OBJS = \
	src/module.o \
	src/shmem.o \
	src/counter_table.o \
	src/protocol.o \
	src/time_bucket.o \
	src/catalog.o \
	src/counter_type.o \
	src/buffer.o \
	src/batch.o \
	src/bucketed.o \
	src/functions.o \
	src/flush.o \
	src/write_through.o \
	src/worker.o \
	src/flusher_slots.o \
	src/stats.o \
	src/xact.o \
	src/changes.o \
	src/transactional.o \
	src/key_arrays.o \
	src/attach.o \
	src/attach_run.o \
	src/privileges.o \
	src/spi.o \
	src/databases.o \
	src/saved_values.o \
	src/retention.o \
	src/request_ids.o \
	src/once.o

# The router's extension (a data node never loads it): SQL and PL/Proxy, and one small library,
# built at the top (as PGXS installs a module, bitcode included, by its path) from src/.
MODULES = slotted_counter_proxy
vpath slotted_counter_proxy.cpp src

EXTENSION = slotted_counter slotted_counter_proxy
DATA = sql/slotted_counter--1.0.sql sql/slotted_counter_proxy--0.1.sql
PGFILEDESC = "slotted_counter - hot counters without row locks"

# The C++ rules are the compiler's: no exceptions, no RTTI, every warning of -Wall -Wextra (but
# unused parameters, which PostgreSQL's own inline functions have); errors with WERROR=1, as the
# test command builds.
SC_CXXFLAGS = -std=c++17 -Wno-register -fno-exceptions -fno-rtti -Wall -Wextra \
	-Wno-unused-parameter $(if $(WERROR),-Werror)
PG_CXXFLAGS = $(SC_CXXFLAGS)
# -Bsymbolic: the library's references to its own symbols bind to its own definitions. Without
# it a second copy of the library loaded into a backend (the file replaced by an upgrade while the
# server runs) would bind to the preloaded copy's globals, its shared-memory pointer among them,
# and use them with its own layout.
SHLIB_LINK = -lstdc++ -Wl,-Bsymbolic

# pg_regress and the isolation tester start their own instance with the library preloaded.
REGRESS = setup type api errors buffer transactional batch set bounded retention once top top_scale \
	attach buckets privileges placeholders
REGRESS_OPTS = --temp-instance=tmp_check --temp-config=test/regress.conf
ISOLATION = incr_interleave drop_while_incr txn_overflow txn_interleave set_concurrent \
	bucket_drop revoke drop_extension bounded_concurrent once_concurrent top_concurrent
ISOLATION_OPTS = --temp-instance=tmp_check_iso --temp-config=test/isolation.conf

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

BITCODE_CXXFLAGS += $(SC_CXXFLAGS)

# Every object depends on the headers (the shared-memory layout lives in them): a stale object
# with an old layout would corrupt shared memory.
$(OBJS): $(wildcard src/*.hpp)
