// slotted_counter_proxy: the router's one piece of C++.
//
// PL/Proxy sends each routed call to its data node as a statement of its own, which the node
// commits at once: there is no two-phase commit. A transactional counter's increment made through
// the router inside a transaction block would therefore stay counted if that block rolled back.
// Whether the caller is inside a block (BEGIN, or several statements in one simple query) is
// known only to the server's C API, so the refusal lives here; everything else of the router is
// SQL and PL/Proxy (sql/slotted_counter_proxy--0.1.sql).
//
// This library is loaded only by the router's functions, never preloaded, and keeps no state
// but its setting.

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(sc_proxy_check_autocommit);
}

namespace {

bool allow_transaction_block = false;

}  // namespace

void _PG_init(void) {
  DefineCustomBoolVariable(
      "slotted_counter_proxy.allow_transaction_block",
      "Lets the router write transactional counters inside a transaction block.",
      "Each such write commits on its data node at once, whatever the block does later.",
      &allow_transaction_block, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("slotted_counter_proxy");
}

// sc_proxy_check_autocommit(counter text): raises 25001 when the caller is inside a transaction
// block and has not asked for it with slotted_counter_proxy.allow_transaction_block.
extern "C" Datum sc_proxy_check_autocommit(PG_FUNCTION_ARGS) {
  if (!IsTransactionBlock() || allow_transaction_block) PG_RETURN_VOID();
  const char* counter = PG_ARGISNULL(0) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(0));
  ereport(ERROR,
          (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
           errmsg("transactional counter \"%s\" cannot be written through the router inside a "
                  "transaction block",
                  counter),
           errdetail("The router sends the write to its data node, which commits it at once: a "
                     "later rollback of this transaction would not undo it."),
           errhint("Write it outside a transaction block, or SET LOCAL "
                   "slotted_counter_proxy.allow_transaction_block = on to accept that.")));
  PG_RETURN_VOID();
}
