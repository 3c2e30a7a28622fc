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
-- sc_top's n is bigint, as every other number: setLong, and an n beyond int asks for every key
PREPARE jdbc_top_long(varchar, int8) AS SELECT * FROM sc_top($1, $2);
EXECUTE jdbc_top_long('hits', 1);
EXECUTE jdbc_top_long('hits', 5000000000);
-- intervals as setString sends them (varchar), as text, untyped, and typed
PREPARE jdbc_create(varchar, varchar, varchar, varchar) AS SELECT sc_create($1, $2, $3, $4);
EXECUTE jdbc_create('per_hour', 'buffered', '1 hour', '30 days');
PREPARE jdbc_retention(varchar, varchar) AS SELECT sc_alter_retention($1, $2);
EXECUTE jdbc_retention('per_hour', '7 days');
PREPARE untyped_create AS SELECT sc_create($1, $2, $3);
EXECUTE untyped_create('per_minute', 'transactional', '1 minute');
PREPARE untyped_retention AS SELECT sc_alter_retention($1, $2);
EXECUTE untyped_retention('per_minute', NULL);
PREPARE typed_create(text, text, interval, interval) AS SELECT sc_create($1, $2, $3, $4);
EXECUTE typed_create('per_day', 'buffered', '1 day', NULL);
SELECT sc_create('per_week', 'buffered', '7 days', if_not_exists => true),
       sc_create(name => 'kept', durability => 'buffered', retain => '1 day');
SELECT name, bucket, retain FROM slotted_counter.counters
WHERE name IN ('per_hour', 'per_minute', 'per_day', 'per_week', 'kept') ORDER BY name;
CREATE TABLE attached_to (id bigint PRIMARY KEY, v bigint);
PREPARE jdbc_attach(varchar, varchar, varchar, varchar, varchar)
  AS SELECT sc_attach($1, $2, $3, $4, $5);
EXECUTE jdbc_attach('hits', 'attached_to', 'id', 'v', '30 seconds');
SELECT target, every FROM slotted_counter.attachments;
SELECT sc_detach('hits', 'attached_to');
DROP TABLE attached_to;
-- a string that is not an interval is 22007, and the counter is not made
EXECUTE jdbc_create('bad_width', 'buffered', 'an hour', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM slotted_counter.counters WHERE name = 'bad_width';
SELECT sc_drop('per_hour'), sc_drop('per_minute'), sc_drop('per_day'), sc_drop('per_week'),
       sc_drop('kept');
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
-- Text keys: an untyped key takes the text form on every counter (PostgreSQL prefers the string
-- category), so one untyped statement serves both kinds of counter: a text counter takes the text
-- as it is, a bigint counter reads it as a bigint. Never 42725.
SELECT sc_create('paths', 'buffered', key_type => 'text'), sc_create('paths_t', key_type => 'text'),
       sc_create('paths_h', 'buffered', '1 hour', key_type => 'text'), sc_create('ids', 'buffered');
PREPARE text_incr AS SELECT sc_incr($1, $2, $3);
EXECUTE text_incr('paths', '/home', '5');
EXECUTE text_incr('paths_t', '/home', '5');
EXECUTE text_incr('ids', '7', '5');
EXECUTE text_incr('ids', '/home', '5');
\echo :LAST_ERROR_SQLSTATE
PREPARE text_incr_at AS SELECT sc_incr($1, $2, $3, $4);
EXECUTE text_incr_at('paths_h', '/home', '2', '2026-11-20 10:15+00');
PREPARE text_bounded AS SELECT sc_incr_bounded($1, $2, $3, $4, $5);
EXECUTE text_bounded('paths', '/home', '1', NULL, '6');
EXECUTE text_bounded('paths', '/home', '1', NULL, '6');
PREPARE text_once AS SELECT sc_incr_once($1, $2, $3, $4);
EXECUTE text_once('paths_t', '/cart', '3', 'order-1');
EXECUTE text_once('paths_t', '/cart', '3', 'order-1');
PREPARE text_set AS SELECT sc_set($1, $2, $3);
EXECUTE text_set('paths', '/about', '9');
PREPARE text_sum AS SELECT sc_sum($1, $2);
EXECUTE text_sum('paths', '/home');
EXECUTE text_sum('paths_t', '/cart');
EXECUTE text_sum('ids', '7');
EXECUTE text_sum('paths', NULL);
\echo :LAST_ERROR_SQLSTATE
PREPARE text_sum_range AS SELECT sc_sum($1, $2, $3, $4);
EXECUTE text_sum_range('paths_h', '/home', '2026-11-20 10:00+00', NULL);
PREPARE text_series AS SELECT * FROM sc_series($1, $2, $3, $4);
EXECUTE text_series('paths_h', '/home', NULL, NULL);
PREPARE text_rank AS SELECT sc_rank($1, $2);
EXECUTE text_rank('paths', '/home');
EXECUTE text_rank('ids', '7');
PREPARE text_batch AS SELECT sc_incr_batch_text($1, $2, $3);
EXECUTE text_batch('paths', '{/a,/b,/a}', '{1,1,1}');
EXECUTE text_batch('ids', '{7,8}', '{1,1}');
EXECUTE text_batch('paths', '{}', '{}');
PREPARE text_group AS SELECT sc_sum_keys_text($1, $2);
EXECUTE text_group('paths', '{/a,/b,/a}');
EXECUTE text_group('ids', '{7,8}');
EXECUTE text_group('paths', '{}');
PREPARE text_top AS SELECT * FROM sc_top_text($1, $2);
EXECUTE text_top('paths', '2');
EXECUTE text_top('ids', '5');
-- PgJDBC: setString for the key, setArray of text for a batch, setLong for a bigint key (the
-- bigint form: 42804 on a text counter)
PREPARE jdbc_text(varchar, varchar, int8) AS SELECT sc_incr($1, $2, $3);
EXECUTE jdbc_text('paths', '/home', 1);
PREPARE jdbc_text_batch(varchar, text[], int8[]) AS SELECT sc_incr_batch_text($1, $2, $3);
EXECUTE jdbc_text_batch('paths', '{/a,/c}', '{1,1}');
PREPARE jdbc_long_key(varchar, int8, int8) AS SELECT sc_incr($1, $2, $3);
EXECUTE jdbc_long_key('paths', 1, 1);
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE ALL;
SELECT sc_drop('paths'), sc_drop('paths_t'), sc_drop('paths_h'), sc_drop('ids');
