// rank.cpp: the stored side of sc_rank (rank.hpp). A key that reads 0 is not ranked, as sc_top
// leaves it out: only keys with a value other than 0 count as above.
#include "functions/rank.hpp"

#include "definitions/expiry.hpp"
#include "spi.hpp"

namespace sc {

namespace {

// [bucketed]
SPIPlanPtr plan_above[2] = {nullptr, nullptr};
const char* const kAboveSql[2] = {
    "SELECT pg_catalog.count(*) FROM slotted_counter.key_values "
    "WHERE counter OPERATOR(pg_catalog.=) $1 AND bucket OPERATOR(pg_catalog.=) " SC_NO_BUCKET " "
    "AND value OPERATOR(pg_catalog.>) $2 AND value OPERATOR(pg_catalog.<>) 0 "
    "AND key OPERATOR(pg_catalog.<>) $3 AND written_at OPERATOR(pg_catalog.>) $4",
    "SELECT pg_catalog.count(*) FROM (SELECT key, pg_catalog.sum(value) AS s "
    "FROM slotted_counter.key_values WHERE counter OPERATOR(pg_catalog.=) $1 "
    "AND bucket OPERATOR(pg_catalog.>) " SC_NO_BUCKET " AND bucket OPERATOR(pg_catalog.>=) $4 "
    "AND bucket OPERATOR(pg_catalog.<) $5 GROUP BY key) x "
    "WHERE s OPERATOR(pg_catalog.>) $2 AND s OPERATOR(pg_catalog.<>) 0 "
    "AND key OPERATOR(pg_catalog.<>) $3"};

}  // namespace

int64 StoredKeysAbove(const CounterDef& def, int64 key, int64 value, BucketRange range) {
  bool bucketed = def.bucketed;
  if (bucketed) {
    range = RetainedRange(def, range);
    if (range.since == range.until) return 0;
  }
  static const Oid types[5] = {INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
  Datum args[5] = {Int32GetDatum(def.id), Int64GetDatum(value), Int64GetDatum(key),
                   TimestampTzGetDatum(bucketed ? range.since : KeyCutoff(def)),
                   TimestampTzGetDatum(range.until)};
  SpiSession spi = ConnectSpi();
  SPIPlanPtr plan = KeptPlan(&plan_above[bucketed], kAboveSql[bucketed], bucketed ? 5 : 4, types);
  int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1)
    elog(ERROR, "reading slotted_counter.key_values failed: %d", rc);
  bool isnull;
  int64 above = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
                                            &isnull));
  FinishSpi(spi);
  return above;
}

}  // namespace sc
