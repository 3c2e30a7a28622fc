-- sc_set: replace a value, get the old one back (the monthly reset of a "n-th buyer" counter).
\set VERBOSITY terse
SELECT sc_create('buyers', 'buffered');
SELECT sc_create('sold');
SELECT sc_incr('buyers', 1, 41), sc_incr('sold', 1, 41);
-- returns the old value; the next increment counts from the new one
SELECT sc_set('buyers', 1, 0), sc_incr('buyers', 1);
SELECT sc_set('sold', 1, 0), sc_incr('sold', 1);
-- a key never counted was 0
SELECT sc_set('buyers', 2, 100), sc_set('sold', 2, 100);
SELECT sc_sum('buyers', 2), sc_sum('sold', 2);
-- buffered: takes effect at once and survives rollback, like an increment
BEGIN;
SELECT sc_set('buyers', 1, 500);
ROLLBACK;
SELECT sc_sum('buyers', 1);
-- transactional: belongs to its transaction, and sees the transaction's own increments
BEGIN;
SELECT sc_incr('sold', 1, 9);
SELECT sc_set('sold', 1, 500);
SELECT sc_incr('sold', 1);
ROLLBACK;
SELECT sc_sum('sold', 1);
BEGIN;
SELECT sc_set('sold', 1, 7), sc_incr('sold', 1, 3);
COMMIT;
SELECT sc_sum('sold', 1);
-- the flusher writes the set values
SELECT sc_rollup() > 0 AS flushed;
SELECT c.name, t.key, t.value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name IN ('buyers', 'sold') ORDER BY 1, 2;
-- bad input: NULL 22004, a time on an unbucketed counter 22023, a change outside bigint 22003
SELECT sc_set('buyers', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('buyers', 1, 5, now());
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('sold', 3, -10);
SELECT sc_set('sold', 3, 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('buyers', 1), sc_sum('sold', 3);
SELECT sc_drop('buyers');
SELECT sc_drop('sold');
