-- Counters keyed by text (sc_create(..., key_type => 'text')): each distinct text, compared by
-- its bytes and at most 2,048 of them, is a key of its own, in every function that takes a key.
-- Untyped literals and placeholders take the text forms on every counter; on a bigint counter the
-- text is read as a bigint. The bigint forms on a text counter fail with 42804.
-- flush_interval is 0 here: nothing is flushed but by sc_rollup(); a new key's mapping is made
-- by the flusher all the same (a call that waited for it forever fails on the timeout instead of
-- hanging the suite; the timeout is far beyond any statement here, which under Valgrind runs 20 to
-- 50 times slower, on a busy machine slower still).
\set VERBOSITY terse
SET statement_timeout = '20min';
SELECT sc_rollup() >= 0 AS settled;

-- Runs sql, returns 'ok' or the error's SQLSTATE, and undoes what a transaction can undo.
CREATE FUNCTION tk_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE sql;
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'undo' THEN RETURN 'ok'; END IF;
    RETURN SQLSTATE;
  END;
END $$;
-- How many texts of a counter have a mapping (slotted_counter.keys), of the given ones, after
-- a flush: a buffered counter's new text is given its id by the session that writes it first,
-- and its row is written by the flush that writes its value.
CREATE FUNCTION tk_mapped(c slotted_counter, keys text[]) RETURNS bigint LANGUAGE sql AS $$
  SELECT sc_rollup();
  SELECT count(*) FROM slotted_counter.keys k
   WHERE k.counter = c::integer AND k.key = ANY (keys) $$;

-- Both durabilities, a bucketed one (made by the form that takes its intervals as text, with
-- key_type given by position), one whose keys expire; and a bigint counter beside them.
SELECT sc_create('tk_b', 'buffered', key_type => 'text'),
       sc_create('tk_t', key_type => 'text'),
       sc_create('tk_h', 'transactional', '1 hour', NULL, false, 'text'),
       sc_create('tk_r', 'buffered', retain => '1 second', key_type => 'text'),
       sc_create('bk', 'buffered');
SELECT name, durability, bucket, retain, key_type FROM slotted_counter.counters
 WHERE name IN ('tk_b', 'tk_t', 'tk_h', 'tk_r', 'bk') ORDER BY id;
-- if_not_exists returns the existing counter as it is, whatever key type it names
SELECT sc_create('tk_b', 'buffered', if_not_exists => true),
       sc_create('bk', 'buffered', if_not_exists => true, key_type => 'text');
SELECT name, key_type FROM slotted_counter.counters WHERE name IN ('tk_b', 'bk') ORDER BY name;
-- another key type: 22023, and nothing is made
SELECT sc_create('tk_bad', 'buffered', key_type => 'int');
SELECT sc_create('tk_bad', 'buffered', key_type => 'TEXT');
SELECT sc_create('tk_bad', 'buffered', key_type => 'int8');
SELECT sc_create('tk_bad', 'buffered', '1 hour', key_type => 'varchar');
\echo :LAST_ERROR_SQLSTATE
-- a NULL key type is 22004, as a NULL durability is
SELECT tk_try($$SELECT sc_create('tk_bad', 'buffered', key_type => NULL)$$) AS null_key_type,
       tk_try($$SELECT sc_create('tk_bad', NULL)$$) AS null_durability;
SELECT count(*) AS made FROM slotted_counter.counters WHERE name = 'tk_bad';

-- The same text twice adds up, with an untyped literal, ::text, ::varchar and name; a
-- transactional counter returns the committed value plus the transaction's own.
SELECT c, sc_incr(c, 'home') AS untyped, sc_incr(c, 'home') AS again,
       sc_incr(c, 'home'::text, 10) AS text, sc_incr(c, 'home'::varchar, 100) AS varchar,
       sc_incr(c, 'home'::name, 1000) AS name
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT c, sc_sum(c, 'home') AS untyped, sc_sum(c, 'home'::text) AS text,
       sc_sum(c, 'home'::varchar) AS varchar, sc_sum(c, 'home'::name) AS name
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
-- a key from a text column and from a PL/pgSQL variable
CREATE TABLE tk_pages (path text, hits bigint);
INSERT INTO tk_pages VALUES ('/', 3), ('/about', 2), ('/', 4);
SELECT c, sum(sc_incr(c, path, hits)) > 0 AS counted
  FROM tk_pages, (VALUES ('tk_b'), ('tk_t')) v(c) GROUP BY c ORDER BY c;
DO $$
DECLARE
  k text := '/about';
  v bigint;
BEGIN
  v := sc_incr('tk_t', k, 5);
  RAISE NOTICE 'tk_t "/about" is now %', v;
END $$;
SELECT c, sc_sum(c, '/') AS root, sc_sum(c, '/about') AS about
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);

-- Keys are their bytes: a trailing or leading space, another case, a precomposed letter and the
-- same letter with a combining accent are all distinct keys; '' is a key
SELECT count(sc_incr(c, k, d))
  FROM (VALUES ('tk_b'), ('tk_t')) v(c),
       (VALUES ('a', 1), ('a ', 10), ('A', 100), (' a', 1000), ('é', 10000), ('é', 100000),
               ('', 1000000)) x(k, d);
SELECT c, sc_sum(c, 'a') AS a, sc_sum(c, 'a ') AS a_space, sc_sum(c, 'A') AS upper,
       sc_sum(c, ' a') AS space_a, sc_sum(c, 'é') AS precomposed, sc_sum(c, 'é') AS combining,
       sc_sum(c, '') AS empty, sc_sum(c, 'e') AS e_never
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT c, tk_mapped(c, ARRAY['a', 'a ', 'A', ' a', 'é', 'é', '']) AS mapped,
       (SELECT count(DISTINCT id) FROM slotted_counter.keys WHERE counter = c::integer) =
         (SELECT count(*) FROM slotted_counter.keys WHERE counter = c::integer) AS ids_distinct
  FROM (VALUES ('tk_b'::slotted_counter), ('tk_t')) v(c);

-- 2,048 bytes is the longest key, counted in bytes, not characters: 1,024 two-byte letters fit,
-- 1,025 do not; two keys of 2,048 bytes that differ in their last byte are two keys
SELECT c, sc_incr(c, repeat('x', 2048)) AS x2048, sc_incr(c, repeat('x', 2047) || 'y', 2) AS y2048,
       sc_incr(c, repeat('é', 1024), 3) AS e1024, sc_sum(c, repeat('x', 2048)) AS x2048_read
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT sc_incr('tk_b', repeat('x', 2049));
SELECT sc_incr('tk_t', repeat('x', 2049));
SELECT sc_incr('tk_b', repeat('é', 1025));
SELECT sc_sum('tk_b', repeat('x', 2049));
SELECT sc_incr_batch_text('tk_b', ARRAY['ok', repeat('x', 2049)], ARRAY[1, 1]);
SELECT sc_sum_keys_text('tk_b', ARRAY['ok', repeat('x', 2049)]);
\echo :LAST_ERROR_SQLSTATE
-- ... and nothing of those calls was counted or mapped
SELECT sc_sum('tk_b', 'ok') AS ok, tk_mapped('tk_b', ARRAY['ok', repeat('é', 1025)]) AS mapped;

-- A NULL key: 22004 in every form, untyped or typed, and in arrays
SELECT sc_incr('tk_b', NULL);
SELECT sc_incr('tk_t', NULL::text, 1);
SELECT sc_sum('tk_b', NULL);
SELECT sc_set('tk_b', NULL, 1);
SELECT sc_rank('tk_b', NULL::text);
SELECT sc_incr_batch_text('tk_b', ARRAY['a', NULL], ARRAY[1, 1]);
SELECT sc_incr_batch_text('tk_b', NULL, ARRAY[1]);
SELECT sc_sum_keys_text('tk_b', ARRAY['a', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('tk_b', 'a') AS unchanged;

-- The other forms with a text key: sc_incr with a time (a bucketed counter; 22023 on another),
-- sc_incr_bounded, sc_incr_once, sc_set
SELECT sc_incr('tk_b', 'home', 1, now());
SELECT c, sc_incr_bounded(c, 'seats', 3, 0, 5) AS three, sc_incr_bounded(c, 'seats', 3, 0, 5) AS refused,
       sc_incr_bounded(c, 'seats', -3, 0, 5) AS back_to_0, sc_incr_bounded(c, 'seats', 5, NULL, 5) AS five
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
-- a repeated request id returns the first call's value, whatever key it names, and adds nothing
SELECT c, sc_incr_once(c, 'paid', 10, 'req-1') AS first, sc_incr_once(c, 'paid', 99, 'req-1') AS repeat,
       sc_incr_once(c, 'other', 7, 'req-1') AS other_key, sc_sum(c, 'paid') AS paid,
       sc_sum(c, 'other') AS other
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
-- sc_set returns the value it replaced; a new key's old value is 0
SELECT c, sc_set(c, 'home', 50) AS old, sc_sum(c, 'home') AS now, sc_set(c, 'set-new', 8) AS new_old,
       sc_sum(c, 'set-new') AS new_now
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
-- past the bigint range: 22003, the value stays
SELECT sc_set('tk_b', 'big', 9223372036854775807);
SELECT sc_incr('tk_b', 'big');
SELECT sc_incr_batch_text('tk_b', ARRAY['home', 'big'], ARRAY[1, 1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('tk_b', 'big') AS big, sc_sum('tk_b', 'home') AS home, sc_set('tk_b', 'big', 0) AS reset;

-- A bucketed counter: writes into the bucket of their time, reads over a range, per bucket
SELECT sc_incr('tk_h', 'home', 3, '2026-11-20 10:15+00'), sc_incr('tk_h', 'home', 4, '2026-11-20 11:45+00'),
       sc_incr('tk_h', 'away', 5, '2026-11-20 10:20+00'), sc_set('tk_h', 'away', 6, '2026-11-20 12:05+00');
SELECT * FROM sc_series('tk_h', 'home', NULL, NULL);
SELECT * FROM sc_series('tk_h', 'away'::varchar, '2026-11-20 11:00+00', NULL);
SELECT sc_sum('tk_h', 'home') AS home, sc_sum('tk_h', 'home', '2026-11-20 11:00+00', NULL) AS home_from_11,
       sc_sum('tk_h', 'away', NULL, '2026-11-20 11:00+00') AS away_before_11,
       sc_sum_keys_text('tk_h', ARRAY['home', 'away']) AS both, sc_total('tk_h') AS total;
SELECT * FROM sc_top_text('tk_h', 10, NULL, '2026-11-20 11:00+00');
SELECT * FROM sc_top_text('tk_h', 10, '2026-11-20 11:00+00', NULL);
SELECT * FROM sc_total_series('tk_h', NULL, NULL);
-- a range on an unbucketed counter: 22023
SELECT sc_sum('tk_b', 'home', now(), NULL);
SELECT * FROM sc_series('tk_b', 'home', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE

-- Batches: sc_incr_batch_text returns each new value in order, a key listed twice counts twice;
-- sc_sum_keys_text counts a key listed twice once, as sc_sum_keys does, and a key never counted
-- as 0
SELECT c, sc_incr_batch_text(c, ARRAY['x', 'y', 'x', 'dup-new', 'dup-new'], ARRAY[1, 2, 3, 4, 5]) AS batch,
       sc_sum_keys_text(c, ARRAY['x', 'x', 'y', 'never']) AS group_sum
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT c, tk_mapped(c, ARRAY['dup-new', 'never']) AS mapped FROM (VALUES ('tk_b'), ('tk_t')) v(c);
-- untyped arrays, keys that need quoting in an array, empty arrays
SELECT sc_incr_batch_text('tk_b', '{"a,b", "{c}", "NULL", " "}', '{1, 2, 3, 4}');
SELECT sc_sum('tk_b', 'a,b') AS comma, sc_sum('tk_b', '{c}') AS braces, sc_sum('tk_b', 'NULL') AS null_text,
       sc_sum('tk_b', ' ') AS space, sc_sum_keys_text('tk_b', '{"a,b", "{c}"}') AS group_sum;
SELECT sc_incr_batch_text('tk_b', '{}', '{}'), sc_sum_keys_text('tk_b', '{}'),
       sc_incr_batch_text('tk_t', '{}', '{}'), sc_sum_keys_text('tk_t', '{}');
-- bad arrays: lengths 22023, two dimensions 22023
SELECT sc_incr_batch_text('tk_b', ARRAY['x', 'y'], ARRAY[1]);
SELECT sc_incr_batch_text('tk_b', ARRAY[['x', 'y']], ARRAY[[1, 1]]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('tk_b', 'x') AS x_unchanged;
-- a batch of new keys whose texts together pass any small buffer: 60 keys of about 2,000 bytes,
-- and 5,000 short ones, each counted and mapped once
SELECT c, cardinality(sc_incr_batch_text(c, ARRAY(SELECT g || repeat('z', 2000) FROM generate_series(1, 60) g),
                                         array_fill(2::bigint, ARRAY[60]))) AS long_keys,
       cardinality(sc_incr_batch_text(c, ARRAY(SELECT 'short-' || g FROM generate_series(1, 5000) g),
                                      array_fill(1::bigint, ARRAY[5000]))) AS short_keys
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_sum_keys_text(c, ARRAY(SELECT g || repeat('z', 2000) FROM generate_series(1, 60) g)) AS long_keys,
       sc_sum_keys_text(c, ARRAY(SELECT 'short-' || g FROM generate_series(1, 5000) g)) AS short_keys,
       (SELECT count(*) FROM generate_series(1, 5000) g WHERE sc_sum(c, 'short-' || g) <> 1) AS wrong,
       (SELECT count(*) FROM slotted_counter.keys k WHERE k.counter = c::integer
          AND (k.key LIKE 'short-%' OR k.key LIKE '%' || repeat('z', 2000))) AS mapped
  FROM (VALUES ('tk_b'::slotted_counter), ('tk_t')) v(c);
-- many new keys one call each, in one statement
SELECT c, count(sc_incr(c, 'one-by-one-' || g)) AS written,
       (SELECT count(*) FROM generate_series(1, 2000) g WHERE sc_sum(c, 'one-by-one-' || g) <> 1) AS wrong
  FROM (VALUES ('tk_b'), ('tk_t')) v(c), generate_series(1, 2000) g GROUP BY c ORDER BY c;

-- Reads of a key never written read 0 and make no mapping; a key read, then written, counts
SELECT c, sc_sum(c, 'ghost') AS sum, sc_sum_keys_text(c, ARRAY['ghost']) AS group_sum,
       sc_rank(c, 'ghost') > 0 AS ranked_after, tk_mapped(c, ARRAY['ghost']) AS mapped
  FROM (VALUES ('tk_b'), ('tk_t')) v(c);
SELECT sc_sum('tk_h', 'ghost', NULL, NULL) AS range, (SELECT count(*) FROM sc_series('tk_h', 'ghost', NULL, NULL)) AS series,
       tk_mapped('tk_h', ARRAY['ghost']) AS mapped;
SELECT sc_sum('tk_b', 'late') AS before;
SELECT sc_incr('tk_b', 'late') AS written;
SELECT sc_sum('tk_b', 'late') AS after;
BEGIN;
SELECT sc_sum('tk_t', 'late') AS before;
SELECT sc_incr('tk_t', 'late') AS written;
SELECT sc_sum('tk_t', 'late') AS after;
COMMIT;
SELECT sc_sum('tk_t', 'late') AS committed;

-- The bigint forms (and sc_top, sc_incr_batch, sc_sum_keys) on a text counter: 42804, whether
-- the key is written or left to its default
SELECT sc_incr('tk_b');
SELECT sc_incr('tk_t', 1);
SELECT sc_sum('tk_b');
SELECT * FROM sc_top('tk_b', 3);
SELECT sc_incr_batch('tk_b', ARRAY[1], ARRAY[1]);
SELECT sc_sum_keys('tk_b', ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT call, tk_try(call) AS sqlstate FROM (VALUES
  ($$SELECT sc_incr('tk_t')$$),
  ($$SELECT sc_incr('tk_b', 1::bigint, 1)$$),
  ($$SELECT sc_incr('tk_h', 1, 1, now())$$),
  ($$SELECT sc_incr_bounded('tk_b', 1, 1, 0, 10)$$),
  ($$SELECT sc_incr_once('tk_b', 1, 1, 'req-int')$$),
  ($$SELECT sc_set('tk_t', 1, 5)$$),
  ($$SELECT sc_sum('tk_t', 1)$$),
  ($$SELECT sc_sum('tk_h', 1, NULL, NULL)$$),
  ($$SELECT sc_series('tk_h', 1, NULL, NULL)$$),
  ($$SELECT sc_rank('tk_b', 1)$$),
  ($$SELECT sc_top('tk_h', 3, NULL, NULL)$$),
  ($$SELECT sc_incr_batch('tk_t', '{1,2}', '{1,1}')$$),
  ($$SELECT sc_sum_keys('tk_t', '{1,2}')$$)) v(call);
-- ... and they changed nothing
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_total('tk_b') = (SELECT sum(sc_sum('tk_b', key)) FROM slotted_counter.keys
                            WHERE counter = 'tk_b'::slotted_counter::integer) AS tk_b_whole;

-- The text forms on a bigint counter read the text as a bigint: '42' is the key 42
SELECT sc_incr('bk', '42') AS untyped, sc_incr('bk', 42) AS bigint, sc_incr('bk', '42'::text, 10) AS text,
       sc_incr('bk', '42'::varchar, 100) AS varchar, sc_incr('bk', ' 42') AS spaced,
       sc_incr('bk', 42::bigint) AS typed;
SELECT sc_sum('bk', 42) AS bigint, sc_sum('bk', '42') AS text, sc_sum_keys('bk', ARRAY[42]) AS group_sum,
       sc_sum_keys_text('bk', ARRAY['42', '42', '7']) AS group_text;
SELECT sc_incr_batch_text('bk', ARRAY['7', '7', '-3'], ARRAY[1, 2, 3]), sc_sum('bk', 7), sc_sum('bk', -3);
SELECT sc_set('bk', '8', 80), sc_incr_bounded('bk', '8', 20, NULL, 100), sc_incr_once('bk', '8', 1, 'bk-1');
-- text that is no bigint: 22P02; out of range: 22003; nothing counted, no mapping made
SELECT sc_incr('bk', 'x');
SELECT sc_incr('bk', '');
SELECT sc_incr('bk', '4.2');
SELECT sc_sum('bk', 'x');
SELECT sc_incr_batch_text('bk', ARRAY['7', 'seven'], ARRAY[1, 1]);
SELECT sc_sum_keys_text('bk', ARRAY['7', 'seven']);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('bk', '9223372036854775808');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('bk', 7) AS seven, (SELECT count(*) FROM slotted_counter.keys
                                   WHERE counter = 'bk'::slotted_counter::integer) AS mapped;
-- sc_top_text on a bigint counter is sc_top with the key as text, in the same order (ties by key)
SELECT sc_incr_batch('bk', ARRAY[9, 10, 100], ARRAY[5, 5, 5]);
SELECT * FROM sc_top_text('bk', 10);
SELECT array_agg(t.key || ':' || t.value) = (SELECT array_agg(s.key::text || ':' || s.value) FROM sc_top('bk', 10) s)
       AS same_as_sc_top FROM sc_top_text('bk', 10) t;
SELECT sc_rank('bk', '42') AS text, sc_rank('bk', 42) AS bigint;

-- sc_top_text: largest first, ties by the key's bytes, keys that read 0 left out, negative last
SELECT sc_create('board', 'buffered', key_type => 'text'), sc_create('board_t', key_type => 'text');
SELECT c, sc_incr_batch_text(c, ARRAY['alice', 'bob', 'Bob', 'carol', 'dave', 'eve', 'zero', 'zero'],
                             ARRAY[50, 30, 30, 30, 10, -5, 4, -4])
  FROM (VALUES ('board'), ('board_t')) v(c);
SELECT * FROM sc_top_text('board', 10);
SELECT * FROM sc_top_text('board_t', 3);
SELECT count(*) FROM sc_top_text('board', 0);
SELECT * FROM sc_top_text('board', NULL);
SELECT * FROM sc_top_text('board', -1);
SELECT * FROM sc_top_text('board', 3, now(), NULL);
\echo :LAST_ERROR_SQLSTATE
-- sc_rank: 1 + the keys with a larger value; the key's own value now, the others' as of the last
-- flush
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_rank(c, 'alice') AS alice, sc_rank(c, 'bob') AS bob, sc_rank(c, 'Bob') AS "Bob",
       sc_rank(c, 'dave') AS dave, sc_rank(c, 'zero') AS zero, sc_rank(c, 'nobody') AS nobody
  FROM (VALUES ('board'), ('board_t')) v(c);
SELECT sc_incr('board', 'dave', 100) AS dave_b, sc_incr('board_t', 'dave', 100) AS dave_t;
SELECT c, sc_rank(c, 'dave') AS dave_now, sc_rank(c, 'alice') AS alice_before_the_flush
  FROM (VALUES ('board'), ('board_t')) v(c);
SELECT * FROM sc_top_text('board', 2);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_rank(c, 'alice') AS alice_after_the_flush FROM (VALUES ('board'), ('board_t')) v(c);
-- a transaction's own increments count for its own key, and in its sc_top_text
BEGIN;
SELECT sc_incr('board_t', 'newcomer', 500);
SELECT sc_rank('board_t', 'newcomer') AS own_pending;
SELECT * FROM sc_top_text('board_t', 2);
ROLLBACK;
SELECT * FROM sc_top_text('board_t', 2);

-- slotted_counter.lagged: key_text is the key as text for both kinds, key is NULL for a text
-- counter
SELECT sc_rollup() >= 0 AS flushed;
SELECT counter, key, '[' || key_text || ']' AS key_text, value FROM slotted_counter.lagged
 WHERE (counter IN ('tk_b', 'tk_t', 'board') AND key_text IN ('home', 'a', 'A', 'a ', '', 'alice', 'eve'))
    OR (counter = 'bk' AND key IN (42, -3))
 ORDER BY counter, key_text COLLATE "C";
SELECT count(*) AS zero_rows FROM slotted_counter.lagged WHERE counter = 'board' AND key_text = 'zero' AND value <> 0;
SELECT c, (SELECT count(*) FROM slotted_counter.lagged l WHERE l.counter = c AND l.bucket IS NULL
             AND l.value <> sc_sum(c, l.key_text)) AS lagged_not_exact,
       (SELECT count(*) FROM slotted_counter.lagged l WHERE l.counter = c AND l.key IS NOT NULL) AS with_bigint_key
  FROM (VALUES ('tk_b'), ('tk_t'), ('board'), ('board_t')) v(c);
SELECT bucket, key_text, value FROM slotted_counter.lagged WHERE counter = 'tk_h' ORDER BY bucket, key_text COLLATE "C";

-- Rollbacks. A buffered increment survives its transaction's rollback, and so does its key's
-- mapping; a transactional one goes with it, and with a rolled back savepoint.
BEGIN;
SELECT sc_incr('tk_b', 'rolled-b', 3) AS buffered, sc_incr('tk_t', 'rolled-t', 3) AS transactional;
ROLLBACK;
SELECT sc_sum('tk_b', 'rolled-b') AS buffered_kept, sc_sum('tk_t', 'rolled-t') AS transactional_gone,
       tk_mapped('tk_b', ARRAY['rolled-b']) AS buffered_mapped,
       (SELECT count(*) FROM sc_top_text('tk_t', 100000) WHERE key = 'rolled-t') AS transactional_ranked;
SELECT sc_incr('tk_b', 'rolled-b') AS buffered_counts_on, sc_incr('tk_t', 'rolled-t') AS transactional_from_0;
BEGIN;
SELECT sc_incr('tk_t', 'sp', 1);
SAVEPOINT s;
SELECT sc_incr('tk_t', 'sp', 10), sc_incr('tk_t', 'sp-new', 5), sc_incr('tk_b', 'sp-new-b', 5);
ROLLBACK TO SAVEPOINT s;
SELECT sc_sum('tk_t', 'sp') AS sp, sc_sum('tk_t', 'sp-new') AS sp_new, sc_sum('tk_b', 'sp-new-b') AS buffered;
SELECT sc_incr('tk_t', 'sp-new', 2) AS sp_new_again;
SAVEPOINT s2;
SELECT sc_incr_batch_text('tk_t', ARRAY['sp', 'sp-big'], ARRAY[1, 9223372036854775807]),
       sc_incr('tk_t', 'sp-big', 1);
ROLLBACK TO SAVEPOINT s2;
COMMIT;
SELECT sc_sum('tk_t', 'sp') AS sp, sc_sum('tk_t', 'sp-new') AS sp_new, sc_sum('tk_t', 'sp-big') AS sp_big;
-- an error aborts the transaction: its increments go
BEGIN;
SELECT sc_incr('tk_t', 'aborted', 1);
SELECT sc_incr('tk_t', repeat('x', 2049));
COMMIT;
SELECT sc_sum('tk_t', 'aborted') AS aborted;

-- Keys whose counter has a retention expire as bigint keys do: read 0 after `retain` idle, count
-- again from 0 (the one sleep of this file)
SELECT sc_incr('tk_r', 'gone', 5), sc_incr('tk_r', 'gone-too', 6);
SELECT pg_sleep(1.1);
SELECT sc_sum('tk_r', 'gone') AS gone, sc_sum_keys_text('tk_r', ARRAY['gone', 'gone-too']) AS group_sum,
       (SELECT count(*) FROM sc_top_text('tk_r', 10)) AS ranked, sc_total('tk_r') AS total;
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS lagged FROM slotted_counter.lagged WHERE counter = 'tk_r';
SELECT sc_incr('tk_r', 'gone', 2) AS from_0, sc_sum('tk_r', 'gone') AS read, sc_sum('tk_r', 'gone-too') AS other;

-- A counter created, written and read in one transaction; created and rolled back
BEGIN;
SELECT sc_create('tk_new', 'buffered', key_type => 'text'), sc_create('tk_new_t', key_type => 'text');
SELECT sc_incr('tk_new', 'first'), sc_incr('tk_new_t', 'first', 2),
       sc_incr_batch_text('tk_new', ARRAY['second', 'third'], ARRAY[1, 1]);
SELECT sc_sum('tk_new', 'first'), sc_sum('tk_new_t', 'first'), sc_sum_keys_text('tk_new', ARRAY['second', 'third']);
COMMIT;
SELECT sc_sum('tk_new', 'first'), sc_sum('tk_new_t', 'first'), sc_sum_keys_text('tk_new', ARRAY['second', 'third']);
BEGIN;
SELECT sc_create('tk_gone', 'buffered', key_type => 'text');
SELECT sc_incr('tk_gone', 'first');
ROLLBACK;
SELECT sc_sum('tk_gone', 'first');
SELECT sc_drop('tk_new'), sc_drop('tk_new_t');

-- Dropped and created again with the same name: the old keys read 0, and count from 0. A drop
-- rolled back keeps everything.
SELECT sc_create('tk_d', 'buffered', key_type => 'text');
SELECT sc_incr('tk_d', 'old', 5), sc_incr('tk_d', 'older', 6);
BEGIN;
SELECT sc_drop('tk_d');
ROLLBACK;
SELECT sc_sum('tk_d', 'old') AS kept;
SELECT sc_drop('tk_d');
SELECT sc_create('tk_d', 'transactional', key_type => 'text');
SELECT sc_sum('tk_d', 'old') AS old, sc_sum_keys_text('tk_d', ARRAY['old', 'older']) AS group_sum,
       (SELECT count(*) FROM sc_top_text('tk_d', 10)) AS ranked,
       (SELECT count(*) FROM slotted_counter.keys WHERE counter = 'tk_d'::slotted_counter::integer) AS mapped;
SELECT sc_incr('tk_d', 'old') AS from_0;
SELECT * FROM sc_top_text('tk_d', 10);
-- ... and as a bigint counter, the old texts are no keys at all
SELECT sc_drop('tk_d');
SELECT sc_create('tk_d', 'buffered');
SELECT sc_sum('tk_d', 'old');
SELECT sc_sum('tk_d', '0') AS zero;
SELECT sc_drop('tk_d');

-- Privileges as for bigint keys: SELECT reads, UPDATE writes. A role that may not write makes
-- no mapping either; a role sees the rows of slotted_counter.keys of the counters it may read.
CREATE ROLE tk_reader;
CREATE ROLE tk_writer;
CREATE ROLE tk_nobody;
SELECT sc_grant('tk_b', 'SELECT', 'tk_reader'), sc_grant('tk_b', 'UPDATE', 'tk_writer');
-- Runs sql as role (each role writes a key named after it) and returns 'ok' or the SQLSTATE.
CREATE FUNCTION tk_try_as(role name, sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    EXECUTE replace(sql, '{r}', role);
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'undo' THEN RETURN 'ok'; END IF;
    RETURN SQLSTATE;
  END;
END $$;
SELECT n, call, tk_try_as('tk_reader', call) AS "select", tk_try_as('tk_writer', call) AS "update",
       tk_try_as('tk_nobody', call) AS "none"
  FROM (VALUES
    (1, $$SELECT sc_incr('tk_b', 'by-{r}')$$),
    (2, $$SELECT sc_incr_batch_text('tk_b', ARRAY['batch-by-{r}'], ARRAY[1])$$),
    (3, $$SELECT sc_set('tk_b', 'set-by-{r}', 5)$$),
    (4, $$SELECT sc_incr_bounded('tk_b', 'bounded-by-{r}', 1, 0, 10)$$),
    (5, $$SELECT sc_incr_once('tk_b', 'once-by-{r}', 1, 'once-{r}')$$),
    (6, $$SELECT sc_sum('tk_b', 'home')$$),
    (7, $$SELECT sc_sum_keys_text('tk_b', ARRAY['home', 'a'])$$),
    (8, $$SELECT sc_top_text('tk_b', 3)$$),
    (9, $$SELECT sc_rank('tk_b', 'home')$$),
    (10, $$SELECT count(*) FROM slotted_counter.keys$$),
    (11, $$SELECT slotted_counter.key_text('tk_b', 1)$$)) v(n, call)
 ORDER BY n;
-- key_text reads slotted_counter.keys past its row security: only with SELECT on the counter.
-- A key with no text reads NULL; a bigint counter's key reads as itself.
SELECT slotted_counter.key_text('tk_b', 0) IS NULL AS no_text, slotted_counter.key_text('bk', 42) AS bigint_key,
       tk_try($$SELECT slotted_counter.key_text('no_such_counter', 1)$$) AS no_counter;
-- the keys written by each role: only the writer's exist
SELECT sc_rollup() >= 0 AS flushed;
SELECT key, sc_sum('tk_b', key) FROM slotted_counter.keys
 WHERE counter = 'tk_b'::slotted_counter::integer AND key LIKE '%by-tk_%' ORDER BY key;
SET ROLE tk_nobody;
SELECT sc_incr('tk_b', 'intruder');
SELECT sc_sum('tk_b', 'home');
SELECT count(*) AS keys_seen FROM slotted_counter.keys;
RESET ROLE;
SET ROLE tk_reader;
SELECT count(*) > 0 AS keys_seen, count(*) FILTER (WHERE counter <> 'tk_b'::slotted_counter::integer) AS others
  FROM slotted_counter.keys;
SELECT sc_incr('tk_b', 'intruder');
RESET ROLE;
SELECT tk_mapped('tk_b', ARRAY['intruder']) AS intruder_mapped;
-- and no role writes the mapping table itself
SET ROLE tk_writer;
INSERT INTO slotted_counter.keys (counter, id, key) VALUES ('tk_b'::slotted_counter::integer, 999999, 'forged');
UPDATE slotted_counter.keys SET key = 'forged';
DELETE FROM slotted_counter.keys;
RESET ROLE;
DROP FUNCTION tk_try_as(name, text);
SELECT sc_revoke('tk_b', 'SELECT', 'tk_reader'), sc_revoke('tk_b', 'UPDATE', 'tk_writer');
DROP ROLE tk_reader, tk_writer, tk_nobody;

-- Attachments take bigint keys only, for now: 0A000, and nothing is attached
CREATE TABLE tk_target (id text PRIMARY KEY, v bigint);
CREATE TABLE tk_target_int (id bigint PRIMARY KEY, v bigint);
SELECT sc_attach('tk_b', 'tk_target', 'id', 'v', '0');
SELECT sc_attach('tk_t', 'tk_target_int', 'id', 'v', '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS attached FROM slotted_counter.attachments
 WHERE counter IN ('tk_b'::slotted_counter::integer, 'tk_t'::slotted_counter::integer);
DROP TABLE tk_target, tk_target_int;

-- Placeholders as drivers send them: untyped (node-postgres, psycopg), varchar (PgJDBC's
-- setString), int8 (setLong: the bigint form, 42804 on a text counter)
PREPARE tk_untyped AS SELECT sc_incr($1, $2, $3);
EXECUTE tk_untyped('tk_b', 'prepared', 1);
EXECUTE tk_untyped('tk_t', 'prepared', 2);
EXECUTE tk_untyped('bk', '42', 1);
EXECUTE tk_untyped('bk', 'prepared', 1);
EXECUTE tk_untyped('tk_b', NULL, 1);
\echo :LAST_ERROR_SQLSTATE
PREPARE tk_varchar(varchar, varchar, int8) AS SELECT sc_incr($1, $2, $3);
EXECUTE tk_varchar('tk_b', 'prepared', 10);
EXECUTE tk_varchar('bk', '42', 1);
PREPARE tk_varchar_sum(varchar, varchar) AS SELECT sc_sum($1, $2);
EXECUTE tk_varchar_sum('tk_b', 'prepared');
EXECUTE tk_varchar_sum('tk_t', 'prepared');
EXECUTE tk_varchar_sum('bk', '42');
PREPARE tk_long(varchar, int8) AS SELECT sc_sum($1, $2);
EXECUTE tk_long('tk_b', 1);
\echo :LAST_ERROR_SQLSTATE
EXECUTE tk_long('bk', 42);
DEALLOCATE ALL;

-- A call refused for a NULL argument gives no key an id.
SELECT sc_set('tk_b', 'refused-null', NULL);
SELECT sc_incr_batch_text('tk_b', ARRAY['refused-batch'], NULL);
SELECT sc_incr_once('tk_b', 'refused-once', 1, NULL);
SELECT count(*) AS mapped FROM slotted_counter.keys
 WHERE key IN ('refused-null', 'refused-batch', 'refused-once');

-- Every text counter holds together: its total is the sum of its mapped keys' values, which
-- sc_top_text lists (but those that read 0), and no mapping is left of a counter that is gone
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_total(c) = (SELECT coalesce(sum(sc_sum(c, k.key)), 0) FROM slotted_counter.keys k
                          WHERE k.counter = c::integer) AS total_is_keys,
       sc_total(c) = (SELECT coalesce(sum(t.value), 0) FROM sc_top_text(c, 1000000) t) AS total_is_top,
       (SELECT count(*) FROM sc_top_text(c, 1000000)) =
         (SELECT count(*) FROM slotted_counter.keys k WHERE k.counter = c::integer AND sc_sum(c, k.key) <> 0)
         AS top_is_keys
  FROM (VALUES ('tk_b'::slotted_counter), ('tk_t'), ('tk_h'), ('board'), ('board_t')) v(c);
SELECT sc_drop(c) FROM (VALUES ('tk_b'), ('tk_t'), ('tk_h'), ('tk_r'), ('bk'), ('board'), ('board_t')) v(c);
-- The same for a counter created in a subtransaction that rolled back, in a transaction that
-- commits.
BEGIN;
SAVEPOINT s;
SELECT sc_create('tk_sub', 'buffered', key_type => 'text');
SELECT sc_incr('tk_sub', 'first');
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- The keys of a counter whose creation rolled back go at the flusher's retention pass, which the
-- flush that sc_rollup() asks for runs.
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS orphans FROM slotted_counter.keys k
 WHERE NOT EXISTS (SELECT FROM slotted_counter.counters c WHERE c.id = k.counter);
DROP FUNCTION tk_try(text), tk_mapped(slotted_counter, text[]);
DROP TABLE tk_pages;
RESET statement_timeout;
