-- slotted_counter 0.2 -> 0.3: an owner and privileges per counter, attachments that run as their
-- role in a worker of their own, and rows of the extension's tables visible only to roles that
-- may read their counter.

\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.3'" to load this file. \quit

-- Roles are kept by name, as pg_cron keeps a job's user: a dump restores into another cluster,
-- where the same names have other OIDs. readers hold SELECT, writers UPDATE; 'public' (a name no
-- role can have) stands for PUBLIC. The owner holds both, always.
ALTER TABLE slotted_counter.counters
    ADD COLUMN owner   name,
    ADD COLUMN readers name[] NOT NULL DEFAULT '{}',
    ADD COLUMN writers name[] NOT NULL DEFAULT '{}';
-- Counters made before privileges existed keep working for every role: they belong to the
-- extension's owner and are granted to PUBLIC, until their owner revokes that.
UPDATE slotted_counter.counters
    SET owner = (SELECT r.rolname FROM pg_catalog.pg_extension e
                 JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) e.extowner
                 WHERE e.extname OPERATOR(pg_catalog.=) 'slotted_counter'),
        readers = '{public}', writers = '{public}';
ALTER TABLE slotted_counter.counters ALTER COLUMN owner SET NOT NULL;

-- An attachment runs as its role, named; a run that fails says so here and waits `every`.
ALTER TABLE slotted_counter.attachments
    ALTER COLUMN role TYPE name USING pg_catalog.pg_get_userbyid(role),
    ADD COLUMN last_attempt timestamptz,
    ADD COLUMN failures     integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error   text;

-- Whether the current role may read counter `counter` (row-level security below).
CREATE FUNCTION slotted_counter.may_read(counter integer) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_may_read' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;

ALTER TABLE slotted_counter.counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.totals ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.deltas ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.attachments ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON slotted_counter.counters FOR SELECT
    USING (slotted_counter.may_read(id));
CREATE POLICY readable ON slotted_counter.totals FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.deltas FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.attachments FOR SELECT
    USING (slotted_counter.may_read(counter));

CREATE FUNCTION sc_grant(counter slotted_counter, privileges text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_grant' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_revoke(counter slotted_counter, privileges text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_revoke' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_alter_owner(counter slotted_counter, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_alter_owner' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_has_privilege(counter slotted_counter, privilege text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_has_privilege' LANGUAGE C STRICT STABLE;
CREATE FUNCTION sc_has_privilege(role text, counter slotted_counter, privilege text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_has_privilege_role' LANGUAGE C STRICT STABLE;

-- Name lookups take the latest snapshot, which a parallel worker cannot.
ALTER FUNCTION slotted_counter_in(cstring) PARALLEL RESTRICTED;
ALTER FUNCTION slotted_counter_out(slotted_counter) PARALLEL RESTRICTED;

-- The array forms get names of their own: a scalar and an array form of one name made a call
-- with untyped arguments (a driver's placeholders, a NULL key, an empty array) ambiguous.
DROP FUNCTION sc_incr(slotted_counter, bigint[], bigint[]);
DROP FUNCTION sc_sum(slotted_counter, bigint[]);
CREATE FUNCTION sc_incr_batch(counter slotted_counter, keys bigint[], deltas bigint[])
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'sc_incr_batch' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum_keys(counter slotted_counter, keys bigint[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- A counter given as text, varchar or name, as drivers and PL/pgSQL pass it, needs no cast.
CREATE CAST (text AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (varchar AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (name AS slotted_counter) WITH INOUT AS IMPLICIT;
