-- The slotted_counter type: a counter referenced by name, like regclass.
\set VERBOSITY terse
SELECT sc_create('page_views', 'buffered');
SELECT 'page_views'::slotted_counter;
-- the id is accepted too, and prints as the name
SELECT id::text::slotted_counter FROM slotted_counter.counters WHERE name = 'page_views';
SELECT 'page_views'::slotted_counter::integer = id FROM slotted_counter.counters WHERE name = 'page_views';
SELECT 'page_views'::slotted_counter = 'page_views'::slotted_counter;
-- unknown names and ids fail with 42704 and a hint
SELECT 'no_such_counter'::slotted_counter;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT '987654'::slotted_counter;
\set VERBOSITY terse
-- a prepared statement takes the counter as a text parameter
PREPARE bump(slotted_counter, bigint) AS SELECT sc_incr($1, $2, 1);
EXECUTE bump('page_views', 1);
EXECUTE bump('page_views', 1);
EXECUTE bump('page_views', 2);
-- ... and looks the name up once per session, not once per call: the catalog is not scanned
SELECT pg_stat_force_next_flush();
SELECT seq_scan + coalesce(idx_scan, 0) AS scans_before FROM pg_stat_user_tables
  WHERE relid = 'slotted_counter.counters'::regclass \gset
SELECT pg_stat_clear_snapshot();
EXECUTE bump('page_views', 3);
EXECUTE bump('page_views', 3);
EXECUTE bump('page_views', 3);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT seq_scan + coalesce(idx_scan, 0) - :scans_before AS catalog_scans_for_three_calls
  FROM pg_stat_user_tables WHERE relid = 'slotted_counter.counters'::regclass;
-- a stored reference to a dropped counter prints as its id
CREATE TABLE refs (c slotted_counter);
INSERT INTO refs VALUES ('page_views');
SELECT sc_drop('page_views');
SELECT c::text = (SELECT c::integer::text FROM refs) AS prints_as_id FROM refs;
EXECUTE bump('page_views', 1);
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE bump;
DROP TABLE refs;
-- equality and hashing: GROUP BY and DISTINCT on a column of counters
SELECT sc_create('a_counter', 'buffered'), sc_create('b_counter', 'buffered');
CREATE TABLE usage (c slotted_counter, n int);
INSERT INTO usage VALUES ('a_counter', 1), ('b_counter', 2), ('a_counter', 3);
SELECT c, sum(n) FROM usage GROUP BY c ORDER BY c::text;
SELECT c FROM (SELECT DISTINCT c FROM usage) d ORDER BY c::text;
-- the lagged values by name, with no cast
SELECT sc_incr('a_counter', 1, 5), sc_rollup() >= 0 AS flushed;
SELECT counter, key, value FROM slotted_counter.lagged WHERE counter = 'a_counter';
DROP TABLE usage;
SELECT sc_drop('a_counter'), sc_drop('b_counter');
