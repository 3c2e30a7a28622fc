-- slotted_counter 0.5 -> 0.6: bounded increments.
\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.6'" to load this file. \quit

-- Adds delta only if the new value stays within [lower, upper] (a NULL bound is no bound) and
-- returns it, or NULL when refused (nothing counted). Exact under any concurrency: a buffered
-- counter checks the bounds in the same atomic step as the add; a transactional one checks them
-- again at COMMIT against every committing transaction (23514 if they could be left).
CREATE FUNCTION sc_incr_bounded(counter slotted_counter, key bigint, delta bigint,
                                lower bigint, upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_bounded_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION sc_incr_bounded(slotted_counter, bigint, bigint, bigint, bigint, timestamptz) IS
    'adds delta if the new value stays within [lower, upper] (NULL: no bound) and returns it, else NULL (UPDATE)';
