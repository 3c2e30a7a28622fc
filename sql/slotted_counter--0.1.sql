-- slotted_counter 0.1: hot counters in a shared-memory buffer, flushed by a background worker.
--
-- The SQL API (type and functions) lands in the schema CREATE EXTENSION installs into; the
-- catalog, the lagged values and the stats live in the schema "slotted_counter".

\echo Use "CREATE EXTENSION slotted_counter" to load this file. \quit

CREATE SCHEMA slotted_counter;

-- One row per counter of this database. Written only by sc_create and sc_drop.
CREATE TABLE slotted_counter.counters (
    id         integer     PRIMARY KEY,
    name       text        NOT NULL UNIQUE,
    durability text        NOT NULL CHECK (durability IN ('transactional', 'buffered')),
    bucket     interval,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE SEQUENCE slotted_counter.counters_id_seq AS integer OWNED BY slotted_counter.counters.id;

-- The lagged values: one row per counter, key and bucket, current as of the last flush.
-- bucket is NULL for an unbucketed counter. Written only by the flusher (and deleted by sc_drop);
-- no foreign key, because the flusher locks each counter row once per flush instead of once per key.
CREATE TABLE slotted_counter.totals (
    counter    integer     NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz,
    value      bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT totals_counter_key_bucket UNIQUE NULLS NOT DISTINCT (counter, key, bucket)
);

-- Committed increments of transactional counters not yet folded into totals: one row per
-- counter, key and bucket per committing transaction, inserted by that transaction as it commits
-- (append-only: concurrent committers never lock each other's rows). The flusher folds the rows
-- into totals and deletes them. A counter's durable value is its totals row plus its deltas.
CREATE TABLE slotted_counter.deltas (
    counter integer NOT NULL,
    key     bigint  NOT NULL,
    bucket  timestamptz,
    delta   bigint  NOT NULL
) USING heap;

-- Lagged totals written into users' tables: the flusher sets target.value_column of the row whose
-- key_column equals the key, for every key changed since last_run, at most every `every`, as
-- the role that attached. Written only by sc_attach, sc_detach and the flusher.
CREATE TABLE slotted_counter.attachments (
    counter      integer     NOT NULL,
    target       regclass    NOT NULL,
    key_column   name        NOT NULL,
    value_column name        NOT NULL,
    every        interval    NOT NULL,
    role         oid         NOT NULL,
    last_run     timestamptz,
    PRIMARY KEY (counter, target)
);

SELECT pg_catalog.pg_extension_config_dump('slotted_counter.counters', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.attachments', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.deltas', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.counters_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.totals', '');

-- The type: a reference to a named counter of this database, like regclass.
CREATE TYPE slotted_counter;

CREATE FUNCTION slotted_counter_in(cstring) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_in' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION slotted_counter_out(slotted_counter) RETURNS cstring
    AS 'MODULE_PATHNAME', 'slotted_counter_out' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION slotted_counter_recv(internal) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_recv' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION slotted_counter_send(slotted_counter) RETURNS bytea
    AS 'MODULE_PATHNAME', 'slotted_counter_send' LANGUAGE C STRICT STABLE PARALLEL SAFE;

CREATE TYPE slotted_counter (
    INPUT = slotted_counter_in,
    OUTPUT = slotted_counter_out,
    RECEIVE = slotted_counter_recv,
    SEND = slotted_counter_send,
    INTERNALLENGTH = 4,
    PASSEDBYVALUE,
    ALIGNMENT = int4
);

CREATE FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) RETURNS boolean
    AS 'int4eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR = (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_eq,
    COMMUTATOR = =, RESTRICT = eqsel, JOIN = eqjoinsel
);
-- A counter reference is its id underneath, so it joins the catalog and the values table.
CREATE CAST (slotted_counter AS integer) WITHOUT FUNCTION;
CREATE CAST (integer AS slotted_counter) WITHOUT FUNCTION;

-- Counters
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL)
    RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'sc_create' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_drop(counter slotted_counter) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_drop' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Writes
CREATE FUNCTION sc_incr(counter slotted_counter, key bigint DEFAULT 0, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr(counter slotted_counter, keys bigint[], deltas bigint[]) RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'sc_incr_batch' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_set(counter slotted_counter, key bigint, value bigint,
                       at timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_set' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Real-time reads
CREATE FUNCTION sc_sum(counter slotted_counter, key bigint DEFAULT 0) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum(counter slotted_counter, keys bigint[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_top(counter slotted_counter, n integer, since timestamptz DEFAULT NULL,
                       until timestamptz DEFAULT NULL)
    RETURNS TABLE(key bigint, value bigint)
    AS 'MODULE_PATHNAME', 'sc_top' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 10;

-- Deferred aggregates
CREATE FUNCTION sc_rollup() RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_rollup' LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION sc_attach(counter slotted_counter, target regclass, key_column name,
                          value_column name, every interval DEFAULT '1 minute') RETURNS void
    AS 'MODULE_PATHNAME', 'sc_attach' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_detach(counter slotted_counter, target regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_detach' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Monitoring
CREATE FUNCTION slotted_counter.sc_stats(
    OUT datname name, OUT capacity bigint, OUT entries_used bigint, OUT dirty_entries bigint,
    OUT flushes bigint, OUT last_flush_at timestamptz, OUT last_flush_ms double precision,
    OUT rows_written bigint, OUT write_throughs bigint, OUT evictions bigint,
    OUT attach_skipped bigint, OUT attach_errors bigint,
    OUT worker_pid integer, OUT worker_state text)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'sc_stats' LANGUAGE C STRICT VOLATILE;
CREATE VIEW slotted_counter.stats AS SELECT * FROM slotted_counter.sc_stats();

GRANT USAGE ON SCHEMA slotted_counter TO PUBLIC;
GRANT SELECT ON slotted_counter.counters, slotted_counter.totals, slotted_counter.deltas,
    slotted_counter.attachments, slotted_counter.stats TO PUBLIC;
