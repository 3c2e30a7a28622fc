-- slotted_counter 1.0: hot counters in a shared-memory buffer, flushed to a table by a
-- background worker (README.md; docs/design.md).
--
-- The SQL API (the type slotted_counter and the sc_* functions) lands in the schema CREATE
-- EXTENSION installs into; the catalog, the lagged values and the statistics live in the schema
-- "slotted_counter". No role writes the extension's tables: the functions do, as the extension.
-- Every role may read them, and sees the rows of the counters it may read (row-level security).

\echo Use "CREATE EXTENSION slotted_counter" to load this file. \quit

CREATE SCHEMA slotted_counter;
GRANT USAGE ON SCHEMA slotted_counter TO PUBLIC;
-- The counters' guards (above slotted_counter.counters). No role creates anything here; every
-- role may name a guard (GRANT ... ON SEQUENCE, has_sequence_privilege).
CREATE SCHEMA slotted_counters;
GRANT USAGE ON SCHEMA slotted_counters TO PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- The catalog and the values

-- One row per counter of this database, written by sc_create, sc_drop and sc_alter_retention.
-- Its owner and privileges are those of its guard, the sequence slotted_counters.<name>, which
-- sc_create makes and sc_drop drops: PostgreSQL holds them by OID and records them in
-- pg_shdepend, as for any object (DROP ROLE, REASSIGN OWNED, DROP OWNED), and pg_dump dumps them
-- by role name. SELECT on it reads the counter, UPDATE writes it.
CREATE TABLE slotted_counter.counters (
    id         integer     PRIMARY KEY,
    name       text        NOT NULL UNIQUE,
    durability text        NOT NULL CHECK (durability IN ('transactional', 'buffered')),
    bucket     interval,
    created_at timestamptz NOT NULL DEFAULT now(),
    retain     interval    CHECK (retain > '0'::pg_catalog.interval),
    key_type   text        NOT NULL DEFAULT 'bigint' CHECK (key_type IN ('bigint', 'text')),
    -- A rate limiter's limit (sc_throttle): rate units per `per`, `burst` at once; NULL for the
    -- other counters. A limiter's retain is its tolerance, burst × (per / rate): a key unused
    -- that long is full again, and its row goes.
    rate       bigint      CHECK (rate > 0),
    per        interval    CHECK (per > '0'::pg_catalog.interval),
    burst      bigint      CHECK (burst > 0),
    -- What its keys hold: 'count' (a number), 'limiter' (a rate limiter's state: sc_throttle) or
    -- 'distinct' (a HyperLogLog sketch of distinct elements: sc_add, sc_count). A distinct
    -- counter's log2m is its precision: its sketches have 2^log2m registers (4 to 14, as in
    -- postgresql-hll's hll(log2m, 5)); NULL for the others.
    kind       text        NOT NULL DEFAULT 'count'
                           CHECK (kind IN ('count', 'limiter', 'distinct')),
    log2m      smallint    CHECK (log2m BETWEEN 4 AND 14),
    CHECK ((rate IS NULL) = (per IS NULL) AND (rate IS NULL) = (burst IS NULL)),
    CHECK (rate IS NULL OR (bucket IS NULL AND retain IS NOT NULL)),
    CHECK ((kind = 'limiter') = (rate IS NOT NULL)),
    CHECK ((kind = 'distinct') = (log2m IS NOT NULL))
);
CREATE SEQUENCE slotted_counter.counters_id_seq AS integer OWNED BY slotted_counter.counters.id;

-- The lagged values: one row per counter, key and bucket, current as of the last flush. bucket
-- is '-infinity' for an unbucketed counter (as in deltas, requests and counter_totals: a bucket
-- is never NULL, so that (counter, key, bucket) is the primary key; a bucketed counter refuses an
-- infinite time, so no bucket of one is '-infinity'). Written by the flusher (and deleted by
-- sc_drop, sc_drop_buckets and retention); no foreign key, because the flusher locks each counter
-- row once per flush instead of once per key. Half of each page is left free, so that a flush's
-- update of a row is a HOT update on the same page (no new index entry); the price is storage,
-- up to twice the pages. The primary key is the row's identity for logical replication: a
-- publication that includes the table replicates the flusher's UPDATEs and the DELETEs of drops
-- by it. updated_at is when the flusher last wrote the row (attachments find the rows changed
-- since their last run by it); written_at is the time of the key's last write (a buffered
-- write's, a transactional commit's): a key of a counter with a retention expires `retain` after
-- it.
CREATE TABLE slotted_counter.key_values (
    counter    integer     NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz NOT NULL DEFAULT '-infinity',
    value      bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    written_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT key_values_pkey PRIMARY KEY (counter, key, bucket)
) WITH (fillfactor = 50);
-- A range of buckets is read by its starts: bucket >= since AND bucket < until (since is never
-- '-infinity': a query adds bucket > '-infinity' where it could be, so that this index serves).
CREATE INDEX key_values_counter_bucket ON slotted_counter.key_values (counter, bucket)
    WHERE bucket > '-infinity';

-- Committed increments of transactional counters not yet folded into key_values: one row per
-- counter, key and bucket per committing transaction, inserted by that transaction as it commits
-- (append-only: concurrent committers never lock each other's rows). The flusher folds the rows
-- into key_values and deletes them. A counter's durable value is its key_values row plus its
-- deltas.
CREATE TABLE slotted_counter.deltas (
    counter    integer     NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz NOT NULL DEFAULT '-infinity',
    delta      bigint      NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()  -- the commit's time: key_values.written_at later
) USING heap;
-- Rows are inserted (by committers, as a heap insert with no default to fill) and deleted (by
-- the fold), never updated: a publication replicates the deletes by the whole row. This costs
-- nothing unless wal_level is logical.
ALTER TABLE slotted_counter.deltas REPLICA IDENTITY FULL;

-- The sketches of distinct counters (sc_add): one row per counter, key and bucket that has a
-- key_values row, whose value is the sketch's estimate as of the same write. sketch is in
-- postgresql-hll's storage format (sc_sketch). Written by the flusher only, as a union with the
-- row's sketch, so that a write done twice changes nothing: a buffered counter's sketches from the
-- buffer, a transactional counter's folded from sketch_deltas. Deleted with the key_values rows
-- (sc_drop, sc_drop_buckets, retention).
CREATE TABLE slotted_counter.key_sketches (
    counter integer     NOT NULL,
    key     bigint      NOT NULL,
    bucket  timestamptz NOT NULL DEFAULT '-infinity',
    sketch  bytea       NOT NULL,
    CONSTRAINT key_sketches_pkey PRIMARY KEY (counter, key, bucket)
);
-- sc_count_total of a range of buckets reads the sketches of those buckets only (the site's
-- visitors of an hour among a month of hours), as key_values_counter_bucket serves sc_total.
CREATE INDEX key_sketches_counter_bucket ON slotted_counter.key_sketches (counter, bucket)
    WHERE bucket > '-infinity';
-- A transactional distinct counter's committed adds not yet folded into key_sketches: one row per
-- key per committing transaction, the sketch of that transaction's own elements, inserted as it
-- commits (append-only: committers never lock each other's rows, as with deltas). A key's durable
-- sketch is the union of its key_sketches row and its rows here.
CREATE TABLE slotted_counter.sketch_deltas (
    counter    integer     NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz NOT NULL DEFAULT '-infinity',
    sketch     bytea       NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()  -- the commit's time, for the keys' expiry
) USING heap;
ALTER TABLE slotted_counter.sketch_deltas REPLICA IDENTITY FULL;

-- Lagged totals written into users' tables (sc_attach): the attacher sets target.value_column
-- of the row whose key_column equals the key, for every key changed since last_run, at most
-- every `every`, as the table's owner, who must be able to read the counter. A run that fails
-- says so here and waits `every`. Written by sc_attach, sc_detach and the attacher.
CREATE TABLE slotted_counter.attachments (
    counter      integer     NOT NULL,
    target       regclass    NOT NULL,
    key_column   name        NOT NULL,
    value_column name        NOT NULL,
    every        interval    NOT NULL,
    last_run     timestamptz,
    last_attempt timestamptz,
    failures     integer     NOT NULL DEFAULT 0,
    last_error   text,
    PRIMARY KEY (counter, target)
);

-- The request ids sc_incr_once applied, with the value the first call returned: written by the
-- caller's transaction (transactional counters) or by the flush that writes the increment
-- (buffered ones); rows older than slotted_counter.dedupe_window are deleted by the flusher.
CREATE TABLE slotted_counter.requests (
    counter    integer     NOT NULL,
    request_id text        COLLATE "C" NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz NOT NULL DEFAULT '-infinity',
    result     bigint      NOT NULL,
    applied_at timestamptz NOT NULL,
    PRIMARY KEY (counter, request_id)
);
CREATE INDEX requests_applied_at ON slotted_counter.requests (applied_at);

-- The keys of the counters keyed by text: each distinct text of a counter has an id, which
-- stands for it everywhere else (the buffer, key_values, deltas, requests), so that everything
-- below the SQL functions stays bigint and no two texts ever share a value. Inserted by the flusher
-- only (the first write of a new key asks it, and waits for its commit), so an id is committed
-- before any value that uses it, and a rolled-back write never leaves a value without its text;
-- deleted with the counter (sc_drop). Compared by their bytes (COLLATE "C"), as a key must be.
CREATE SEQUENCE slotted_counter.keys_id_seq AS bigint;
CREATE TABLE slotted_counter.keys (
    counter integer NOT NULL,
    id      bigint  NOT NULL DEFAULT nextval('slotted_counter.keys_id_seq'),
    key     text    COLLATE "C" NOT NULL CHECK (pg_catalog.octet_length(key) <= 2048),
    CONSTRAINT keys_pkey PRIMARY KEY (counter, id),
    CONSTRAINT keys_counter_key UNIQUE (counter, key)
);
ALTER SEQUENCE slotted_counter.keys_id_seq OWNED BY slotted_counter.keys.id;
-- The counters whose keys were given ids while the transaction that created them was open, with
-- that (sub)transaction: if it aborts, the flusher's retention pass deletes the ids of the counter
-- that never was; once it ended either way, the row goes. Written by the flusher only; not
-- dumped (a dump holds committed counters only, and transaction ids are the cluster's own).
CREATE TABLE slotted_counter.key_creators (
    counter integer PRIMARY KEY,
    creator xid8    NOT NULL
);

-- The sum of each (counter, bucket) over every key's row of slotted_counter.key_values (a bucket of
-- '-infinity': unbucketed), kept by the triggers below in the transaction of every statement that
-- changes key_values, so that sc_total reads a row per bucket instead of a row per key. numeric: a
-- sum of bigints need not be one. Not dumped: restoring key_values fills it, through the same
-- triggers.
CREATE TABLE slotted_counter.counter_totals (
    counter integer     NOT NULL,
    bucket  timestamptz NOT NULL DEFAULT '-infinity',
    value   numeric     NOT NULL,
    CONSTRAINT counter_totals_pkey PRIMARY KEY (counter, bucket)
) WITH (fillfactor = 50);
-- Rows inserted or updated: each row's change is collected by a row trigger and the statement's
-- trigger adds them up at its end. No trigger on INSERT or UPDATE has a transition table (while one
-- has, every such statement collects its rows, fired or not). The extension's hot writers keep the
-- sums themselves: while one writes, writer_keeps_sums() is true and its rows queue no row event.
-- Rows deleted: from the statement's transition table.
CREATE FUNCTION slotted_counter.key_values_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'sc_key_values_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION slotted_counter.key_values_changed() FROM PUBLIC;
CREATE FUNCTION slotted_counter.key_values_rows_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'sc_key_values_rows_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION slotted_counter.key_values_rows_changed() FROM PUBLIC;
CREATE FUNCTION slotted_counter.writer_keeps_sums() RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_writer_keeps_sums' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE TRIGGER counter_totals_inserted_row AFTER INSERT ON slotted_counter.key_values
    FOR EACH ROW WHEN (NOT slotted_counter.writer_keeps_sums())
    EXECUTE FUNCTION slotted_counter.key_values_rows_changed();
CREATE TRIGGER counter_totals_updated_row AFTER UPDATE ON slotted_counter.key_values
    FOR EACH ROW WHEN (NOT slotted_counter.writer_keeps_sums())
    EXECUTE FUNCTION slotted_counter.key_values_rows_changed();
CREATE TRIGGER counter_totals_rows AFTER INSERT OR UPDATE ON slotted_counter.key_values
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.key_values_rows_changed();
CREATE TRIGGER counter_totals_delete AFTER DELETE ON slotted_counter.key_values
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION slotted_counter.key_values_changed();
CREATE TRIGGER counter_totals_truncate AFTER TRUNCATE ON slotted_counter.key_values
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.key_values_changed();
-- The filter of stored keys (a load of a key never stored, a request id and a text never stored,
-- skip their tables) takes each inserted row's key from counter_totals_inserted_row,
-- stored_requests_insert and stored_texts_insert; an UPDATE that sets a key column, or a TRUNCATE,
-- makes it rebuilt, as does sc_rebuild_counter_totals after writes no trigger saw.
CREATE TRIGGER stored_keys_rekeyed AFTER UPDATE OF counter, key, bucket
    ON slotted_counter.key_values
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.key_values_changed();
CREATE FUNCTION slotted_counter.stored_keys_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'sc_stored_keys_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION slotted_counter.stored_keys_changed() FROM PUBLIC;
CREATE TRIGGER stored_requests_insert AFTER INSERT ON slotted_counter.requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE TRIGGER stored_requests_rekeyed AFTER UPDATE OF counter, request_id
    ON slotted_counter.requests
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE TRIGGER stored_requests_truncate AFTER TRUNCATE ON slotted_counter.requests
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE TRIGGER stored_texts_insert AFTER INSERT ON slotted_counter.keys
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE TRIGGER stored_texts_rekeyed AFTER UPDATE OF counter, key ON slotted_counter.keys
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE TRIGGER stored_texts_truncate AFTER TRUNCATE ON slotted_counter.keys
    FOR EACH STATEMENT EXECUTE FUNCTION slotted_counter.stored_keys_changed();
CREATE FUNCTION slotted_counter.forget_stored_keys() RETURNS void
    AS 'MODULE_PATHNAME', 'sc_forget_stored_keys' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION slotted_counter.forget_stored_keys() FROM PUBLIC;

-- A dump carries the counters, their values and everything that goes with them.
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.counters', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.counters_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.key_values', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.deltas', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.key_sketches', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.sketch_deltas', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.attachments', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.requests', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.keys', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.keys_id_seq', '');

-- Whether the current role may read counter `counter`: the row-level security of the tables.
CREATE FUNCTION slotted_counter.may_read(counter integer) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_may_read' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;

ALTER TABLE slotted_counter.counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.key_values ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.deltas ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.key_sketches ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.sketch_deltas ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.attachments ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.key_creators ENABLE ROW LEVEL SECURITY;
ALTER TABLE slotted_counter.counter_totals ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON slotted_counter.counters FOR SELECT
    USING (slotted_counter.may_read(id));
CREATE POLICY readable ON slotted_counter.key_values FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.deltas FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.key_sketches FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.sketch_deltas FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.attachments FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.requests FOR SELECT
    USING (slotted_counter.may_read(counter));
CREATE POLICY readable ON slotted_counter.keys FOR SELECT
    USING (slotted_counter.may_read(counter));
GRANT SELECT ON slotted_counter.counters, slotted_counter.key_values, slotted_counter.deltas,
    slotted_counter.key_sketches, slotted_counter.sketch_deltas, slotted_counter.attachments,
    slotted_counter.requests, slotted_counter.keys TO PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- The type: a counter of this database by name, bound when a call runs (as nextval('name')
-- was before regclass), so that views, functions, prepared statements and dumps that name a
-- counter outlive a drop and re-create. Input checks only that the name can be a counter's (1 to
-- 63 bytes); output, binary output, equality, order and hashing are those of its bytes.

CREATE TYPE slotted_counter;
CREATE FUNCTION slotted_counter_in(cstring) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_out(slotted_counter) RETURNS cstring
    AS 'textout' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_recv(internal) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_recv' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_send(slotted_counter) RETURNS bytea
    AS 'textsend' LANGUAGE internal STABLE STRICT PARALLEL SAFE;
CREATE TYPE slotted_counter (
    INPUT = slotted_counter_in,
    OUTPUT = slotted_counter_out,
    RECEIVE = slotted_counter_recv,
    SEND = slotted_counter_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = extended
);

CREATE FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteaeq' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_ne(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteane' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_lt(slotted_counter, slotted_counter) RETURNS boolean
    AS 'bytealt' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_le(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteale' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_gt(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteagt' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_ge(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteage' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_cmp(slotted_counter, slotted_counter) RETURNS integer
    AS 'byteacmp' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_hash(slotted_counter) RETURNS integer
    AS 'hashvarlena' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_hash_extended(slotted_counter, bigint) RETURNS bigint
    AS 'hashvarlenaextended' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;

CREATE OPERATOR = (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel);

CREATE OPERATOR CLASS slotted_counter_ops DEFAULT FOR TYPE slotted_counter USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 slotted_counter_cmp(slotted_counter, slotted_counter);
CREATE OPERATOR CLASS slotted_counter_hash_ops DEFAULT FOR TYPE slotted_counter USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 slotted_counter_hash(slotted_counter),
    FUNCTION 2 slotted_counter_hash_extended(slotted_counter, bigint);

-- A counter given as text, varchar or name, as drivers and PL/pgSQL pass it, needs no cast;
-- the name's syntax is checked. To text it converts like any type (explicitly, or on assignment).
CREATE CAST (text AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (varchar AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (name AS slotted_counter) WITH INOUT AS IMPLICIT;
-- To and from the ids that slotted_counter.key_values and .deltas store: a look-up (42704 if none,
-- and for a counter the role holds no privilege on).
CREATE FUNCTION slotted_counter_of_id(integer) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_of_id' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
CREATE FUNCTION slotted_counter_id(slotted_counter) RETURNS integer
    AS 'MODULE_PATHNAME', 'slotted_counter_id' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
CREATE CAST (integer AS slotted_counter) WITH FUNCTION slotted_counter_of_id(integer);
CREATE CAST (slotted_counter AS integer) WITH FUNCTION slotted_counter_id(slotted_counter);

-- ---------------------------------------------------------------------------------------------
-- Counters

-- retain comes fourth, as a counter's definition reads (name, durability, bucket, retain);
-- if_not_exists is best named.
-- rate, per and burst make it a rate limiter (sc_throttle); kind => 'distinct' a counter of
-- distinct elements (sc_add), of 2^log2m registers (NULL: 14). (Not named precision: a keyword
-- PostgreSQL takes as a named argument only in double quotes.)
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL, retain interval DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, key_type text DEFAULT 'bigint',
                          rate bigint DEFAULT NULL, per interval DEFAULT NULL,
                          burst bigint DEFAULT NULL, kind text DEFAULT NULL,
                          log2m integer DEFAULT NULL)
    RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'sc_create' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_drop(counter slotted_counter, if_exists boolean DEFAULT false) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_drop' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- How long the counter keeps its values (NULL: forever); its owner's, as ALTER TABLE.
CREATE FUNCTION sc_alter_retention(counter slotted_counter, retain interval) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_alter_retention' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The same with every interval as text: what a driver sends for a string (PgJDBC's setString is
-- varchar, which no implicit cast makes an interval), and what an untyped literal or placeholder
-- resolves to (PostgreSQL prefers the string type for it). Each calls the interval form. The
-- text form has no default for the first interval, so that a call that gives none (or names
-- only later ones) has one candidate, the interval form.
CREATE FUNCTION sc_create(name text, durability text, bucket text, retain text DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, key_type text DEFAULT 'bigint',
                          rate bigint DEFAULT NULL, per text DEFAULT NULL,
                          burst bigint DEFAULT NULL, kind text DEFAULT NULL,
                          log2m integer DEFAULT NULL)
    RETURNS slotted_counter
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_create(name, durability, bucket::interval, retain::interval,
                                 if_not_exists, key_type, rate, per::interval, burst, kind,
                                 log2m)
$$;
CREATE FUNCTION sc_alter_retention(counter slotted_counter, retain text) RETURNS void
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_alter_retention(counter, retain::interval)
$$;

-- ---------------------------------------------------------------------------------------------
-- Writes. The array forms have names of their own: a scalar and an array form of one name would
-- make a call with untyped arguments (a driver's placeholders, a NULL key, an empty array)
-- ambiguous.

CREATE FUNCTION sc_incr(counter slotted_counter, key bigint DEFAULT 0, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr(counter slotted_counter, key bigint, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_at' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr_batch(counter slotted_counter, keys bigint[], deltas bigint[])
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'sc_incr_batch' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- Adds delta only if the new value stays within [lower, upper] (a NULL bound is no bound) and
-- returns it, or NULL when refused (nothing counted). Exact under any concurrency: a buffered
-- counter checks the bounds in the same atomic step as the add; a transactional one checks them
-- again at COMMIT against every committing transaction (23514 if they could be left).
CREATE FUNCTION sc_incr_bounded(counter slotted_counter, key bigint, delta bigint,
                                lower bigint, upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_bounded' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- Adds delta once per request_id: a later call with the same id (within the window) applies
-- nothing and returns what the first returned.
CREATE FUNCTION sc_incr_once(counter slotted_counter, key bigint, delta bigint, request_id text,
                             at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_once' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- A rate limiter's call (GCRA): takes cost units of the key if they fit, else nothing; says how
-- many are left, and when this cost would fit (NULL: never, above the burst) and the key be full.
-- Its row is a named type rather than OUT parameters: a call in FROM, its usual place, then finds
-- its columns in the type cache instead of building them from the function's row each time.
CREATE TYPE sc_throttle_result AS (allowed boolean, remaining bigint, retry_after interval,
                                   reset_after interval);
CREATE FUNCTION sc_throttle(counter slotted_counter, key bigint, cost bigint DEFAULT 1)
    RETURNS sc_throttle_result
    AS 'MODULE_PATHNAME', 'sc_throttle' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- A distinct counter's write: adds an element (hashed as postgresql-hll's hll_hash_bigint or
-- hll_hash_text) to the key's sketch; true if the sketch changed (the estimate could change).
CREATE FUNCTION sc_add(counter slotted_counter, key bigint, element bigint,
                       at timestamptz DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_add_int' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_add(counter slotted_counter, key bigint, element text,
                       at timestamptz DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_add' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_set(counter slotted_counter, key bigint, value bigint,
                       at timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_set' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- Deletes every bucket of the counter that starts before `before`; returns how many
-- (key, bucket) values it dropped.
CREATE FUNCTION sc_drop_buckets(counter slotted_counter, before timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_drop_buckets' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---------------------------------------------------------------------------------------------
-- Real-time reads

CREATE FUNCTION sc_sum(counter slotted_counter, key bigint DEFAULT 0) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum(counter slotted_counter, key bigint, since timestamptz,
                       until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_range' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum_keys(counter slotted_counter, keys bigint[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_series(counter slotted_counter, key bigint, since timestamptz,
                          until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    AS 'MODULE_PATHNAME', 'sc_series' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 24;
CREATE FUNCTION sc_top(counter slotted_counter, n bigint, since timestamptz DEFAULT NULL,
                       until timestamptz DEFAULT NULL)
    RETURNS TABLE(key bigint, value bigint)
    AS 'MODULE_PATHNAME', 'sc_top' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 10;
CREATE FUNCTION sc_rank(counter slotted_counter, key bigint, since timestamptz DEFAULT NULL,
                        until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_rank' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- sc_rank's count for a value given: how many keys other than `key` held a larger one as of the
-- last flush. The router's sc_rank asks every node for it, with the value of the key's home node.
CREATE FUNCTION slotted_counter.keys_above(counter slotted_counter, key bigint, value bigint,
                                           since timestamptz DEFAULT NULL,
                                           until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_keys_above' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_total(counter slotted_counter, since timestamptz DEFAULT NULL,
                         until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_total' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_total_series(counter slotted_counter, since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    AS 'MODULE_PATHNAME', 'sc_total_series' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 24;
-- A distinct counter's reads: the estimated number of distinct elements of a key (all buckets,
-- or those of [since, until)), of the union of a group of keys, of the union of all keys; and
-- a key's sketch in postgresql-hll's storage format (sc_sketch(...)::hll where it is installed).
CREATE FUNCTION sc_count(counter slotted_counter, key bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count(counter slotted_counter, key bigint, since timestamptz,
                         until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_range' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count_keys(counter slotted_counter, keys bigint[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count_total(counter slotted_counter, since timestamptz DEFAULT NULL,
                               until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_total' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sketch(counter slotted_counter, key bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sketch(counter slotted_counter, key bigint, since timestamptz,
                          until timestamptz) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_range' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- The union of every key's sketch (sc_count_total's), for the router's merge of its nodes'.
CREATE FUNCTION slotted_counter.sketch_total(counter slotted_counter,
                                             since timestamptz DEFAULT NULL,
                                             until timestamptz DEFAULT NULL) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_total' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- The union of a group's sketches (sc_count_keys's), for the router's merge of its nodes'.
CREATE FUNCTION slotted_counter.sketch_keys(counter slotted_counter, keys bigint[]) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- The union of two sketches in the storage format, and the estimate of one: what the flusher's
-- and the committers' writes of key_sketches, and the router, compute with.
CREATE FUNCTION slotted_counter.sketch_union(a bytea, b bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_union' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION slotted_counter.sketch_count(sketch bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sketch_count' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE slotted_counter.sketch_union_agg(bytea) (
    SFUNC = slotted_counter.sketch_union, STYPE = bytea, COMBINEFUNC = slotted_counter.sketch_union,
    PARALLEL = SAFE);

-- ---------------------------------------------------------------------------------------------
-- Keys as text: the same functions for a counter created with key_type => 'text' (and, on a
-- counter keyed by bigint, for a key given as text, which is read as a bigint). An untyped key
-- (a literal, a driver's placeholder, NULL) resolves to these forms on every counter, as
-- PostgreSQL prefers the string type for it; a typed integer key resolves to the bigint forms,
-- which are untouched. The key has no default here, so that a call with no key has one
-- candidate. The array forms have names of their own, as above.

CREATE FUNCTION sc_incr(counter slotted_counter, key text, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr(counter slotted_counter, key text, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_at_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr_batch_text(counter slotted_counter, keys text[], deltas bigint[])
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'sc_incr_batch_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr_bounded(counter slotted_counter, key text, delta bigint,
                                lower bigint, upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_bounded_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr_once(counter slotted_counter, key text, delta bigint, request_id text,
                             at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_once_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_throttle(counter slotted_counter, key text, cost bigint DEFAULT 1)
    RETURNS sc_throttle_result
    AS 'MODULE_PATHNAME', 'sc_throttle_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_add(counter slotted_counter, key text, element bigint,
                       at timestamptz DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_add_int_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_add(counter slotted_counter, key text, element text,
                       at timestamptz DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_add_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_set(counter slotted_counter, key text, value bigint,
                       at timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_set_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum(counter slotted_counter, key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum(counter slotted_counter, key text, since timestamptz,
                       until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_range_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum_keys_text(counter slotted_counter, keys text[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_keys_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count(counter slotted_counter, key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count(counter slotted_counter, key text, since timestamptz,
                         until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_range_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_count_keys_text(counter slotted_counter, keys text[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_count_keys_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION slotted_counter.sketch_keys_text(counter slotted_counter, keys text[])
    RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_keys_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sketch(counter slotted_counter, key text) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sketch(counter slotted_counter, key text, since timestamptz,
                          until timestamptz) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_sketch_range_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_series(counter slotted_counter, key text, since timestamptz,
                          until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    AS 'MODULE_PATHNAME', 'sc_series_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 24;
CREATE FUNCTION sc_rank(counter slotted_counter, key text, since timestamptz DEFAULT NULL,
                        until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_rank_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION slotted_counter.keys_above(counter slotted_counter, key text, value bigint,
                                           since timestamptz DEFAULT NULL,
                                           until timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_keys_above_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- sc_top with the keys as text, for a counter of either kind (a function's result type is fixed
-- when a query is planned, before the counter is known, so sc_top itself stays bigint).
CREATE FUNCTION slotted_counter.top_ids(counter slotted_counter, n bigint, since timestamptz,
                                        until timestamptz)
    RETURNS TABLE(key bigint, value bigint)
    AS 'MODULE_PATHNAME', 'sc_top_ids' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 10;
-- The text of a key that top_ids returned, read after top_ids and with the latest snapshot (not
-- the query's, which was taken before top_ids read the buffer): a key a concurrent call had just
-- given its first value has its text, at any isolation level.
CREATE FUNCTION slotted_counter.key_text(counter slotted_counter, key bigint) RETURNS text
    AS 'MODULE_PATHNAME', 'sc_key_text' LANGUAGE C STRICT VOLATILE;
CREATE FUNCTION sc_top_text(counter slotted_counter, n bigint, since timestamptz DEFAULT NULL,
                            until timestamptz DEFAULT NULL)
    RETURNS TABLE(key text, value bigint)
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT slotted_counter.key_text(counter, t.key), t.value
    FROM slotted_counter.top_ids(counter, n, since, until) WITH ORDINALITY
         AS t(key, value, place)
    ORDER BY t.place
$$;

-- The lagged values with their counter's name: WHERE counter = 'page_views' needs no cast. As
-- its caller, so that each role sees the rows of the counters it may read. A key of an
-- unbucketed counter that has expired (last written `retain` ago or more) is left out at once,
-- as every read leaves it out, whether or not the flusher has deleted its row. key_text is the key
-- as text for a counter of either kind; key is the bigint key, NULL for a counter keyed by text;
-- bucket is NULL for an unbucketed counter (its rows hold '-infinity').
CREATE VIEW slotted_counter.lagged WITH (security_invoker = true) AS
    SELECT c.name::slotted_counter AS counter,
           CASE WHEN c.key_type OPERATOR(pg_catalog.=) 'bigint' THEN t.key END AS key,
           CASE WHEN c.bucket IS NOT NULL THEN t.bucket END AS bucket,
           t.value, t.updated_at, t.written_at,
           CASE WHEN c.key_type OPERATOR(pg_catalog.=) 'bigint' THEN t.key::text
                ELSE k.key END AS key_text
    FROM slotted_counter.key_values t JOIN slotted_counter.counters c
      ON c.id OPERATOR(pg_catalog.=) t.counter
    LEFT JOIN slotted_counter.keys k
      ON k.counter OPERATOR(pg_catalog.=) t.counter AND k.id OPERATOR(pg_catalog.=) t.key
    WHERE c.retain IS NULL OR c.bucket IS NOT NULL
       OR t.written_at OPERATOR(pg_catalog.>) pg_catalog.timezone('UTC',
          pg_catalog.timezone('UTC', pg_catalog.statement_timestamp()) OPERATOR(pg_catalog.-)
          c.retain);
GRANT SELECT ON slotted_counter.lagged TO PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Deferred aggregates

CREATE FUNCTION sc_rollup() RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_rollup' LANGUAGE C STRICT VOLATILE;
-- Makes slotted_counter.counter_totals again from the rows, for a restore that bypassed the
-- triggers that keep it (pg_restore --data-only --disable-triggers); flushes wait for it (SHARE
-- lock). Superusers only, unless granted.
CREATE FUNCTION sc_rebuild_counter_totals() RETURNS bigint LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT slotted_counter.forget_stored_keys();
    LOCK TABLE slotted_counter.key_values IN SHARE MODE;
    DELETE FROM slotted_counter.counter_totals;
    WITH made AS (
        INSERT INTO slotted_counter.counter_totals (counter, bucket, value)
        SELECT counter, bucket, sum(value) FROM slotted_counter.key_values
        GROUP BY counter, bucket HAVING sum(value) <> 0
        RETURNING 1)
    SELECT count(*) FROM made;
$$;
REVOKE ALL ON FUNCTION sc_rebuild_counter_totals() FROM PUBLIC;
CREATE FUNCTION sc_attach(counter slotted_counter, target regclass, key_column name,
                          value_column name, every interval DEFAULT '1 minute') RETURNS void
    AS 'MODULE_PATHNAME', 'sc_attach' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
-- every as text (see sc_create(text, text, text, text, boolean, text, bigint, text, bigint, text, integer)).
CREATE FUNCTION sc_attach(counter slotted_counter, target regclass, key_column name,
                          value_column name, every text) RETURNS void
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_attach(counter, target, key_column, value_column, every::interval)
$$;
CREATE FUNCTION sc_detach(counter slotted_counter, target regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_detach' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---------------------------------------------------------------------------------------------
-- Privileges, like a sequence's: SELECT reads, UPDATE writes, the owner does everything.

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

-- ---------------------------------------------------------------------------------------------
-- Monitoring

CREATE FUNCTION slotted_counter.sc_stats(
    OUT datname name, OUT capacity bigint, OUT entries_used bigint, OUT dirty_entries bigint,
    OUT flushes bigint, OUT last_flush_at timestamptz, OUT last_flush_ms double precision,
    OUT rows_written bigint, OUT write_throughs bigint, OUT evictions bigint,
    OUT attach_skipped bigint, OUT attach_errors bigint,
    OUT worker_pid integer, OUT worker_state text,
    OUT flush_failures bigint, OUT last_error text, OUT last_error_at timestamptz,
    OUT rank_indexes integer, OUT stored_keys text)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'sc_stats' LANGUAGE C STRICT VOLATILE;
CREATE VIEW slotted_counter.stats AS SELECT * FROM slotted_counter.sc_stats();
GRANT SELECT ON slotted_counter.stats TO PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Descriptions, for \dT+, \df+, \d+ and \dv+.

COMMENT ON TYPE slotted_counter IS 'a counter of this database, by name: bound when a call runs';
COMMENT ON TYPE sc_throttle_result IS 'the answer of sc_throttle: allowed, remaining, retry_after (NULL: never), reset_after';
COMMENT ON FUNCTION slotted_counter_in(cstring) IS 'input of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_out(slotted_counter) IS 'output of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_recv(internal) IS 'binary input of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_send(slotted_counter) IS 'binary output of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) IS
    'whether two references name the same counter';
COMMENT ON FUNCTION slotted_counter_ne(slotted_counter, slotted_counter) IS
    'whether two references name different counters';
COMMENT ON FUNCTION slotted_counter_lt(slotted_counter, slotted_counter) IS
    'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_le(slotted_counter, slotted_counter) IS
    'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_gt(slotted_counter, slotted_counter) IS
    'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_ge(slotted_counter, slotted_counter) IS
    'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_cmp(slotted_counter, slotted_counter) IS
    'orders counter names by their bytes (btree)';
COMMENT ON FUNCTION slotted_counter_hash(slotted_counter) IS
    'hashes a counter name, for GROUP BY, DISTINCT and hash joins';
COMMENT ON FUNCTION slotted_counter_hash_extended(slotted_counter, bigint) IS
    'hashes a counter name with a seed';
COMMENT ON FUNCTION slotted_counter_of_id(integer) IS
    'the counter with an id (of slotted_counter.key_values): integer::slotted_counter';
COMMENT ON FUNCTION slotted_counter_id(slotted_counter) IS
    'the id of a counter, as slotted_counter.key_values stores it: slotted_counter::integer';
COMMENT ON FUNCTION sc_create(text, text, interval, interval, boolean, text, bigint, interval, bigint, text, integer) IS
    'creates a counter (transactional or buffered, with a bucket width or none, keeping its values for retain or forever, keyed by bigint or text; with rate, per and burst a rate limiter) owned by the current role';
COMMENT ON FUNCTION sc_create(text, text, text, text, boolean, text, bigint, text, bigint, text, integer) IS
    'sc_create with the bucket width and retention as text (a driver''s string), read as intervals';
COMMENT ON FUNCTION sc_drop(slotted_counter, boolean) IS
    'drops a counter, its values and its attachments (owner)';
COMMENT ON FUNCTION sc_alter_retention(slotted_counter, interval) IS
    'changes how long a counter keeps its values: buckets that ended, keys not written, more than retain ago are dropped (NULL: forever) (owner)';
COMMENT ON FUNCTION sc_alter_retention(slotted_counter, text) IS
    'sc_alter_retention with retain as text (a driver''s string), read as an interval';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint) IS
    'adds delta to the value of key and returns the new value (UPDATE)';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint, timestamptz) IS
    'adds delta to the bucket of a bucketed counter that holds the time at, returns its new value (UPDATE)';
COMMENT ON FUNCTION sc_incr_batch(slotted_counter, bigint[], bigint[]) IS
    'adds deltas[i] to keys[i] for every i, all or nothing, and returns the new values (UPDATE)';
COMMENT ON FUNCTION sc_incr_bounded(slotted_counter, bigint, bigint, bigint, bigint, timestamptz) IS
    'adds delta if the new value stays within [lower, upper] (NULL: no bound) and returns it, else NULL (UPDATE)';
COMMENT ON FUNCTION sc_incr_once(slotted_counter, bigint, bigint, text, timestamptz) IS
    'adds delta once per request_id within slotted_counter.dedupe_window; a repeat returns the first call''s value (UPDATE)';
COMMENT ON FUNCTION sc_set(slotted_counter, bigint, bigint, timestamptz) IS
    'sets the value of key (of the bucket that holds at) and returns the old value (UPDATE)';
COMMENT ON FUNCTION sc_throttle(slotted_counter, bigint, bigint) IS
    'a rate limiter''s call: takes cost units of key if they fit, else nothing; returns allowed, remaining, retry_after (NULL: never) and reset_after (UPDATE)';
COMMENT ON FUNCTION sc_throttle(slotted_counter, text, bigint) IS
    'sc_throttle of a key given as text (UPDATE)';
COMMENT ON FUNCTION sc_add(slotted_counter, bigint, bigint, timestamptz) IS
    'a distinct counter''s write: adds element (hashed as hll_hash_bigint) to key''s sketch; true if the sketch changed (UPDATE)';
COMMENT ON FUNCTION sc_add(slotted_counter, bigint, text, timestamptz) IS
    'a distinct counter''s write: adds element (hashed as hll_hash_text) to key''s sketch; true if the sketch changed (UPDATE)';
COMMENT ON FUNCTION sc_add(slotted_counter, text, bigint, timestamptz) IS
    'sc_add of a key given as text (UPDATE)';
COMMENT ON FUNCTION sc_add(slotted_counter, text, text, timestamptz) IS
    'sc_add of a key given as text (UPDATE)';
COMMENT ON FUNCTION sc_count(slotted_counter, bigint) IS
    'the estimated number of distinct elements added to key, over all its buckets (SELECT)';
COMMENT ON FUNCTION sc_count(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the estimated number of distinct elements added to key in the buckets that start in [since, until) (SELECT)';
COMMENT ON FUNCTION sc_count(slotted_counter, text) IS
    'sc_count of a key given as text (SELECT)';
COMMENT ON FUNCTION sc_count(slotted_counter, text, timestamptz, timestamptz) IS
    'sc_count of a key given as text (SELECT)';
COMMENT ON FUNCTION sc_count_keys(slotted_counter, bigint[]) IS
    'the estimated number of distinct elements added to any of keys: their union, not their sum (SELECT)';
COMMENT ON FUNCTION sc_count_keys_text(slotted_counter, text[]) IS
    'sc_count_keys of keys given as text (SELECT)';
COMMENT ON FUNCTION sc_count_total(slotted_counter, timestamptz, timestamptz) IS
    'the estimated number of distinct elements added to any key, in the buckets that start in [since, until) (SELECT)';
COMMENT ON FUNCTION sc_sketch(slotted_counter, bigint) IS
    'key''s sketch over all its buckets, in postgresql-hll''s storage format: sc_sketch(...)::hll (SELECT)';
COMMENT ON FUNCTION sc_sketch(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the union of key''s sketches of the buckets that start in [since, until), in postgresql-hll''s storage format (SELECT)';
COMMENT ON FUNCTION sc_sketch(slotted_counter, text) IS
    'sc_sketch of a key given as text (SELECT)';
COMMENT ON FUNCTION sc_sketch(slotted_counter, text, timestamptz, timestamptz) IS
    'sc_sketch of a key given as text (SELECT)';
COMMENT ON FUNCTION slotted_counter.sketch_total(slotted_counter, timestamptz, timestamptz) IS
    'the union of every key''s sketch in the buckets that start in [since, until): sc_count_total''s, for the router (SELECT)';
COMMENT ON FUNCTION slotted_counter.sketch_keys(slotted_counter, bigint[]) IS
    'the union of the sketches of keys over all their buckets: sc_count_keys''s, for the router (SELECT)';
COMMENT ON FUNCTION slotted_counter.sketch_keys_text(slotted_counter, text[]) IS
    'slotted_counter.sketch_keys of keys given as text (SELECT)';
COMMENT ON FUNCTION slotted_counter.sketch_union(bytea, bytea) IS
    'the union of two sketches of one shape in postgresql-hll''s storage format';
COMMENT ON AGGREGATE slotted_counter.sketch_union_agg(bytea) IS
    'the union of sketches of one shape in postgresql-hll''s storage format';
COMMENT ON FUNCTION slotted_counter.sketch_count(bytea) IS
    'the estimate of a sketch in postgresql-hll''s storage format, rounded: hll_cardinality''s';
COMMENT ON FUNCTION sc_drop_buckets(slotted_counter, timestamptz) IS
    'deletes the buckets that start before a time, with this transaction (UPDATE)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint) IS
    'the exact current value of key, over all its buckets (SELECT)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the exact sum of the buckets of key that start in [since, until) (SELECT)';
COMMENT ON FUNCTION sc_sum_keys(slotted_counter, bigint[]) IS
    'the exact sum of a group of keys, each counted once (SELECT)';
COMMENT ON FUNCTION sc_series(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the non-zero buckets of key that start in [since, until), oldest first (SELECT)';
COMMENT ON FUNCTION sc_top(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the n keys with the largest values (over the buckets in [since, until)), largest first (SELECT)';
COMMENT ON FUNCTION sc_rank(slotted_counter, bigint, timestamptz, timestamptz) IS
    '1 + the number of keys with a larger value: the key''s own value now, the others'' as of the last flush (SELECT)';
COMMENT ON FUNCTION slotted_counter.keys_above(slotted_counter, bigint, bigint, timestamptz, timestamptz) IS
    'how many keys other than key held a value larger than value as of the last flush: what the router''s sc_rank adds up over nodes (SELECT)';
COMMENT ON FUNCTION slotted_counter.keys_above(slotted_counter, text, bigint, timestamptz, timestamptz) IS
    'keys_above with the key as text (SELECT)';
COMMENT ON FUNCTION sc_total(slotted_counter, timestamptz, timestamptz) IS
    'the sum over every key (and over the buckets in [since, until)), exact now (SELECT)';
COMMENT ON FUNCTION sc_total_series(slotted_counter, timestamptz, timestamptz) IS
    'the non-zero sums over every key of each bucket that starts in [since, until), oldest first (SELECT)';
COMMENT ON FUNCTION sc_incr(slotted_counter, text, bigint) IS
    'sc_incr with the key as text: a text key, or a bigint key written as text (UPDATE)';
COMMENT ON FUNCTION sc_incr(slotted_counter, text, bigint, timestamptz) IS
    'sc_incr at a time with the key as text (UPDATE)';
COMMENT ON FUNCTION sc_incr_batch_text(slotted_counter, text[], bigint[]) IS
    'sc_incr_batch with the keys as text (UPDATE)';
COMMENT ON FUNCTION sc_incr_bounded(slotted_counter, text, bigint, bigint, bigint, timestamptz) IS
    'sc_incr_bounded with the key as text (UPDATE)';
COMMENT ON FUNCTION sc_incr_once(slotted_counter, text, bigint, text, timestamptz) IS
    'sc_incr_once with the key as text (UPDATE)';
COMMENT ON FUNCTION sc_set(slotted_counter, text, bigint, timestamptz) IS
    'sc_set with the key as text (UPDATE)';
COMMENT ON FUNCTION sc_sum(slotted_counter, text) IS
    'sc_sum with the key as text (SELECT)';
COMMENT ON FUNCTION sc_sum(slotted_counter, text, timestamptz, timestamptz) IS
    'sc_sum over [since, until) with the key as text (SELECT)';
COMMENT ON FUNCTION sc_sum_keys_text(slotted_counter, text[]) IS
    'sc_sum_keys with the keys as text (SELECT)';
COMMENT ON FUNCTION sc_series(slotted_counter, text, timestamptz, timestamptz) IS
    'sc_series with the key as text (SELECT)';
COMMENT ON FUNCTION sc_rank(slotted_counter, text, timestamptz, timestamptz) IS
    'sc_rank with the key as text (SELECT)';
COMMENT ON FUNCTION sc_top_text(slotted_counter, bigint, timestamptz, timestamptz) IS
    'sc_top with the keys as text, for a counter keyed by text or bigint (SELECT)';
COMMENT ON FUNCTION slotted_counter.top_ids(slotted_counter, bigint, timestamptz, timestamptz) IS
    'sc_top of a counter of either kind, a text key as its id in slotted_counter.keys: what sc_top_text reads (SELECT)';
COMMENT ON FUNCTION slotted_counter.key_text(slotted_counter, bigint) IS
    'the text of a key of top_ids, read with the latest snapshot: what sc_top_text shows (SELECT)';
COMMENT ON FUNCTION sc_rebuild_counter_totals() IS
    'makes slotted_counter.counter_totals again from slotted_counter.key_values (after a restore without triggers); returns the rows made';
COMMENT ON FUNCTION sc_rollup() IS
    'flushes this database''s buffered values to slotted_counter.key_values now; returns the rows written';
COMMENT ON FUNCTION sc_attach(slotted_counter, regclass, name, name, interval) IS
    'writes the counter''s lagged values into a column of a table the role owns, at most every interval (owner)';
COMMENT ON FUNCTION sc_attach(slotted_counter, regclass, name, name, text) IS
    'sc_attach with every as text (a driver''s string), read as an interval';
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
COMMENT ON COLUMN slotted_counter.counters.retain IS
    'how long values are kept: buckets that ended, or keys not written, more than this ago are dropped; NULL: forever';
COMMENT ON COLUMN slotted_counter.counters.key_type IS
    'bigint, or text: each text key has an id in slotted_counter.keys, which key_values, deltas and requests hold';
COMMENT ON TABLE slotted_counter.keys IS
    'the text keys of the counters keyed by text, with their ids; written by the flusher, kept until the counter is dropped';
COMMENT ON TABLE slotted_counter.key_creators IS
    'counters given text keys while their creating transaction was open: its abort deletes their keys';
COMMENT ON TABLE slotted_counter.counter_totals IS
    'the sum of each counter''s and bucket''s rows of slotted_counter.key_values, kept by triggers on it';
COMMENT ON FUNCTION slotted_counter.key_values_changed() IS
    'the triggers that keep slotted_counter.counter_totals the sum of slotted_counter.key_values after a DELETE or TRUNCATE, and the filter of stored keys after a TRUNCATE or a change of a key';
COMMENT ON FUNCTION slotted_counter.writer_keeps_sums() IS
    'whether a writer of slotted_counter.key_values in this session keeps the sums and the filter of stored keys itself: the WHEN of the row triggers';
COMMENT ON FUNCTION slotted_counter.key_values_rows_changed() IS
    'the triggers that keep slotted_counter.counter_totals the sum of slotted_counter.key_values after an INSERT or UPDATE, and the filter of stored keys after an INSERT';
COMMENT ON FUNCTION slotted_counter.stored_keys_changed() IS
    'the triggers that add the request ids and texts inserted into slotted_counter.requests and slotted_counter.keys to the filter of stored keys';
COMMENT ON FUNCTION slotted_counter.forget_stored_keys() IS
    'makes the filter of stored keys of this database answer nothing until its flusher rebuilt it (sc_rebuild_counter_totals)';
COMMENT ON SEQUENCE slotted_counter.keys_id_seq IS
    'the ids of text keys';
COMMENT ON TABLE slotted_counter.key_values IS
    'each value as of its last flush (lagged); written by the flusher';
COMMENT ON TABLE slotted_counter.deltas IS
    'committed increments of transactional counters not yet folded into key_values';
COMMENT ON TABLE slotted_counter.key_sketches IS
    'the sketches of distinct counters'' keys, in postgresql-hll''s storage format, as of the same write as their key_values rows';
COMMENT ON TABLE slotted_counter.sketch_deltas IS
    'committed adds of transactional distinct counters not yet folded into key_sketches';
COMMENT ON TABLE slotted_counter.attachments IS
    'sc_attach''s lagged columns in users'' tables, and how their runs went';
COMMENT ON TABLE slotted_counter.requests IS
    'the request ids sc_incr_once applied within slotted_counter.dedupe_window, with the first call''s value';
COMMENT ON VIEW slotted_counter.lagged IS
    'slotted_counter.key_values with each counter by name: the values as of their last flush';
COMMENT ON VIEW slotted_counter.stats IS
    'the buffer, the flusher and the attachments of each database that uses counters';

-- Last, so that no command of this script fires it: an ALTER TABLE of one of the tables the filter
-- of stored keys holds (pg_restore --disable-triggers disables and enables their triggers around
-- its COPY) makes the filter answer nothing until the flusher rebuilt it.
CREATE FUNCTION slotted_counter.tables_altered() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'sc_tables_altered' LANGUAGE C;
REVOKE ALL ON FUNCTION slotted_counter.tables_altered() FROM PUBLIC;
CREATE EVENT TRIGGER slotted_counter_tables_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE') EXECUTE FUNCTION slotted_counter.tables_altered();
COMMENT ON FUNCTION slotted_counter.tables_altered() IS
    'the event trigger after ALTER TABLE: an ALTER of key_values, requests or keys (triggers disabled by a restore) makes the filter of stored keys rebuilt';
COMMENT ON EVENT TRIGGER slotted_counter_tables_altered IS
    'makes the filter of stored keys rebuilt after an ALTER TABLE of key_values, requests or keys';
