// create_drop.cpp: the SQL functions that make and unmake counters and their values: sc_create,
// sc_drop, sc_drop_buckets.
//
// Each reads and checks its arguments, then calls the buffer, the catalog or the flusher (the
// entry points and what they share: functions.cpp). No C++ object with a destructor lives in these
// frames, so an ereport from anywhere below is safe.

#include "definitions/arguments.hpp"
#include "definitions/drop.hpp"
#include "definitions/guards.hpp"
#include "definitions/changes.hpp"
#include "definitions/counter_ref.hpp"
#include "definitions/limiters.hpp"
#include "functions/functions.hpp"
#include "functions/retention.hpp"
#include "spi.hpp"
#include "shared/flusher_slots.hpp"

namespace sc {

namespace {

void CheckCounterName(const char* name) {
  size_t len = strlen(name);
  CheckNameSyntax(name, int(len));
  if (strspn(name, "0123456789") == len)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid counter name \"%s\"", name),
                    errdetail("A name of digits only could be taken for a counter id.")));
}

void CheckDurability(const char* text) {
  if (strcmp(text, "buffered") != 0 && strcmp(text, "transactional") != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid durability \"%s\"", NameForMessage(text)),
                    errhint("Use 'transactional' or 'buffered'.")));
}

void CheckKeyType(const char* text) {
  if (strcmp(text, "bigint") != 0 && strcmp(text, "text") != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid key type \"%s\"", NameForMessage(text)),
                    errhint("Use 'bigint' or 'text'.")));
}

void CheckBucketWidth(const Interval* width) {
  BucketWidth checked;
  switch (MakeBucketWidth(width->month, width->day, width->time, &checked)) {
    case WidthError::kNone:
      return;
    case WidthError::kNotPositive:
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("bucket width must be positive")));
      break;
    case WidthError::kMixedUnits:
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("bucket width must be in one unit"),
                      errdetail("A width is a number of months (or years), of days, or of "
                                "hours, minutes and seconds, not a mix of them."),
                      errhint("Use for example '1 hour', '1 day', '7 days', '1 month' or "
                              "'1 year'.")));
      break;
  }
}

void CheckKind(const char* kind, bool limiter) {
  if (strcmp(kind, "count") != 0 && strcmp(kind, "limiter") != 0 && strcmp(kind, "distinct") != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid kind \"%s\"", NameForMessage(kind)),
                    errhint("Use 'count', 'distinct', or 'limiter' with a rate.")));
  if (limiter != (strcmp(kind, "limiter") == 0))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg(limiter ? "a counter with a rate is a limiter, not of kind \"%s\""
                                   : "a limiter needs a rate",
                           kind),
                    errhint("A rate limiter is made with rate, per and burst together.")));
}

// A distinct counter's precision.
void CheckDistinct(int log2m) {
  if (log2m < kMinLog2m || log2m > kSketchMaxLog2m)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("log2m must be between %d and %d", kMinLog2m, int(kSketchMaxLog2m)),
                    errdetail("A sketch has 2^log2m registers; its standard error is about "
                              "1.04 / sqrt(2^log2m): 0.8%% at 14, 1.6%% at 12.")));
}

}  // namespace

}  // namespace sc

using namespace sc;

Datum Create(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"name", "durability", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_create()");
  PreventCommandIfReadOnly("sc_create()");
  RequireArguments(fcinfo, names);
  bool if_not_exists = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
  bool retains = !PG_ARGISNULL(3);
  char* name = text_to_cstring(PG_GETARG_TEXT_PP(0));
  char* durability_text = text_to_cstring(PG_GETARG_TEXT_PP(1));
  CheckCounterName(name);
  CheckDurability(durability_text);
  bool bucketed = !PG_ARGISNULL(2);
  if (bucketed) CheckBucketWidth(PG_GETARG_INTERVAL_P(2));
  if (retains) CheckRetention(PG_GETARG_INTERVAL_P(3));
  if (PG_ARGISNULL(5))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key_type must not be null")));
  const char* key_type = text_to_cstring(PG_GETARG_TEXT_PP(5));
  CheckKeyType(key_type);
  // A rate limiter: its keys expire when full again (its tolerance), and it has no buckets.
  bool limiter = !PG_ARGISNULL(6);
  Interval tolerance;
  if (limiter) {
    if (bucketed || retains)
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("a rate limiter has no %s", bucketed ? "buckets" : "retention"),
                      errdetail("Its keys expire by themselves once they are full again.")));
    if (PG_ARGISNULL(7))
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("a rate needs per"),
                      errhint("Give the time the rate is per, for example per => '1 minute'.")));
    int64 burst = PG_ARGISNULL(8) ? 0 : PG_GETARG_INT64(8);
    tolerance = ToleranceInterval(CheckedLimit(PG_GETARG_INT64(6), PG_GETARG_INTERVAL_P(7),
                                               PG_ARGISNULL(8) ? nullptr : &burst));
    retains = true;
  } else if (!PG_ARGISNULL(7) || !PG_ARGISNULL(8)) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("%s needs a rate", PG_ARGISNULL(7) ? "burst" : "per"),
                    errhint("A rate limiter is made with rate, per and burst together.")));
  }
  // What its keys hold: numbers, a limiter's state (given by its rate) or sketches.
  const char* kind = PG_ARGISNULL(9) ? (limiter ? "limiter" : "count")
                                     : text_to_cstring(PG_GETARG_TEXT_PP(9));
  CheckKind(kind, limiter);
  bool distinct = strcmp(kind, "distinct") == 0;
  int log2m = PG_ARGISNULL(10) ? kDefaultLog2m : PG_GETARG_INT32(10);
  if (!PG_ARGISNULL(10) && !distinct)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("only a distinct counter has a log2m"),
                    errhint("Create it with kind => 'distinct'.")));
  if (distinct) CheckDistinct(log2m);
  // As CREATE SCHEMA: the database's CREATE privilege. The creator owns the counter.
  if (DatabaseAclCheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied to create counter \"%s\"", name),
                    errdetail("Creating a counter needs the CREATE privilege on database "
                              "\"%s\".", get_database_name(MyDatabaseId))));
  EnsureFlusher();

  // The extension created again in the transaction that dropped it numbers its counters from 1
  // again, while the dropped counters' values, and every cache of their ids, stay until the drop
  // commits (and come back if it does not): a counter made now would share them.
  if (ExtensionDroppedInThisTransaction())
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("cannot create a counter in the transaction that dropped the extension"),
                    errhint("Commit DROP EXTENSION slotted_counter first.")));
  Oid types[10] = {TEXTOID, TEXTOID,     INTERVALOID, INTERVALOID, TEXTOID,
                   INT8OID, INTERVALOID, INT8OID,     TEXTOID,     INT2OID};
  Datum retain = limiter ? PointerGetDatum(&tolerance) : retains ? PG_GETARG_DATUM(3) : (Datum)0;
  // The burst as given, or the rate.
  Datum burst = !limiter ? (Datum)0 : PG_ARGISNULL(8) ? PG_GETARG_DATUM(6) : PG_GETARG_DATUM(8);
  Datum args[10] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                    retain,             CStringGetTextDatum(key_type),
                    limiter ? PG_GETARG_DATUM(6) : (Datum)0,
                    limiter ? PG_GETARG_DATUM(7) : (Datum)0,
                    burst,              CStringGetTextDatum(kind),
                    Int16GetDatum(int16(log2m))};
  char l = limiter ? ' ' : 'n';
  char nulls[10] = {' ', ' ', bucketed ? ' ' : 'n', retains ? ' ' : 'n', ' ', l, l, l, ' ',
                    distinct ? ' ' : 'n'};
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(
      "INSERT INTO slotted_counter.counters "
      "(id, name, durability, bucket, retain, key_type, rate, per, burst, kind, log2m) "
      "VALUES (pg_catalog.nextval('slotted_counter.counters_id_seq'), $1, $2, $3, $4, $5, $6, $7, "
      "$8, $9, $10) ON CONFLICT (name) DO NOTHING RETURNING id",
      10, types, args, nulls, false, 1);
  if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "inserting the counter failed: %d", rc);
  bool created = SPI_processed == 1;
  int32 id = 0;
  if (created) {
    bool isnull;
    id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  }
  FinishSpi(spi);
  if (!created) {
    // As CREATE TABLE IF NOT EXISTS: the existing counter stays as it is, whatever its definition.
    if (if_not_exists) {
      ereport(NOTICE, (errcode(ERRCODE_DUPLICATE_OBJECT),
                       errmsg("counter \"%s\" already exists, skipping", name)));
      PG_RETURN_DATUM(CounterResult(name));
    }
    ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                    errmsg("counter \"%s\" already exists", name)));
  }
  // The creator owns it: the guard holds its owner and privileges (guards.cpp).
  CreateGuard(name, id, GetUserId());
  NoteCounterCreated(id);
  PG_RETURN_DATUM(CounterResult(name));
}

Datum Drop(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_drop()");
  PreventCommandIfReadOnly("sc_drop()");
  RequireArguments(fcinfo, names);
  // As DROP ... IF EXISTS, a missing counter is a notice.
  bool if_exists = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
  if (if_exists) {
    const char* shown;
    if (FindCounterArgument(fcinfo, 0, &shown) == nullptr) {
      ereport(NOTICE, (errcode(ERRCODE_UNDEFINED_OBJECT),
                       errmsg("counter \"%s\" does not exist, skipping", shown)));
      PG_RETURN_VOID();
    }
  }
  CounterDef def = *CounterArgument(fcinfo, 0, kOwn);
  // CASCADE: any role may make an object of its own depend on a guard (a column's DEFAULT
  // nextval() of it, a view of it), which would otherwise keep the owner from dropping the
  // counter. Those go with it, each with core's NOTICE, as DROP SEQUENCE ... CASCADE drops them.
  if (!DropCounter(def, true, DROP_CASCADE)) {  // dropped by a transaction that committed meanwhile
    if (!if_exists) ReportUnknownCounter(def.name);
    ereport(NOTICE, (errcode(ERRCODE_UNDEFINED_OBJECT),
                     errmsg("counter \"%s\" does not exist, skipping", def.name)));
  }
  PG_RETURN_VOID();
}

Datum DropBuckets(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "before", nullptr};
  RequireShared();
  RequireArguments(fcinfo, names);
  PreventCommandDuringRecovery("sc_drop_buckets()");
  PreventCommandIfReadOnly("sc_drop_buckets()");
  CounterDef def = *CounterArgument(fcinfo, 0, kUpdate);
  if (def.limiter) ReportKind(def, "sc_drop_buckets()");
  if (!def.bucketed) ReportNoBuckets(def, "Buckets to drop");
  PG_RETURN_INT64(DropBuckets(def, PG_GETARG_TIMESTAMPTZ(1)));
}
