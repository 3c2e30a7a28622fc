// read.cpp: reads: one key, many keys (the resident ones from shared memory, the others in one
// query), the resident values of an unbucketed counter, the candidates of sc_top, the total of a
// counter summed over its keys (BufferTotal), the resident buckets of sc_series, and what the
// buffer holds beyond the rows, per bucket, for sc_total (BufferUnflushed). Scans of the buffer
// take each partition lock SHARED in turn (core/protocol.hpp: ForEachResident).
#include <algorithm>

#include "buffer/buffer.hpp"
#include "buffer/buffer_internal.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"

namespace sc {

namespace {

// The value of k if it is resident (no lock but the partition's SHARED, core/protocol.hpp).
// Always inlined: sc_sum's hot path is this probe, and the compiler would call it otherwise.
// A key that has expired for cutoff reads 0 (definitions/expiry.hpp).
pg_attribute_always_inline Probe ReadResident(const CounterKey& k, uint32 hash, int64* value,
                                              int64 cutoff) {
  return likely(cutoff == kNeverExpires) ? Table().ReadIfResident(k, hash, value)
                                         : Table().ReadIfResident(k, hash, value, cutoff);
}

}  // namespace

int64 BufferRead(const CounterDef& counter, int64 key, int64 bucket, bool load, uint64* row) {
  CounterKey k{MyDatabaseId, counter.id, key, bucket};
  uint32 hash = HashCounterKey(k);
  int64 cutoff = KeyCutoff(counter);
  int64 value;
  if (row != nullptr) *row = 0;
  if (ReadResident(k, hash, &value, cutoff) == Probe::kFound) return value;
  CounterDef def = counter;  // as in BufferIncrement
  bool transactional = def.durability == Durability::kTransactional;
  int waits = 0;
  for (;;) {
    Probe probe = ReadResident(k, hash, &value, cutoff);
    if (probe == Probe::kFound) return value;
    if (probe == Probe::kLoading) {
      WaitForLoad(&waits);
      continue;
    }
    if (!load || !MakeResident(&def, k, hash, &waits)) {
      int64 stamp;
      value = ReadStoredValue(k, transactional, false, &stamp, row);
      return CounterTable::Expired(stamp, cutoff) ? 0 : value;
    }
  }
}

// [transactional]: the stored values of many unbucketed keys, in one snapshot; 0 for a key last
// written at or before the cutoff $3. The deltas (a table without an index, read while loads must:
// core/fold_epochs.hpp) are summed per key in one pass and joined: a scan of them per key made a
// read of n keys n passes over every unfolded delta (a million keys after a large commit: minutes).
SPIPlanPtr plan_stored_many[2] = {nullptr, nullptr};
const char* const kStoredManySql[2] = {
    "SELECT k.key, CASE WHEN x.w OPERATOR(pg_catalog.>) $3 THEN x.v ELSE 0 END "
    "FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS k(key, n) "
    "LEFT JOIN LATERAL (SELECT t.value AS v, t.written_at AS w FROM slotted_counter.key_values t "
    "WHERE t.counter OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) k.key "
    "AND t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ") x ON true ORDER BY k.n",
    "SELECT k.key, CASE WHEN GREATEST(x.w, y.w) OPERATOR(pg_catalog.>) $3 "
    "THEN (COALESCE(x.v, 0) OPERATOR(pg_catalog.+) COALESCE(y.v, 0))::pg_catalog.int8 ELSE 0 END "
    "FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS k(key, n) "
    "LEFT JOIN LATERAL (SELECT t.value AS v, t.written_at AS w FROM slotted_counter.key_values t "
    "WHERE t.counter OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) k.key "
    "AND t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ") x ON true "
    "LEFT JOIN (SELECT d.key, pg_catalog.sum(d.delta) AS v, pg_catalog.max(d.written_at) AS w "
    "FROM slotted_counter.deltas d WHERE d.counter OPERATOR(pg_catalog.=) $1 "
    "AND d.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " GROUP BY d.key) y "
    "ON y.key OPERATOR(pg_catalog.=) k.key ORDER BY k.n"};

void BufferReadMany(const CounterDef& def, const int64* keys, int n, int64* values) {
  bool transactional = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  int64 cutoff = KeyCutoff(def);
  // Keys in the buffer are read from shared memory; the others with one query.
  auto* missing = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  auto* slot_of = static_cast<int*>(palloc(sizeof(int) * (n + 1)));
  int nmissing = 0;
  for (int i = 0; i < n; i++) {
    CounterKey k{MyDatabaseId, def.id, keys[i], kNoBucket};
    uint32 hash = HashCounterKey(k);
    int waits = 0;
    for (;;) {
      Probe probe = ReadResident(k, hash, &values[i], cutoff);
      if (probe == Probe::kMissing) {
        slot_of[nmissing] = i;
        missing[nmissing++] = Int64GetDatum(keys[i]);
      }
      if (probe != Probe::kLoading) break;
      WaitForLoad(&waits);
    }
  }
  if (nmissing == 0) return;
  SpiSession spi = ConnectSpi();
  static const Oid types[3] = {INT4OID, INT8ARRAYOID, TIMESTAMPTZOID};
  SPIPlanPtr plan =
      KeptPlan(&plan_stored_many[transactional], kStoredManySql[transactional], 3, types);
  Datum args[3] = {Int32GetDatum(def.id),
                   PointerGetDatum(
                       construct_array(missing, nmissing, INT8OID, 8, true, TYPALIGN_DOUBLE)),
                   TimestampTzGetDatum(cutoff)};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 0);
  if (rc != SPI_OK_SELECT || SPI_processed != uint64(nmissing))
    elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  for (int j = 0; j < nmissing; j++) {
    bool isnull;
    values[slot_of[j]] =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 2, &isnull));
  }
  FinishSpi(spi);
}

// [transactional]: the n largest stored values of the counter other than 0 (a key that reads 0,
// expired for the cutoff $3 or not, is not ranked, as sc_series leaves out such buckets); those
// of resident keys are left out afterwards (a key's stored value is stale while it is resident).
SPIPlanPtr plan_top_stored[2] = {nullptr, nullptr};
const char* const kTopStoredSql[2] = {
    "SELECT key, value FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " AND value OPERATOR(pg_catalog.<>) 0 "
    "AND written_at OPERATOR(pg_catalog.>) $3 ORDER BY value DESC, key LIMIT $2",
    "SELECT key, pg_catalog.sum(v)::pg_catalog.int8 AS value FROM ("
    "SELECT key, value AS v, written_at AS w FROM slotted_counter.key_values "
    "WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " UNION ALL "
    "SELECT key, delta, written_at FROM slotted_counter.deltas "
    "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ") s "
    "GROUP BY key HAVING pg_catalog.sum(v) OPERATOR(pg_catalog.<>) 0 "
    "AND pg_catalog.max(w) OPERATOR(pg_catalog.>) $3 ORDER BY 2 DESC, key LIMIT $2"};

namespace {

// Every resident key of an unbucketed counter of this database with the value a read sees now
// (0 for an expired key: cutoff), in a palloc'd array; returns how many. Entries linked during
// the scan can fill the array; then it scans again with room for all of them (a key left out
// would be reported with its stored value, not its exact one).
int64 ResidentValues(const CounterDef& def, int64 cutoff, KeyValue** out) {
  auto table = Table();
  int64 space = int64(table.table().used()) + 64;
  for (;;) {
    auto* resident = static_cast<KeyValue*>(
        MemoryContextAllocHuge(CurrentMemoryContext, sizeof(KeyValue) * space));
    int64 nresident = 0;
    bool full = false;
    for (uint32 p = 0; p < kPartitions && !full; p++) {
      CHECK_FOR_INTERRUPTS();
      table.ForEachResident(p, [&](uint32, const Entry& e) {
        if (e.id.db != MyDatabaseId || e.id.counter != def.id || e.id.bucket != kNoBucket) return;
        if (nresident == space) {
          full = true;
          return;
        }
        resident[nresident++] = KeyValue{e.id.key, CounterTable::ReadValue(e, cutoff)};
      });
    }
    if (!full) {
      *out = resident;
      return nresident;
    }
    pfree(resident);
    space = int64(table.table().capacity()) + 1;
  }
}

}  // namespace

int64 BufferTopCandidates(const CounterDef& def, int64 n, int64 extra, KeyValue** out) {
  bool transactional = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  int64 cutoff = KeyCutoff(def);
  KeyValue* resident;
  int64 nresident = ResidentValues(def, cutoff, &resident);
  auto* resident_keys = static_cast<int64*>(palloc(sizeof(int64) * (nresident + 1)));
  for (int64 i = 0; i < nresident; i++) resident_keys[i] = resident[i].key;
  std::sort(resident_keys, resident_keys + nresident);

  // The n largest stored values of the other keys are among the n + nresident largest stored.
  SpiSession spi = ConnectSpi();
  static const Oid types[3] = {INT4OID, INT8OID, TIMESTAMPTZOID};
  SPIPlanPtr plan = KeptPlan(&plan_top_stored[transactional], kTopStoredSql[transactional], 3,
                             types);
  Datum args[3] = {Int32GetDatum(def.id), Int64GetDatum(n + nresident),
                   TimestampTzGetDatum(cutoff)};
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 0);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  int64 nstored = int64(SPI_processed);
  // The result outlives the session: in the caller's context (SPI_finish frees SPI's).
  auto* all = static_cast<KeyValue*>(MemoryContextAllocHuge(
      spi.caller, sizeof(KeyValue) * (nresident + Min(nstored, n) + extra + 1)));
  // A resident key that reads 0 is not ranked, but its stored row is stale: it stays in
  // resident_keys, which leaves that row out below.
  int64 count = 0;
  for (int64 i = 0; i < nresident; i++)
    if (resident[i].value != 0) all[count++] = resident[i];
  for (int64 j = 0, taken = 0; j < nstored && taken < n; j++) {
    if ((j & 4095) == 0) CHECK_FOR_INTERRUPTS();
    bool isnull;
    HeapTuple tup = SPI_tuptable->vals[j];
    int64 key = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
    if (std::binary_search(resident_keys, resident_keys + nresident, key)) continue;
    all[count++] = KeyValue{key, DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2,
                                                             &isnull))};
    taken++;
  }
  FinishSpi(spi);
  *out = all;
  return count;
}

// [transactional]: the sum of the stored values of the counter's keys that are not resident ($2)
// and not expired for the cutoff $3.
SPIPlanPtr plan_total_stored[2] = {nullptr, nullptr};
const char* const kTotalStoredSql[2] = {
    "SELECT COALESCE(pg_catalog.sum(t.value), 0)::pg_catalog.int8 "
    "FROM slotted_counter.key_values t "
    "WHERE t.counter OPERATOR(pg_catalog.=) $1 "
    "AND t.bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " "
    "AND t.written_at OPERATOR(pg_catalog.>) $3 AND NOT EXISTS (SELECT FROM "
    "pg_catalog.unnest($2::pg_catalog.int8[]) AS r(key) WHERE r.key OPERATOR(pg_catalog.=) t.key)",
    "SELECT COALESCE(pg_catalog.sum(s.v), 0)::pg_catalog.int8 FROM (SELECT key, "
    "pg_catalog.sum(v) AS v, pg_catalog.max(w) AS w FROM (SELECT key, value AS v, written_at AS w "
    "FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " "
    "UNION ALL SELECT key, delta, written_at FROM slotted_counter.deltas "
    "WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET ") u GROUP BY key) s "
    "WHERE s.w OPERATOR(pg_catalog.>) $3 AND NOT EXISTS (SELECT FROM "
    "pg_catalog.unnest($2::pg_catalog.int8[]) AS r(key) WHERE r.key OPERATOR(pg_catalog.=) s.key)"};

int128 BufferTotal(const CounterDef& def) {
  bool transactional = def.durability == Durability::kTransactional && StoredReadsNeedDeltas();
  int64 cutoff = KeyCutoff(def);
  KeyValue* resident;
  int64 nresident = ResidentValues(def, cutoff, &resident);
  auto* keys = static_cast<Datum*>(palloc(sizeof(Datum) * (nresident + 1)));
  // Wide enough for any number of bigints a buffer holds: only the total must fit a bigint.
  int128 sum = 0;
  for (int64 i = 0; i < nresident; i++) {
    keys[i] = Int64GetDatum(resident[i].key);
    sum += resident[i].value;
  }
  SpiSession spi = ConnectSpi();
  static const Oid types[3] = {INT4OID, INT8ARRAYOID, TIMESTAMPTZOID};
  SPIPlanPtr plan = KeptPlan(&plan_total_stored[transactional], kTotalStoredSql[transactional],
                             3, types);
  Datum args[3] = {Int32GetDatum(def.id),
                   PointerGetDatum(construct_array(keys, int(nresident), INT8OID, 8, true,
                                                   TYPALIGN_DOUBLE)),
                   TimestampTzGetDatum(cutoff)};
  // A hashed anti-join, whatever the statistics say of the counter's rows (as bucketed.cpp's).
  int nest_level = PlannerSettingsOff({"enable_nestloop"});
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 1);
  PlannerSettingsBack(nest_level);
  if (rc != SPI_OK_SELECT || SPI_processed != 1)
    elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  bool isnull;
  int64 stored = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                             &isnull));
  FinishSpi(spi);
  return sum + stored;
}

int64 BufferResidentBuckets(const CounterDef& def, const int64* keys, int nkeys, int64 since,
                            int64 until, BucketValue** out) {
  CounterTable* t = shared->table;
  // The partitions to scan, in order, each once.
  auto* partitions = static_cast<uint32*>(palloc(sizeof(uint32) * kPartitions));
  int npartitions = 0;
  if (keys == nullptr) {
    for (uint32 p = 0; p < kPartitions; p++) partitions[npartitions++] = p;
  } else {
    bool wanted[kPartitions] = {};
    for (int i = 0; i < nkeys; i++)
      wanted[CounterTable::PartitionOf(
          HashCounterKey(CounterKey{MyDatabaseId, def.id, keys[i], kNoBucket}))] = true;
    for (uint32 p = 0; p < kPartitions; p++)
      if (wanted[p]) partitions[npartitions++] = p;
  }
  // Entries linked during the scan can fill the array; then scan again with twice the room.
  int64 space = keys == nullptr ? int64(t->used()) + 64 : 64;
  for (;;) {
    auto* values = static_cast<BucketValue*>(
        MemoryContextAllocHuge(CurrentMemoryContext, sizeof(BucketValue) * space));
    int64 n = 0;
    bool full = false;
    for (int i = 0; i < npartitions && !full; i++) {
      Table().ForEachResident(partitions[i], [&](uint32, const Entry& e) {
        if (full || e.id.db != MyDatabaseId || e.id.counter != def.id ||
            e.id.bucket < since || e.id.bucket >= until ||
            (keys != nullptr && !std::binary_search(keys, keys + nkeys, e.id.key)))
          return;
        if (n == space) {
          full = true;
          return;
        }
        values[n++] = BucketValue{e.id.key, e.id.bucket, e.value.load(std::memory_order_acquire)};
      });
    }
    if (!full) {
      *out = values;
      return n;
    }
    pfree(values);
    space = Min(space * 2, int64(t->capacity()) + 1);
  }
}

namespace {

Unflushed NewUnflushed(int64 space) {
  return Unflushed{
      static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * space)),
      static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * space)),
      static_cast<int64*>(MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * space)),
      0};
}

bool InRange(int64 bucket, int64 since, int64 until) {
  return bucket == kNoBucket || (bucket >= since && bucket < until);
}

// The same from every key entry: a pass over the buffer. For a sum entry that wrapped around.
Unflushed ScanUnflushed(const CounterDef& def, int64 since, int64 until) {
  // Entries linked during the scan can fill the arrays; then scan again with twice the room.
  int64 space = 64;
  for (;;) {
    Unflushed out = NewUnflushed(space);
    bool full = false;
    for (uint32 p = 0; p < kPartitions && !full; p++) {
      Table().ForEachResident(p, [&](uint32, const Entry& e) {
        if (full || e.id.db != MyDatabaseId || e.id.counter != def.id ||
            !InRange(e.id.bucket, since, until))
          return;
        int64 flushed = e.flushed.load(std::memory_order_acquire);
        int64 value = e.value.load(std::memory_order_acquire);
        if (value == flushed) return;
        if (out.n == space) {
          full = true;
          return;
        }
        out.buckets[out.n] = e.id.bucket;
        out.values[out.n] = value;
        out.flushed[out.n++] = flushed;
      });
    }
    if (!full) return out;
    pfree(out.buckets);
    pfree(out.values);
    pfree(out.flushed);
    space = Min(space * 2, int64(shared->table->capacity()) + 1);
  }
}

}  // namespace

Unflushed BufferUnflushed(const CounterDef& def, int64 since, int64 until) {
  // The sum entries of the counter: a chain in each partition (counter_table.hpp). Nothing is
  // allocated under a partition lock: arrays too small are made twice as large, and read again.
  for (int64 space = 2 * kPartitions;; space *= 2) {
    Unflushed out = NewUnflushed(space);
    bool wrapped = false, full = false;
    for (uint32 p = 0; p < kPartitions && !full; p++) {
      Table().ForEachSum(MyDatabaseId, def.id, p, [&](const Entry& sum) {
        if (full || !InRange(sum.id.bucket, since, until)) return;
        if (out.n == space) {
          full = true;
          return;
        }
        wrapped = wrapped || sum.sum_wrapped.load(std::memory_order_acquire) != 0;
        out.buckets[out.n] = sum.id.bucket;
        out.values[out.n] = sum.value.load(std::memory_order_acquire);
        out.flushed[out.n++] = 0;
      });
    }
    if (wrapped) return ScanUnflushed(def, since, until);
    if (!full) return out;
    pfree(out.buckets);
    pfree(out.values);
    pfree(out.flushed);
  }
}

}  // namespace sc
