// counter_type.cpp: the slotted_counter type, a reference to a named counter.
//
// A value is the counter's name (a varlena, like text), bound to a counter when a call runs, as
// nextval('name') was before regclass: views, functions, prepared statements, stored columns and
// dumps that name a counter outlive a drop and re-create, and restore before the extension's
// tables are filled. Input checks only that the name could be a counter's (1 to NAMEDATALEN - 1
// bytes); output, equality and hashing are text's and bytea's internal functions (the SQL
// script). Casts to and from integer look the counter up.
#include "definitions/catalog.hpp"
#include "definitions/counter_ref.hpp"
#include "definitions/privileges.hpp"
#include "shared/shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(slotted_counter_in);
PG_FUNCTION_INFO_V1(slotted_counter_recv);
PG_FUNCTION_INFO_V1(slotted_counter_of_id);
PG_FUNCTION_INFO_V1(slotted_counter_id);
}

Node sc::text_key_call = {T_Invalid};

namespace sc {

void ReportKeyedByText(const CounterDef& def) {
  ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                  errmsg("counter \"%s\" is keyed by text", def.name),
                  errhint("Give its keys as text (an untyped literal, a text or varchar value), "
                          "and use sc_top_text, sc_incr_batch_text and sc_sum_keys_text.")));
}

}  // namespace sc

using namespace sc;

Datum slotted_counter_in(PG_FUNCTION_ARGS) {
  const char* name = PG_GETARG_CSTRING(0);
  int len = int(strlen(name));
  CheckNameSyntax(name, len);
  PG_RETURN_TEXT_P(cstring_to_text_with_len(name, len));
}

// As textrecv: the bytes arrive in the client's encoding and are converted.
Datum slotted_counter_recv(PG_FUNCTION_ARGS) {
  StringInfo buf = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
  int len;
  char* name = pq_getmsgtext(buf, buf->len - buf->cursor, &len);
  CheckNameSyntax(name, len);
  PG_RETURN_TEXT_P(cstring_to_text_with_len(name, len));
}

// integer::slotted_counter: the counter with that id. 42704 if none, and for a counter the role
// holds no privilege on: its name is as hidden as its row in slotted_counter.counters.
Datum slotted_counter_of_id(PG_FUNCTION_ARGS) {
  RequireShared();
  int32 id = PG_GETARG_INT32(0);
  const CounterDef* def = FindCounter(id);
  if (def == nullptr || !(HasPrivileges(def, kSelect) || HasPrivileges(def, kUpdate)))
    ReportUnknownCounter(psprintf("%d", id));
  PG_RETURN_TEXT_P(cstring_to_text(def->name));
}

// slotted_counter::integer: the id of the counter (42704 if none), to join
// slotted_counter.key_values and .deltas, which store ids.
Datum slotted_counter_id(PG_FUNCTION_ARGS) {
  RequireShared();
  PG_RETURN_INT32(CounterArgument(fcinfo, 0, 0)->id);
}
