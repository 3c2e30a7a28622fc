// kinds.cpp: the errors of a function called on a counter of the wrong kind (kinds.hpp).
#include "definitions/kinds.hpp"

extern "C" {
#include "utils/lsyscache.h"
}

namespace sc {

void ReportKind(const CounterDef& def, const char* function) {
  if (def.distinct)
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("counter \"%s\" counts distinct elements", def.name),
                    function != nullptr
                        ? errdetail("%s does not apply to a distinct counter.", function)
                        : 0,
                    errhint("Call sc_add() and sc_count() on it.")));
  ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                  errmsg("counter \"%s\" is a rate limiter", def.name),
                  function != nullptr
                      ? errdetail("%s does not apply to a rate limiter.", function)
                      : 0,
                  errhint("Call sc_throttle() on it.")));
  pg_unreachable();
}

void ReportKind(const CounterDef& def, FunctionCallInfo fcinfo) {
  char* name = nullptr;
  if (fcinfo->flinfo != nullptr && OidIsValid(fcinfo->flinfo->fn_oid))
    name = get_func_name(fcinfo->flinfo->fn_oid);
  ReportKind(def, name != nullptr ? psprintf("%s()", name) : nullptr);
}

void ReportNotLimiter(const CounterDef& def) {
  ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                  errmsg("counter \"%s\" is not a rate limiter", def.name),
                  errhint("A rate limiter is a counter created with a rate: sc_create(name, "
                          "durability, rate => ..., per => ..., burst => ...).")));
  pg_unreachable();
}

void ReportNotDistinct(const CounterDef& def) {
  ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                  errmsg("counter \"%s\" is not a distinct counter", def.name),
                  errhint("A distinct counter is a counter created with kind => 'distinct'.")));
  pg_unreachable();
}

}  // namespace sc
