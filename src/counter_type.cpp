// counter_type.cpp: the slotted_counter type, a reference to a named counter, like regclass.
//
// Stored as the counter's integer id. Text input is a name (or an id); output is the name, or the
// bare id of a counter that no longer exists. Lookups go through the backend's cache
// (catalog.cpp), so a prepared statement's text parameter costs no catalog query per call.
#include "catalog.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(slotted_counter_in);
PG_FUNCTION_INFO_V1(slotted_counter_out);
PG_FUNCTION_INFO_V1(slotted_counter_recv);
PG_FUNCTION_INFO_V1(slotted_counter_send);
}

using namespace sc;

Datum slotted_counter_in(PG_FUNCTION_ARGS) {
  const char* text = PG_GETARG_CSTRING(0);
  RequireShared();
  size_t len = strlen(text);
  int32 id;
  if (len > 0 && len <= 10 && strspn(text, "0123456789") == len) {
    long parsed = strtol(text, nullptr, 10);
    id = parsed <= PG_INT32_MAX && FindCounter(int32(parsed)) != nullptr ? int32(parsed) : -1;
  } else {
    id = FindCounterByName(text);
  }
  if (id < 0) ReportUnknownCounter(text);
  PG_RETURN_INT32(id);
}

Datum slotted_counter_out(PG_FUNCTION_ARGS) {
  int32 id = PG_GETARG_INT32(0);
  RequireShared();
  const CounterDef* def = FindCounter(id);
  PG_RETURN_CSTRING(def != nullptr ? pstrdup(def->name) : psprintf("%d", id));
}

Datum slotted_counter_recv(PG_FUNCTION_ARGS) {
  StringInfo buf = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
  PG_RETURN_INT32(pq_getmsgint(buf, 4));
}

Datum slotted_counter_send(PG_FUNCTION_ARGS) {
  StringInfoData buf;
  pq_begintypsend(&buf);
  pq_sendint32(&buf, PG_GETARG_INT32(0));
  PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}
