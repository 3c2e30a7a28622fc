-- sc_incr_bounded: an increment that keeps the value within [lower, upper] (a NULL bound is no
-- bound), returning the new value, or NULL when refused (nothing counted).
\set VERBOSITY terse
SELECT sc_create('seats', 'buffered');
SELECT sc_create('stock');  -- transactional
-- a stock counter that never goes below zero, and never above the room's 10 seats
SELECT sc_incr_bounded('seats', 1, 8, 0, 10) AS booked, sc_incr_bounded('seats', 1, 3, 0, 10) AS refused,
       sc_sum('seats', 1) AS unchanged, sc_incr_bounded('seats', 1, 2, 0, 10) AS full_house;
SELECT sc_incr_bounded('seats', 1, -11, 0, NULL) AS refused, sc_incr_bounded('seats', 1, -10, 0, NULL) AS empty,
       sc_incr_bounded('seats', 1, -1, 0, NULL) AS refused_again, sc_sum('seats', 1) AS value;
-- NULL bounds are no bounds; a bound equal to the result is admitted
SELECT sc_incr_bounded('seats', 2, 5, NULL, NULL) AS unbounded, sc_incr_bounded('seats', 2, -5, 0, 0) AS exactly_zero,
       sc_incr_bounded('seats', 2, -9223372036854775807, NULL, NULL) AS low;
-- leaving bigint is an error, as for sc_incr, not a refusal
SELECT sc_incr_bounded('seats', 2, -2, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
-- a value already outside its bounds takes only what brings it back inside
SELECT sc_incr_bounded('seats', 2, 1, 0, 100) AS refused, sc_incr_bounded('seats', 2, 9223372036854775807, 0, 100) AS inside;
-- a fixed-window rate limit: 100 calls per key per minute on a '1 minute' counter
SELECT sc_create('api_calls', 'buffered', '1 minute');
SELECT count(v) AS admitted, count(*) - count(v) AS refused, max(v) AS last
  FROM (SELECT sc_incr_bounded('api_calls', 42, 1, NULL, 100, '2026-01-01 10:00:30+00') AS v
        FROM generate_series(1, 130)) s;
SELECT sc_incr_bounded('api_calls', 42, 1, NULL, 100, '2026-01-01 10:01:00+00') AS next_minute,
       sc_incr_bounded('api_calls', 43, 1, NULL, 100, '2026-01-01 10:00:59+00') AS other_user;
-- the arguments
SELECT sc_incr_bounded('seats', 1, 1, 10, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_bounded('seats', NULL, 1, 0, 10);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_bounded('seats', 1, NULL, 0, 10);
SELECT sc_incr_bounded(NULL, 1, 1, 0, 10);
SELECT sc_incr_bounded('no_such_counter', 1, 1, 0, 10);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_bounded('seats', 1, 1, 0, 10, now());
\echo :LAST_ERROR_SQLSTATE

-- transactional: bounded against the committed value plus the transaction's own increments
SELECT sc_incr('stock', 1, 10);
BEGIN;
SELECT sc_incr_bounded('stock', 1, -3, 0, NULL) AS sold, sc_incr_bounded('stock', 1, -8, 0, NULL) AS refused;
COMMIT;
SELECT sc_sum('stock', 1);
-- the bounds of a subtransaction rolled back no longer apply at COMMIT
BEGIN;
SAVEPOINT a;
SELECT sc_incr_bounded('stock', 1, 1, NULL, 8) AS in_savepoint;
ROLLBACK TO a;
SELECT sc_incr('stock', 1, 5) AS unbounded;
COMMIT;
SELECT sc_sum('stock', 1);
-- those of the top level and of a released savepoint do: the bound holds for the key's value
-- with all of the transaction's increments of it, checked again at COMMIT (23514)
BEGIN;
SELECT sc_incr_bounded('stock', 1, 1, NULL, 13) AS bounded;
SELECT sc_incr('stock', 1, 1) AS beyond;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SAVEPOINT a;
SELECT sc_incr_bounded('stock', 1, 1, NULL, 13) AS bounded;
SAVEPOINT b;
SELECT sc_incr_bounded('stock', 1, 1, NULL, 20) AS nested;
RELEASE b;
RELEASE a;
SELECT sc_incr('stock', 1, 1) AS beyond;
COMMIT;
SELECT sc_sum('stock', 1) AS unchanged;
-- a refused increment leaves nothing pending
BEGIN;
SELECT sc_incr_bounded('stock', 2, 5, NULL, 4) AS refused;
COMMIT;
SELECT sc_sum('stock', 2);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c.name, t.key, t.value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name IN ('seats', 'stock') ORDER BY 1, 2;
SELECT sc_drop('seats'), sc_drop('stock'), sc_drop('api_calls');
