-- Calls as drivers make them, with placeholders and no cast: node-postgres sends every parameter
-- untyped; PgJDBC's setString sends varchar, setLong int8, setInt int4; PL/pgSQL passes text.
-- No call is ambiguous (42725): the array forms have names of their own.
\set VERBOSITY terse
SELECT sc_create('hits', 'buffered'), sc_create('orders');
-- untyped, as node-postgres and psycopg send them
PREPARE untyped_incr AS SELECT sc_incr($1, $2, $3);
EXECUTE untyped_incr('hits', '1', '5');
PREPARE untyped_sum AS SELECT sc_sum($1, $2);
EXECUTE untyped_sum('hits', '1');
PREPARE untyped_batch AS SELECT sc_incr_batch($1, $2, $3);
EXECUTE untyped_batch('hits', '{1,2}', '{1,1}');
PREPARE untyped_group AS SELECT sc_sum_keys($1, $2);
EXECUTE untyped_group('hits', '{1,2}');
-- an empty group is 0 and an empty batch an empty array; a NULL key is 22004, never 42725
EXECUTE untyped_group('hits', '{}');
EXECUTE untyped_batch('hits', '{}', '{}');
EXECUTE untyped_sum('hits', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('hits', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('hits', NULL);
\echo :LAST_ERROR_SQLSTATE
-- typed as PgJDBC types them: varchar with int8 or int4
PREPARE jdbc_incr(varchar, int8, int8) AS SELECT sc_incr($1, $2, $3);
EXECUTE jdbc_incr('hits', 2, 10);
PREPARE jdbc_sum(varchar, int4) AS SELECT sc_sum($1, $2);
EXECUTE jdbc_sum('hits', 2);
PREPARE jdbc_top(varchar, int4) AS SELECT * FROM sc_top($1, $2);
EXECUTE jdbc_top('hits', 2);
-- text, name and int2, and a counter's name kept in a text column
PREPARE other_types(text, int2, int2) AS SELECT sc_incr($1, $2, $3);
EXECUTE other_types('orders', 7, 3);
PREPARE by_name(name, int8) AS SELECT sc_sum($1, $2);
EXECUTE by_name('orders', 7);
CREATE TABLE counter_names (counter text, key bigint);
INSERT INTO counter_names VALUES ('hits', 1), ('orders', 7);
SELECT counter, key, sc_sum(counter, key) FROM counter_names ORDER BY counter;
-- PL/pgSQL with text variables
DO $$
DECLARE
  c text := 'orders';
  v bigint;
BEGIN
  v := sc_incr(c, 7, 1);
  RAISE NOTICE 'orders key 7 is now %', v;
END $$;
-- an unknown counter given as text is 42704, naming it
EXECUTE jdbc_sum('no_such_counter', 1);
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE ALL;
DROP TABLE counter_names;
SELECT sc_drop('hits'), sc_drop('orders');
