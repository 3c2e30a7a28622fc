// privileges.cpp: who may do what with a counter, like a sequence.
//
// A counter's owner and grantees are those of its guard, a sequence (guards.cpp): SELECT reads
// it (sc_sum, sc_series, sc_top, its rows in the extension's tables), UPDATE writes it (sc_incr,
// sc_set, sc_drop_buckets). The owner, its members and superusers hold both and may also drop,
// attach, detach, grant, revoke and give the counter away. A grant to PUBLIC is to every role; a
// grant to a role is to its members, as has_privs_of_role counts them. A new counter is private
// to its owner, but for the owner's default privileges on sequences in the guards' schema.
//
// Each cached definition (catalog.cpp) keeps the privileges of the last role that used it, so the
// check on the hot path is a comparison. A change to the guard (sc_grant, sc_revoke,
// sc_alter_owner, or GRANT, REVOKE, REASSIGN OWNED on the sequence) reaches every session as a
// relation's invalidation, which moves role_generation: each recomputes by its next statement.
#include <cctype>

#include "definitions/privileges.hpp"

#include "definitions/arguments.hpp"
#include "definitions/catalog.hpp"
#include "definitions/guards.hpp"
#include "definitions/changes.hpp"
#include "definitions/counter_ref.hpp"
#include "shared/shmem.hpp"
#include "spi.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(sc_may_read);
}

namespace sc {

namespace {

// The cached privileges of the current role, computed if the role or the generation moved.
uint32 CurrentPrivileges(const CounterDef* def) {
  Oid user = GetUserId();
  if (def->checked_user != user || def->checked_generation != role_generation) {
    // The generation before the computation: role lookups can process invalidations, and one
    // that arrives meanwhile must leave the result untrusted.
    uint32 generation = role_generation;
    auto* cached = const_cast<CounterDef*>(def);
    cached->granted = PrivilegesOf(*def, user);
    cached->checked_user = user;
    cached->checked_generation = generation;
  }
  return def->granted;
}

// "SELECT", "UPDATE", a comma-separated list of them, or (with allow_all) "ALL [PRIVILEGES]",
// in any case and spacing, as the bits of Privilege; 22023 otherwise.
uint32 ParsePrivileges(const char* text, bool allow_all) {
  uint32 mask = 0;
  const char* p = text;
  for (;;) {
    while (isspace(static_cast<unsigned char>(*p))) p++;
    const char* start = p;
    while (*p != '\0' && *p != ',') p++;
    const char* end = p;
    while (end > start && isspace(static_cast<unsigned char>(end[-1]))) end--;
    int len = int(end - start);
    if (len == 6 && pg_strncasecmp(start, "SELECT", 6) == 0)
      mask |= kSelect;
    else if (len == 6 && pg_strncasecmp(start, "UPDATE", 6) == 0)
      mask |= kUpdate;
    else if (allow_all && ((len == 3 && pg_strncasecmp(start, "ALL", 3) == 0) ||
                           (len == 14 && pg_strncasecmp(start, "ALL PRIVILEGES", 14) == 0)))
      mask |= kSelect | kUpdate;
    else
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("unrecognized privilege type: \"%s\"",
                             NameForMessage(pnstrdup(start, len))),
                      errhint(allow_all ? "Use SELECT, UPDATE, \"SELECT, UPDATE\" or ALL."
                                        : "Use SELECT, UPDATE or \"SELECT, UPDATE\".")));
    if (*p == '\0') break;
    p++;
  }
  return mask;
}

// PUBLIC: "public" (a name no role can have), or PUBLIC in another case unless a role has that
// very name (CREATE ROLE "PUBLIC" is allowed), which a grant then names.
bool IsPublic(const char* role) {
  return strcmp(role, "public") == 0 ||
         (pg_strcasecmp(role, "public") == 0 && !OidIsValid(get_role_oid(role, true)));
}

// The role named `role`; 42704 if there is none (naming at most its first 63 bytes).
Oid RoleNamed(const char* role) {
  Oid oid = strlen(role) < NAMEDATALEN ? get_role_oid(role, true) : InvalidOid;
  if (!OidIsValid(oid))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("role \"%s\" does not exist", NameForMessage(role))));
  return oid;
}

// Fails with 55000 if the counter has no guard to change (a restore that left it out, or a
// sequence of its name made for another counter: guards.hpp).
void RequireGuard(const CounterDef* def) {
  if (!OidIsValid(def->guard))
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("counter \"%s\" has no sequence to hold its privileges", def->name),
                    errdetail("The sequence %s.%s is missing, or was made for another counter "
                              "of that name.",
                              kGuardSchema, quote_identifier(def->name)),
                    errhint("A superuser can drop the counter and create it again.")));
}

// sc_grant and sc_revoke: the owner changes who holds SELECT and UPDATE.
Datum ChangeGrants(FunctionCallInfo fcinfo, bool grant) {
  static const char* const names[] = {"counter", "privileges", "role", nullptr};
  RequireShared();
  PreventCommandDuringRecovery(grant ? "sc_grant()" : "sc_revoke()");
  // As GRANT: not in a read-only transaction (the guard's ACL is a catalog change).
  PreventCommandIfReadOnly(grant ? "sc_grant()" : "sc_revoke()");
  RequireArguments(fcinfo, names);
  const CounterDef* def = CounterArgument(fcinfo, 0, kOwn);
  uint32 mask = ParsePrivileges(text_to_cstring(PG_GETARG_TEXT_PP(1)), true);
  char* role = text_to_cstring(PG_GETARG_TEXT_PP(2));
  // Like GRANT ... TO PUBLIC (nullptr); any other name must be a role's.
  const char* grantee = nullptr;
  if (!IsPublic(role)) {
    (void)RoleNamed(role);
    grantee = role;
  }
  RequireGuard(def);
  AclMode acl_mask = ((mask & kSelect) != 0 ? ACL_SELECT : 0) |
                     ((mask & kUpdate) != 0 ? ACL_UPDATE : 0);
  GrantOnGuard(def->name, acl_mask, grantee, grant);
  PG_RETURN_VOID();
}

// The role named by a sc_has_privilege argument: InvalidOid for PUBLIC; 42704 if none.
Oid RoleArgument(const char* role) { return IsPublic(role) ? InvalidOid : RoleNamed(role); }

}  // namespace

void UpdateCounterRow(int32 id, const char* sql, int nargs, Oid* types, Datum* args) {
  SpiSession spi = ConnectSpi();
  int rc = SPI_execute_with_args(sql, nargs, types, args, nullptr, false, 0);
  if (rc != SPI_OK_UPDATE) elog(ERROR, "updating slotted_counter.counters failed: %d", rc);
  bool updated = SPI_processed == 1;
  FinishSpi(spi);
  if (!updated) {
    char what[32];
    snprintf(what, sizeof(what), "%d", id);
    ReportUnknownCounter(what);
  }
  NoteCounterAltered(id);
}

uint32 PrivilegesOf(const CounterDef& def, Oid role) {
  constexpr uint32 kAll = kSelect | kUpdate | kOwn;
  // A counter without a guard (a restore that left it out) is the superusers' alone.
  if (!OidIsValid(def.guard)) return OidIsValid(role) && superuser_arg(role) ? kAll : 0;
  bool owns;
  AclMode held = GuardPrivileges(def.guard, role, &owns);
  if (owns) return kAll;
  uint32 granted = 0;
  if ((held & ACL_SELECT) != 0) granted |= kSelect;
  if ((held & ACL_UPDATE) != 0) granted |= kUpdate;
  return granted;
}

bool HasPrivileges(const CounterDef* def, uint32 need) {
  return (CurrentPrivileges(def) & need) == need;
}

void RequirePrivileges(const CounterDef* def, uint32 need) {
  uint32 granted = CurrentPrivileges(def);
  if ((granted & need) == need) return;
  if ((need & kOwn) != 0)
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("must be owner of counter \"%s\"", def->name)));
  ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                  errmsg("permission denied for counter \"%s\"", def->name),
                  errdetail("%s needs the %s privilege on the counter, which its owner can grant "
                            "with sc_grant().",
                            (need & kUpdate) != 0 ? "Writing" : "Reading",
                            (need & kUpdate) != 0 ? "UPDATE" : "SELECT")));
}

}  // namespace sc

using namespace sc;

Datum Grant(PG_FUNCTION_ARGS) {
  return ChangeGrants(fcinfo, true);
}

Datum Revoke(PG_FUNCTION_ARGS) {
  return ChangeGrants(fcinfo, false);
}

Datum AlterOwner(PG_FUNCTION_ARGS) {
  static const char* const names[] = {"counter", "role", nullptr};
  RequireShared();
  PreventCommandDuringRecovery("sc_alter_owner()");
  PreventCommandIfReadOnly("sc_alter_owner()");
  RequireArguments(fcinfo, names);
  const CounterDef* def = CounterArgument(fcinfo, 0, kOwn);
  NameData counter_name;
  namestrcpy(&counter_name, def->name);
  char* role = text_to_cstring(PG_GETARG_TEXT_PP(1));
  Oid new_owner = RoleNamed(role);
  // As ALTER ... OWNER TO: the giver must be able to become the new owner (core's rule, which
  // 16 made the SET option of a membership), and the new owner must be able to create counters
  // here. The error is 16's on every version.
  if (!superuser()) {
    if (!MemberCanSetRole(GetUserId(), new_owner))
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("must be able to SET ROLE \"%s\"", role)));
    if (DatabaseAclCheck(MyDatabaseId, new_owner, ACL_CREATE) != ACLCHECK_OK)
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("permission denied to give counter \"%s\" to role \"%s\"",
                             NameStr(counter_name), role),
                      errdetail("The new owner needs the CREATE privilege on database \"%s\".",
                                get_database_name(MyDatabaseId))));
  }
  RequireGuard(def);
  ChangeGuardOwner(def->guard, new_owner);
  PG_RETURN_VOID();
}

Datum HasPrivilege(PG_FUNCTION_ARGS) {
  RequireShared();
  const CounterDef* def = CounterArgument(fcinfo, 0, 0);
  uint32 mask = ParsePrivileges(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
  PG_RETURN_BOOL((CurrentPrivileges(def) & mask) != 0);
}

// About another role: only its members, and the counter's owner (who knows its grants), may ask.
// Anyone may ask about PUBLIC, whose grants are every role's own.
Datum HasPrivilegeOfRole(PG_FUNCTION_ARGS) {
  RequireShared();
  const char* role_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Oid role = RoleArgument(role_name);
  const CounterDef* def = CounterArgument(fcinfo, 1, 0);
  uint32 mask = ParsePrivileges(text_to_cstring(PG_GETARG_TEXT_PP(2)), false);
  if (OidIsValid(role) && !has_privs_of_role(GetUserId(), role) && !HasPrivileges(def, kOwn))
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied to examine the privileges of role \"%s\" on "
                           "counter \"%s\"", role_name, def->name),
                    errdetail("Only members of the role and the owner of the counter may.")));
  PG_RETURN_BOOL((PrivilegesOf(*def, role) & mask) != 0);
}

// The row-level security of the extension's tables: a row of a counter the current role may not
// read (or of one that no longer exists) is not there for it.
Datum sc_may_read(PG_FUNCTION_ARGS) {
  RequireShared();
  const CounterDef* def = FindCounter(PG_GETARG_INT32(0));
  PG_RETURN_BOOL(def != nullptr && HasPrivileges(def, kSelect));
}

SC_ENTRY_POINT(sc_grant, Grant)
SC_ENTRY_POINT(sc_revoke, Revoke)
SC_ENTRY_POINT(sc_alter_owner, AlterOwner)
SC_ENTRY_POINT(sc_has_privilege, HasPrivilege)
SC_ENTRY_POINT(sc_has_privilege_role, HasPrivilegeOfRole)
