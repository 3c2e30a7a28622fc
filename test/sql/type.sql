-- The slotted_counter type: a counter referred to by its name, bound when a call runs (like a
-- Redis key, or nextval('name') before regclass).
\set VERBOSITY terse
SELECT sc_create('page_views', 'buffered');
SELECT 'page_views'::slotted_counter;
-- to and from the id that slotted_counter.key_values stores: a lookup
SELECT id::slotted_counter FROM slotted_counter.counters WHERE name = 'page_views';
SELECT 'page_views'::slotted_counter::integer = id FROM slotted_counter.counters WHERE name = 'page_views';
SELECT 'page_views'::slotted_counter = 'page_views'::slotted_counter;
-- input checks only the syntax: an unknown name is a value; using it fails with 42704 at the
-- call, naming the counter, with a hint
SELECT 'no_such_counter'::slotted_counter;
SELECT sc_sum('no_such_counter');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT sc_incr('987654');
SELECT 987654::slotted_counter;
\set VERBOSITY terse
SELECT 'page_views'::slotted_counter::integer, 'no_such_counter'::slotted_counter::integer;
\echo :LAST_ERROR_SQLSTATE
-- a name is 1 to 63 bytes: 22023
SELECT ''::slotted_counter;
\echo :LAST_ERROR_SQLSTATE
SELECT repeat('x', 64)::slotted_counter;
\echo :LAST_ERROR_SQLSTATE
SELECT repeat('x', 63)::slotted_counter = repeat('x', 63);
-- a prepared statement takes the counter as a text parameter
PREPARE bump(slotted_counter, bigint) AS SELECT sc_incr($1, $2, 1);
EXECUTE bump('page_views', 1);
EXECUTE bump('page_views', 1);
EXECUTE bump('page_views', 2);
-- ... and looks the name up once per session, not once per call: the catalog is not scanned.
-- Counted in the session's own transaction (the database's flusher scans it at its own times);
-- what the session counted before is reported first, so that the count is this transaction's.
SELECT pg_stat_force_next_flush();
BEGIN;
EXECUTE bump('page_views', 3);
EXECUTE bump('page_views', 3);
EXECUTE bump('page_views', 3);
SELECT sum(pg_stat_get_xact_numscans(r)) AS catalog_scans_for_three_calls
  FROM (SELECT 'slotted_counter.counters'::regclass::oid UNION ALL
        SELECT indexrelid FROM pg_index WHERE indrelid = 'slotted_counter.counters'::regclass) s(r);
COMMIT;
-- stored references, views, SQL functions and prepared statements with the name written in
-- them outlive a drop and re-create: they reach the new counter
CREATE TABLE refs (c slotted_counter);
INSERT INTO refs VALUES ('page_views');
CREATE VIEW page_views_now AS SELECT sc_sum('page_views', 3) AS v;
CREATE FUNCTION page_views_of(k bigint) RETURNS bigint LANGUAGE sql
  BEGIN ATOMIC SELECT sc_sum('page_views', k); END;
PREPARE literal AS SELECT sc_incr('page_views', 3, 1);
EXECUTE literal;
SELECT v, page_views_of(3), (SELECT sc_sum(c, 3) FROM refs) FROM page_views_now;
SELECT sc_drop('page_views');
EXECUTE bump('page_views', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM page_views_now;
SELECT sc_create('page_views', 'transactional');
EXECUTE literal;
EXECUTE bump('page_views', 1);
SELECT v, page_views_of(3), (SELECT sc_sum(c, 3) FROM refs), c FROM page_views_now, refs;
DEALLOCATE bump;
DEALLOCATE literal;
DROP VIEW page_views_now;
DROP FUNCTION page_views_of(bigint);
DROP TABLE refs;
-- if_not_exists and if_exists: a notice instead of an error
SELECT sc_create('page_views', 'buffered', if_not_exists => true);
SELECT durability FROM slotted_counter.counters WHERE name = 'page_views';
SELECT sc_drop('page_views'), sc_drop('page_views', if_exists => true);
SELECT sc_drop('page_views', true);
SELECT sc_drop('page_views');
\echo :LAST_ERROR_SQLSTATE
-- equality, order and hashing: GROUP BY, DISTINCT, ORDER BY, indexes, hash joins
SELECT sc_create('a_counter', 'buffered'), sc_create('b_counter', 'buffered');
CREATE TABLE usage (c slotted_counter PRIMARY KEY, n int);
INSERT INTO usage VALUES ('b_counter', 2), ('a_counter', 1), ('c_counter', 3);
INSERT INTO usage VALUES ('a_counter', 4);
\echo :LAST_ERROR_SQLSTATE
SELECT c, sum(n) FROM usage GROUP BY c ORDER BY c;
SELECT DISTINCT c FROM usage ORDER BY c DESC;
SELECT c FROM usage WHERE c > 'a_counter' AND c <> 'c_counter';
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT u.c FROM usage u JOIN slotted_counter.lagged l ON l.counter = u.c;
RESET enable_mergejoin;
RESET enable_nestloop;
-- the lagged values by name, with no cast
SELECT sc_incr('a_counter', 1, 5), sc_rollup() >= 0 AS flushed;
SELECT counter, key, value FROM slotted_counter.lagged WHERE counter = 'a_counter';
SELECT u.c, l.value FROM usage u JOIN slotted_counter.lagged l ON l.counter = u.c;
DROP TABLE usage;
SELECT sc_drop('a_counter'), sc_drop('b_counter');
