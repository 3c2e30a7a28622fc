-- Bad input gets a clear error with the right SQLSTATE, and changes nothing.
\set VERBOSITY terse
SELECT sc_create('c', 'buffered');
SELECT sc_incr('c', 1, 100);
-- NULL where a value is needed: 22004
SELECT sc_create(NULL, 'buffered');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('d', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('c', NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('c', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('c', NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop(NULL);
\echo :LAST_ERROR_SQLSTATE
-- bad arguments: 22023
SELECT sc_create('d', 'sometimes');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('', 'buffered');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create(repeat('x', 64), 'buffered');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('12345', 'buffered');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('d', 'buffered', '0 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('d', 'buffered', '-1 hour');
\echo :LAST_ERROR_SQLSTATE
-- duplicate name: 42710
SELECT sc_create('c', 'buffered');
\echo :LAST_ERROR_SQLSTATE
-- a width of mixed units: 22023
SELECT sc_create('d', 'buffered', '1 month 2 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('d', 'transactional', '1 day 12 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('d', 'transactional', '1 month -1 day');
\echo :LAST_ERROR_SQLSTATE
-- unknown counter: 42704
SELECT sc_incr('nope');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('nope');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop('nope');
\echo :LAST_ERROR_SQLSTATE
-- overflow: 22003, the value stays
SELECT sc_incr('c', 1, 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('c', 2, -9223372036854775807);
SELECT sc_incr('c', 2, -2);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('c', 1), sc_sum('c', 2);
-- none of the failed calls created anything
SELECT name FROM slotted_counter.counters ORDER BY name;
SELECT sc_drop('c');
