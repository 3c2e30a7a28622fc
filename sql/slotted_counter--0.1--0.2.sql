-- slotted_counter 0.1 -> 0.2: bucketed counters (writes at a time, reads over a range of
-- buckets, dropping old buckets).

\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.2'" to load this file. \quit

CREATE FUNCTION sc_incr(counter slotted_counter, key bigint, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_at' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_sum(counter slotted_counter, key bigint, since timestamptz,
                       until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_range' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_series(counter slotted_counter, key bigint, since timestamptz,
                          until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    AS 'MODULE_PATHNAME', 'sc_series' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 24;

-- Deletes every bucket of the counter that starts before `before`; returns how many
-- (key, bucket) values it dropped.
CREATE FUNCTION sc_drop_buckets(counter slotted_counter, before timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_drop_buckets' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- A range of buckets is read by its starts: bucket >= since AND bucket < until.
CREATE INDEX totals_counter_bucket ON slotted_counter.totals (counter, bucket)
    WHERE bucket IS NOT NULL;

