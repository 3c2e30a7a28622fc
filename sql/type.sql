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
-- a stored reference to a dropped counter prints as its id
CREATE TABLE refs (c slotted_counter);
INSERT INTO refs VALUES ('page_views');
SELECT sc_drop('page_views');
SELECT c::text = (SELECT c::integer::text FROM refs) AS prints_as_id FROM refs;
EXECUTE bump('page_views', 1);
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE bump;
DROP TABLE refs;
