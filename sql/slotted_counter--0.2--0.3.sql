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

-- Hashing: GROUP BY and DISTINCT on a counter.
CREATE FUNCTION slotted_counter_hash(slotted_counter) RETURNS integer
    AS 'hashint4' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR CLASS slotted_counter_hash_ops DEFAULT FOR TYPE slotted_counter USING hash AS
    OPERATOR 1 = (slotted_counter, slotted_counter),
    FUNCTION 1 slotted_counter_hash(slotted_counter);

-- The lagged values with their counter's name: WHERE counter = 'page_views' needs no cast. As its
-- caller, so that each role sees the rows of the counters it may read.
CREATE VIEW slotted_counter.lagged WITH (security_invoker = true) AS
    SELECT c.id::slotted_counter AS counter, t.key, t.bucket, t.value, t.updated_at
    FROM slotted_counter.totals t JOIN slotted_counter.counters c
      ON c.id OPERATOR(pg_catalog.=) t.counter;
GRANT SELECT ON slotted_counter.lagged TO PUBLIC;

-- A failing flush is visible: failures in a row, the last error and when.
DROP VIEW slotted_counter.stats;
DROP FUNCTION slotted_counter.sc_stats();
CREATE FUNCTION slotted_counter.sc_stats(
    OUT datname name, OUT capacity bigint, OUT entries_used bigint, OUT dirty_entries bigint,
    OUT flushes bigint, OUT last_flush_at timestamptz, OUT last_flush_ms double precision,
    OUT rows_written bigint, OUT write_throughs bigint, OUT evictions bigint,
    OUT attach_skipped bigint, OUT attach_errors bigint,
    OUT worker_pid integer, OUT worker_state text,
    OUT flush_failures bigint, OUT last_error text, OUT last_error_at timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'sc_stats' LANGUAGE C STRICT VOLATILE;
CREATE VIEW slotted_counter.stats AS SELECT * FROM slotted_counter.sc_stats();
GRANT SELECT ON slotted_counter.stats TO PUBLIC;

-- Descriptions, for \dT+, \df+, \d+ and \dv+.
COMMENT ON TYPE slotted_counter IS
    'a reference to a counter of this database, written and shown as its name';
COMMENT ON FUNCTION slotted_counter_in(cstring) IS 'input of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_out(slotted_counter) IS 'output of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_recv(internal) IS 'binary input of a counter reference';
COMMENT ON FUNCTION slotted_counter_send(slotted_counter) IS 'binary output of a counter reference';
COMMENT ON FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) IS
    'whether two references name the same counter';
COMMENT ON FUNCTION sc_create(text, text, interval) IS
    'creates a counter (transactional or buffered, with a bucket width or none) owned by the current role';
COMMENT ON FUNCTION sc_drop(slotted_counter) IS
    'drops a counter, its values and its attachments (owner)';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint) IS
    'adds delta to the value of key and returns the new value (UPDATE)';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint, timestamptz) IS
    'adds delta to the bucket of a bucketed counter that holds the time at, returns its new value (UPDATE)';
COMMENT ON FUNCTION sc_incr_batch(slotted_counter, bigint[], bigint[]) IS
    'adds deltas[i] to keys[i] for every i, all or nothing, and returns the new values (UPDATE)';
COMMENT ON FUNCTION sc_set(slotted_counter, bigint, bigint, timestamptz) IS
    'sets the value of key (of the bucket that holds at) and returns the old value (UPDATE)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint) IS
    'the exact current value of key, over all its buckets (SELECT)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the exact sum of the buckets of key that start in [since, until) (SELECT)';
COMMENT ON FUNCTION sc_sum_keys(slotted_counter, bigint[]) IS
    'the exact sum of a group of keys, each counted once (SELECT)';
COMMENT ON FUNCTION sc_series(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the non-zero buckets of key that start in [since, until), oldest first (SELECT)';
COMMENT ON FUNCTION sc_top(slotted_counter, integer, timestamptz, timestamptz) IS
    'the n keys with the largest values (over the buckets in [since, until)), largest first (SELECT)';
COMMENT ON FUNCTION sc_drop_buckets(slotted_counter, timestamptz) IS
    'deletes the buckets that start before a time, with this transaction (UPDATE)';
COMMENT ON FUNCTION sc_rollup() IS
    'flushes this database''s buffered values to slotted_counter.totals now; returns the rows written';
COMMENT ON FUNCTION sc_attach(slotted_counter, regclass, name, name, interval) IS
    'writes the counter''s lagged values into a column of a table the role owns, at most every interval (owner)';
COMMENT ON FUNCTION sc_detach(slotted_counter, regclass) IS
    'stops the writes of sc_attach (owner)';
COMMENT ON FUNCTION sc_grant(slotted_counter, text, text) IS
    'grants SELECT, UPDATE or ALL on a counter to a role or PUBLIC (owner)';
COMMENT ON FUNCTION sc_revoke(slotted_counter, text, text) IS
    'revokes SELECT, UPDATE or ALL on a counter from a role or PUBLIC (owner)';
COMMENT ON FUNCTION sc_alter_owner(slotted_counter, text) IS
    'gives a counter to another role (owner)';
COMMENT ON FUNCTION sc_has_privilege(slotted_counter, text) IS
    'whether the current role holds any of the listed privileges on the counter';
COMMENT ON FUNCTION sc_has_privilege(text, slotted_counter, text) IS
    'whether a role (or PUBLIC) holds any of the listed privileges on the counter';
COMMENT ON FUNCTION slotted_counter.may_read(integer) IS
    'whether the current role may read counter id: the row-level security of the extension''s tables';
COMMENT ON FUNCTION slotted_counter.sc_stats() IS
    'the buffer and flusher figures behind slotted_counter.stats';
COMMENT ON TABLE slotted_counter.counters IS
    'the counters of this database: name, durability, bucket width, owner, grantees';
COMMENT ON TABLE slotted_counter.totals IS
    'each value as of its last flush (lagged); written by the flusher';
COMMENT ON TABLE slotted_counter.deltas IS
    'committed increments of transactional counters not yet folded into totals';
COMMENT ON TABLE slotted_counter.attachments IS
    'sc_attach''s lagged columns in users'' tables, and how their runs went';
COMMENT ON VIEW slotted_counter.lagged IS
    'slotted_counter.totals with each counter by name: the values as of their last flush';
COMMENT ON FUNCTION slotted_counter_hash(slotted_counter) IS
    'hashes a counter reference, for GROUP BY and DISTINCT';
COMMENT ON VIEW slotted_counter.stats IS
    'the buffer, the flusher and the attachments of each database that uses counters';
