// spi.cpp: the extension's own SQL, as the bootstrap superuser (see spi.hpp).
#include "spi.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace sc {

SpiSession ConnectSpi() {
  SpiSession session;
  GetUserIdAndSecContext(&session.user, &session.security_context);
  session.caller = CurrentMemoryContext;
  SPI_connect();
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
                         session.security_context | SECURITY_LOCAL_USERID_CHANGE);
  return session;
}

void FinishSpi(const SpiSession& session) {
  SPI_finish();
  Assert(CurrentMemoryContext == session.caller);
  SetUserIdAndSecContext(session.user, session.security_context);
}

SPIPlanPtr KeptPlan(SPIPlanPtr* plan, const char* sql, int nargs, const Oid* types,
                    bool custom_plans) {
  if (*plan == nullptr) {
    SPIPlanPtr prepared = SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types),
                                             custom_plans ? CURSOR_OPT_CUSTOM_PLAN : 0);
    if (prepared == nullptr)
      elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
    SPI_keepplan(prepared);
    *plan = prepared;
  }
  return *plan;
}

int PlannerSettingsOff(std::initializer_list<const char*> settings) {
  int nest_level = NewGUCNestLevel();
  for (const char* setting : settings)
    (void)set_config_option(setting, "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
  return nest_level;
}

void PlannerSettingsBack(int nest_level) { AtEOXact_GUC(true, nest_level); }

void AbortAndLog(MemoryContext context, const char* what, const char* detail) {
  MemoryContextSwitchTo(context);
  ErrorData* error = CopyErrorData();
  FlushErrorState();
  AbortCurrentTransaction();
  ereport(LOG, (errcode(error->sqlerrcode),
                errmsg("slotted_counter could not %s: %s", what, error->message),
                detail != nullptr ? errdetail("%s", detail) : 0));
  FreeErrorData(error);
}

}  // namespace sc
