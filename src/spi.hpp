// spi.hpp: how the extension runs SQL on its own tables.
//
// As the bootstrap superuser, whoever called: a role needs no grant on slotted_counter.*, and the
// row-level security that hides other roles' counters from users does not hide them from the
// extension's own reads (a load that saw no row would count from 0). Every statement run this way
// is the extension's own, schema-qualified, on tables that no user can add triggers, rules or
// indexes to, so no code of a user runs with those rights. An error inside restores the caller's
// identity with the (sub)transaction's abort.
#pragma once

#include <initializer_list>

#include "core/counter_table.hpp"
#include "pg.hpp"

// The bucket of an unbucketed counter's keys in the tables (key_values, deltas, requests,
// counter_totals): never NULL, so that a bucket is part of a primary key. kNoBucket in C++.
#define SC_NO_BUCKET "'-infinity'::pg_catalog.timestamptz"

namespace sc {

static_assert(kNoBucket == DT_NOBEGIN, "an unbucketed key's bucket is stored as -infinity");

// Between ConnectSpi and FinishSpi, CurrentMemoryContext is SPI's procedure context, which
// SPI_finish deletes: whatever must outlive the session (a result handed to the caller) is
// allocated in `caller`, the context that was current before, never in CurrentMemoryContext.
struct SpiSession {
  Oid user;
  int security_context;
  MemoryContext caller;
};

// SPI_connect, then the superuser's identity until FinishSpi.
SpiSession ConnectSpi();
// SPI_finish, then the identity ConnectSpi found.
void FinishSpi(const SpiSession& session);

// How a kept plan is chosen at each execution: PostgreSQL's choice by cost (the first five
// executions planned with their parameters' values, then the generic plan if it costs little
// more); kCustom: planned again at every execution, for statements over arrays of many rows,
// whose generic plan would assume 10 rows per array and keep the table sizes of the day it was
// made (a nested loop over all of slotted_counter.key_values per row, once the table had
// grown); kGeneric: planned once, for statements whose every plan probes unique indexes, where
// planning would cost more than running (a text key's id: about 2 ms against 0.1).
enum class PlanChoice { kByCost, kCustom, kGeneric };

// The plan of `sql`, prepared once per backend and kept in *plan.
SPIPlanPtr KeptPlan(SPIPlanPtr* plan, const char* sql, int nargs, const Oid* types,
                    PlanChoice choice = PlanChoice::kByCost);

// Turns the named planner settings (enable_seqscan, ...) off until PlannerSettingsBack, as a
// function's SET clause does; an error restores them with the (sub)transaction's abort. For the
// statements whose right plan is an index scan whatever the statistics say: a table analyzed
// while it was empty, or grown since, makes a sequential scan look cheapest.
int PlannerSettingsOff(std::initializer_list<const char*> settings);
void PlannerSettingsBack(int nest_level);

// In a worker's PG_CATCH: back to `context`, the error taken and the transaction aborted, then
// logged as "slotted_counter could not <what>: <message>" (with detail, if any), at LOG.
void AbortAndLog(MemoryContext context, const char* what, const char* detail = nullptr);

// Runs body() in an internal subtransaction (as a PL/pgSQL block with an EXCEPTION clause does):
// returns nullptr if it completed, or else the error it raised, copied into the caller's memory
// context after the subtransaction was rolled back and the error state cleared, for the caller
// to rethrow (ReThrowError), log (ThrowErrorData at LOG) or drop (FreeErrorData). body must hold
// nothing that needs a destructor: an error leaves its frame by longjmp.
template <typename Body>
ErrorData* InSubtransaction(Body&& body) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  ErrorData* volatile error = nullptr;
  BeginInternalSubTransaction(nullptr);
  MemoryContextSwitchTo(context);
  PG_TRY();
  {
    body();
    ReleaseCurrentSubTransaction();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  CurrentResourceOwner = owner;
  return error;
}

// ---- one statement over many (counter, key, bucket, value, written_at) rows, as five arrays ----

// SQL arrays of n values (palloc'd): int4[], int8[], timestamptz[] (of times or of buckets:
// kNoBucket is '-infinity').
Datum Int4Array(const int32* values, int n);
Datum Int8Array(const int64* values, int n);
Datum TimestampArray(const int64* values, int n);

// The plan of sql, whose $1..$5 are int4[], int8[], timestamptz[], int8[], timestamptz[],
// prepared once and kept in *plan. Inside SPI.
SPIPlanPtr KeyArrayPlan(SPIPlanPtr* plan, const char* sql);

// Executes plan with the n rows as its five arrays (stamps may be nullptr, for a statement that
// does not read $5, then NULL); fails unless SPI answers expected_rc. Inside SPI.
void ExecuteKeyArrays(SPIPlanPtr plan, int expected_rc, int n, const int32* counters,
                      const int64* keys, const int64* buckets, const int64* values,
                      const int64* stamps);

// Runs sql with the latest snapshot rather than the transaction's: a write that follows a lock
// must see every row committed before the lock was granted, at any isolation level (the rows
// a flush wrote before a drop could lock its counter). Returns SPI's code. Inside SPI.
int ExecuteWithLatestSnapshot(const char* sql, int nargs, Oid* types, Datum* args);

}  // namespace sc
