-- slotted_counter 0.6 -> 0.7: retention, and increments that apply once. A counter may keep its
-- values for a time only: a bucketed counter's buckets that ended more than `retain` ago are
-- dropped, an unbucketed counter's keys not written for `retain` are deleted, by the flusher.
-- sc_incr_once applies an increment once per request id within slotted_counter.dedupe_window.
\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.7'" to load this file. \quit

ALTER TABLE slotted_counter.counters
    ADD COLUMN retain interval CHECK (retain > '0'::pg_catalog.interval);

-- retain comes fourth, as a counter's definition reads (name, durability, bucket, retain);
-- if_not_exists moves to fifth: call it by name, as README always showed it.
DROP FUNCTION sc_create(text, text, interval, boolean);
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL, retain interval DEFAULT NULL,
                          if_not_exists boolean DEFAULT false)
    RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'sc_create_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Changes how long the counter keeps its values (NULL: forever); its owner's, as ALTER TABLE.
CREATE FUNCTION sc_alter_retention(counter slotted_counter, retain interval) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_alter_retention_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION sc_create(text, text, interval, interval, boolean) IS
    'creates a counter (transactional or buffered, with a bucket width or none, keeping its values for retain or forever) owned by the current role';
COMMENT ON FUNCTION sc_alter_retention(slotted_counter, interval) IS
    'changes how long a counter keeps its values: buckets that ended, keys not written, more than retain ago are dropped (NULL: forever) (owner)';
COMMENT ON COLUMN slotted_counter.counters.retain IS
    'how long values are kept: buckets that ended, or keys not written, more than this ago are dropped; NULL: forever';

-- The request ids sc_incr_once applied, with the value the first call returned: written by the
-- caller's transaction (transactional counters) or by the flush that writes the increment
-- (buffered ones); rows older than slotted_counter.dedupe_window are deleted by the flusher.
CREATE TABLE slotted_counter.requests (
    counter    integer     NOT NULL,
    request_id text        NOT NULL,
    key        bigint      NOT NULL,
    bucket     timestamptz,
    result     bigint      NOT NULL,
    applied_at timestamptz NOT NULL,
    PRIMARY KEY (counter, request_id)
);
CREATE INDEX requests_applied_at ON slotted_counter.requests (applied_at);
SELECT pg_catalog.pg_extension_config_dump('slotted_counter.requests', '');
ALTER TABLE slotted_counter.requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON slotted_counter.requests FOR SELECT
    USING (slotted_counter.may_read(counter));
GRANT SELECT ON slotted_counter.requests TO PUBLIC;

-- Adds delta once per request_id: a later call with the same id (within the window) applies
-- nothing and returns what the first returned.
CREATE FUNCTION sc_incr_once(counter slotted_counter, key bigint, delta bigint, request_id text,
                             at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_once_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION sc_incr_once(slotted_counter, bigint, bigint, text, timestamptz) IS
    'adds delta once per request_id within slotted_counter.dedupe_window; a repeat returns the first call''s value (UPDATE)';
COMMENT ON TABLE slotted_counter.requests IS
    'the request ids sc_incr_once applied within slotted_counter.dedupe_window, with the first call''s value';
