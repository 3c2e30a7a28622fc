-- Distinct counters: sc_create(..., kind => 'distinct') makes a counter whose keys hold a
-- HyperLogLog sketch (postgresql-hll's, of 2^log2m registers) instead of a number. sc_add(counter,
-- key, element) adds an element to a key's sketch and says whether the sketch changed (as Redis's
-- PFADD); sc_count estimates the distinct elements of a key, sc_count_keys those of the union of
-- a group of keys, sc_count_total those of every key. A sketch keeps a small set explicit (the
-- list of its hashes), so the counts of the small sets below are exact.
\set VERBOSITY terse
SELECT sc_create('visitors', 'buffered', kind => 'distinct'),
       sc_create('visitors_t', kind => 'distinct', log2m => 12),
       sc_create('tags', 'buffered', key_type => 'text', kind => 'distinct', log2m => 4),
       sc_create('daily', 'buffered', '1 day', kind => 'distinct'),
       sc_create('daily_t', 'transactional', bucket => '1 day', kind => 'distinct'),
       sc_create('recent', 'buffered', '1 hour', '7 days', kind => 'distinct', log2m => NULL),
       sc_create('plain', 'buffered'),
       sc_create('lim', 'buffered', rate => 1, per => '1 hour');
-- the kind and the precision are in the catalog: log2m 14 unless given (NULL too); the counters
-- of the other kinds have none
SELECT name, durability, bucket, retain, key_type, kind, log2m
  FROM slotted_counter.counters
 WHERE name IN ('visitors', 'visitors_t', 'tags', 'daily', 'daily_t', 'recent', 'plain', 'lim')
 ORDER BY id;
SELECT id AS visitors_id FROM slotted_counter.counters WHERE name = 'visitors' \gset
SELECT id AS visitors_t_id FROM slotted_counter.counters WHERE name = 'visitors_t' \gset
SELECT id AS daily_id FROM slotted_counter.counters WHERE name = 'daily' \gset

-- the arguments of sc_create: log2m from 4 to 14 (22023) ...
SELECT sc_create('bad', 'buffered', kind => 'distinct', log2m => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'distinct', log2m => 15);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'distinct', log2m => -1);
\echo :LAST_ERROR_SQLSTATE
-- ... for a distinct counter only (22023) ...
SELECT sc_create('bad', 'buffered', log2m => 12);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'count', log2m => 12);
\echo :LAST_ERROR_SQLSTATE
-- ... of a kind that exists (22023); a limiter is a counter with a rate, and only it ...
SELECT sc_create('bad', 'buffered', kind => 'hyperloglog');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'Distinct');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'limiter');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', kind => 'distinct', rate => 1, per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
-- a retention without buckets makes the keys expire, as any counter's (test/t/074_distinct.pl
-- waits for it), at creation or later
SELECT sc_create('expiring', 'buffered', retain => '1 day', kind => 'distinct');
SELECT sc_alter_retention('visitors', '1 day');
SELECT name, bucket, retain FROM slotted_counter.counters WHERE name IN ('expiring', 'visitors')
 ORDER BY name;
SELECT sc_alter_retention('visitors', NULL), sc_drop('expiring');
-- the other kinds may be named too: 'count', and 'limiter' (with a rate)
SELECT sc_create('counts', 'buffered', kind => 'count'),
       sc_create('limits', 'buffered', rate => 1, per => '1 hour', kind => 'limiter');
SELECT name, kind, log2m FROM slotted_counter.counters
 WHERE name IN ('counts', 'limits') ORDER BY id;
SELECT sc_drop('counts'), sc_drop('limits');

-- sc_add is true when the element changed the sketch, false when the sketch had it already
SELECT c, sc_add(c, 1, 'alice') AS first, sc_add(c, 1, 'alice') AS again,
       sc_add(c, 1, 'bob') AS another, sc_add(c, 2, 'alice') AS other_key
  FROM (VALUES ('visitors'), ('visitors_t')) v(c) ORDER BY c;
SELECT c, sc_count(c, 1) AS key_1, sc_count(c, 2) AS key_2, sc_count(c, 3) AS never_added
  FROM (VALUES ('visitors'), ('visitors_t')) v(c) ORDER BY c;
-- a small set is exact: 1000 elements, each added three times, count 1000 (and 300 at log2m 12,
-- whose sketches keep 320 hashes explicit); of the 3000 calls 1000 changed the sketch
SELECT c, count(*) FILTER (WHERE sc_add(c, 10, 'user-' || (i % n))) AS changed
  FROM (VALUES ('visitors', 1000), ('visitors_t', 300)) v(c, n), generate_series(1, 3 * n) i
 GROUP BY c ORDER BY c;
SELECT c, sc_count(c, 10) AS counted FROM (VALUES ('visitors'), ('visitors_t')) v(c) ORDER BY c;

-- a group's count is the union of its keys, not their sum: key 1 {alice, bob} and key 2 {alice}
-- count 2 together; a key named twice, or one never added to, changes nothing; no key counts 0
SELECT c, sc_count_keys(c, ARRAY[1, 2]) AS union_1_2,
       sc_count(c, 1) + sc_count(c, 2) AS sum_1_2,
       sc_count_keys(c, ARRAY[2, 1, 2, 99]) AS with_repeats,
       sc_count_keys(c, ARRAY[1, 2, 10]) AS with_10,
       sc_count_keys(c, ARRAY[]::bigint[]) AS no_key
  FROM (VALUES ('visitors'), ('visitors_t')) v(c) ORDER BY c;
-- sc_count_total is the union of every key: the user-i are not alice or bob
SELECT c, sc_count_total(c) AS total FROM (VALUES ('visitors'), ('visitors_t')) v(c) ORDER BY c;

-- an element is a bigint or a text, hashed as postgresql-hll's hll_hash_bigint (its 8 bytes) and
-- hll_hash_text (its bytes): 42 and '42' are two elements; an integer is a bigint, an untyped
-- literal a text
SELECT sc_add('visitors', 3, 42) AS bigint_42, sc_add('visitors', 3, '42') AS text_42,
       sc_add('visitors', 3, 42::bigint) AS bigint_again,
       sc_add('visitors', 3, '42'::text) AS text_again,
       sc_add('visitors', 3, 42::smallint) AS smallint_is_bigint;
SELECT sc_count('visitors', 3);
-- a text is its bytes: case and trailing blanks count, and the empty text is an element
SELECT sc_add('visitors', 4, 'Alice'), sc_add('visitors', 4, 'alice'),
       sc_add('visitors', 4, 'alice '), sc_add('visitors', 4, ''), sc_add('visitors', 4, ''),
       sc_add('visitors', 4, 'alice'::varchar);
SELECT sc_count('visitors', 4);

-- sc_sketch is a key's sketch in postgresql-hll's storage format: a small set is EXPLICIT, the
-- header 0x12 (version 1, explicit), 0x8e (5-bit registers, log2m 14), 0x7f (sparse on, automatic
-- threshold), then the hashes in ascending signed order: hll_hash_text('42') and then
-- hll_hash_bigint(42); a key with no element is EMPTY (0x11)
SELECT sc_sketch('visitors', 3);
SELECT sc_sketch('visitors', 99) AS empty, sc_sketch('visitors_t', 99) AS empty_log2m_12;
-- hll_hash_bigint(1) alone
SELECT sc_add('visitors', 5, 1), sc_sketch('visitors', 5);
-- sketch_count is the estimate of one, sketch_union the union of two of one shape
SELECT slotted_counter.sketch_count(sc_sketch('visitors', 3)) AS three,
       slotted_counter.sketch_count(sc_sketch('visitors', 99)) AS empty,
       slotted_counter.sketch_union(sc_sketch('visitors', 3), sc_sketch('visitors', 5))
         AS union_3_5,
       slotted_counter.sketch_count(
         slotted_counter.sketch_union(sc_sketch('visitors', 3), sc_sketch('visitors', 5)))
         AS count_3_5,
       slotted_counter.sketch_union(sc_sketch('visitors', 3), sc_sketch('visitors', 3))
         = sc_sketch('visitors', 3) AS union_with_itself,
       slotted_counter.sketch_union(sc_sketch('visitors', 3), sc_sketch('visitors', 99))
         = sc_sketch('visitors', 3) AS union_with_empty;
-- the union of the sketches of keys is what sc_count_keys counts, and sketch_total what
-- sc_count_total counts
SELECT slotted_counter.sketch_count(slotted_counter.sketch_union(sc_sketch('visitors', 1),
                                                                 sc_sketch('visitors', 10)))
         = sc_count_keys('visitors', ARRAY[1, 10]) AS keys_agree,
       slotted_counter.sketch_count(slotted_counter.sketch_total('visitors'))
         = sc_count_total('visitors') AS total_agrees;
-- sketches of different shapes do not union, and bytes that are no sketch are no sketch (22023)
SELECT slotted_counter.sketch_union(sc_sketch('visitors', 1), sc_sketch('visitors_t', 1));
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_count('\x');
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_count('\x12');
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_count('\x128e7f00');
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_union('\x118e7f', 'not a sketch');
\echo :LAST_ERROR_SQLSTATE
-- a sketch of postgresql-hll's own (hll_empty(), hll_add of hll_hash_bigint(1)) reads as ours
SELECT slotted_counter.sketch_count('\x118e7f') AS hll_empty,
       slotted_counter.sketch_count('\x128e7f004403b7fb05c44a') AS one_element,
       slotted_counter.sketch_union('\x118e7f', '\x128e7f004403b7fb05c44a')
         = sc_sketch('visitors', 5)
         AS same_as_ours;

-- precision: at log2m 4 (16 registers) a sketch keeps one hash explicit, then turns dense: its
-- registers, stored SPARSE (0x13) while that is the smaller form, as (register, value) pairs of
-- 4 + 5 bits: register 7 holds 2 and register 15 holds 3 here
SELECT k, sc_add('tags', k, 'x') AS one, sc_sketch('tags', k) AS explicit,
       sc_add('tags', k, 'y') AS two, sc_sketch('tags', k) AS sparse, sc_count('tags', k) AS counted
  FROM (VALUES ('rough')) v(k);
-- and then FULL (0x14); its estimates are rough (a standard error of 26%): the bigints 1 to 1000
-- change the sketch 58 times and count 1406, what postgresql-hll's hll_cardinality makes of those
-- registers
SELECT count(*) FILTER (WHERE sc_add('tags', 'many', i)) AS changed,
       sc_count('tags', 'many') AS estimate,
       to_hex(get_byte(sc_sketch('tags', 'many'), 0)) AS type
  FROM generate_series(1, 1000) i;
-- at log2m 14, 20000 elements are past the explicit form (1280 hashes), and estimated within 2%
SELECT count(*) FILTER (WHERE sc_add('visitors', 20, i)) AS changed,
       sc_count('visitors', 20) AS estimate,
       abs(sc_count('visitors', 20) - 20000) < 400 AS within_2_percent
  FROM generate_series(1, 20000) i;

-- text keys: each text has a sketch of its own, compared by its bytes; an untyped key is a text
SELECT sc_add('tags', 'alice', 'red'), sc_add('tags', 'alice', 'green'),
       sc_add('tags', 'Alice', 'red'), sc_add('tags', 'bob', 'red'), sc_add('tags', 'bob', 'blue');
SELECT k, sc_count('tags', k) FROM unnest(ARRAY['alice', 'Alice', 'bob', 'carol']) k
 ORDER BY k COLLATE "C";
SELECT sc_count_keys_text('tags', ARRAY['alice', 'bob']) AS alice_bob,
       sc_count_keys_text('tags', ARRAY['alice', 'Alice']) AS both_alices,
       sc_count_keys_text('tags', ARRAY['carol']) AS carol,
       sc_count_keys_text('tags', ARRAY[]::text[]) AS no_key;
SELECT sc_sketch('tags', 'alice') = sc_sketch('tags', 'alice'::text) AS same_key;
-- on a counter keyed by bigint, a key given as text is read as a bigint
SELECT sc_add('visitors', '1', 'carol') AS carol, sc_count('visitors', '1') AS text_key,
       sc_count('visitors', 1) AS bigint_key,
       sc_count_keys_text('visitors', ARRAY['1', '2']) AS text_keys;
SELECT sc_add('visitors', 'one', 'x');
\echo :LAST_ERROR_SQLSTATE

-- what is stored: sc_rollup() writes a buffered key's sketch to slotted_counter.key_sketches
-- and its estimate to slotted_counter.key_values, as sc_sketch and sc_count read them
SELECT count(*) AS stored FROM slotted_counter.key_sketches WHERE counter = :visitors_id;
SELECT sc_rollup() >= 0 AS flushed;
SELECT s.key, s.bucket, v.value, v.value = sc_count('visitors', s.key) AS value_is_count,
       s.sketch = sc_sketch('visitors', s.key) AS sketch_is_sc_sketch
  FROM slotted_counter.key_sketches s
  JOIN slotted_counter.key_values v USING (counter, key, bucket)
 WHERE s.counter = :visitors_id ORDER BY s.key;
SELECT sketch FROM slotted_counter.key_sketches WHERE counter = :visitors_id AND key = 3;
-- a flush again changes nothing; adds after it are read with it and flushed as its union
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_add('visitors', 3, 'x'), sc_add('visitors', 3, 42), sc_count('visitors', 3);
SELECT sc_rollup() >= 0 AS flushed;
SELECT v.value, slotted_counter.sketch_count(s.sketch) AS stored_count
  FROM slotted_counter.key_sketches s
  JOIN slotted_counter.key_values v USING (counter, key, bucket)
 WHERE s.counter = :visitors_id AND s.key = 3;
-- a buffered add is done at the call: ROLLBACK leaves it, as nextval
BEGIN;
SELECT sc_add('visitors', 6, 'kept');
ROLLBACK;
SELECT sc_count('visitors', 6);

-- buckets: an add at a time goes into the bucket that holds it (a day here); a key's count is the
-- union of its buckets, or of those that start in [since, until)
SELECT c, sc_add(c, 1, 'a', '2026-11-20 10:00+00') AS a_20th,
       sc_add(c, 1, 'b', '2026-11-20 23:59:59+00') AS b_20th,
       sc_add(c, 1, 'a', '2026-11-21 08:00+00') AS a_21st,
       sc_add(c, 1, 'a', '2026-11-21 09:00+00') AS a_21st_again,
       sc_add(c, 1, 'c', '2026-11-22 00:00+00') AS c_22nd,
       sc_add(c, 2, 'd', '2026-11-21 12:00+00') AS key_2_d_21st
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
SELECT c, sc_count(c, 1) AS all_days,
       sc_count(c, 1, '2026-11-20+00', '2026-11-21+00') AS the_20th,
       sc_count(c, 1, '2026-11-21+00', '2026-11-22+00') AS the_21st,
       sc_count(c, 1, '2026-11-20+00', '2026-11-22+00') AS the_20th_21st,
       sc_count(c, 1, '2026-11-21+00', NULL) AS from_the_21st,
       sc_count(c, 1, NULL, '2026-11-21+00') AS before_the_21st,
       sc_count(c, 1, '2026-11-20 12:00+00', '2026-11-21+00') AS from_noon,
       sc_count(c, 1, '2026-11-21+00', '2026-11-21+00') AS empty_range,
       sc_count(c, 1, NULL, NULL) AS unbounded
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
SELECT c, sc_count_total(c) AS total,
       sc_count_total(c, '2026-11-21+00', '2026-11-22+00') AS total_21st,
       sc_count_keys(c, ARRAY[1, 2]) AS keys_1_2,
       slotted_counter.sketch_count(sc_sketch(c, 1, '2026-11-21+00', '2026-11-23+00'))
         AS sketch_21st_22nd,
       sc_sketch(c, 1, '2026-11-23+00', NULL) AS later
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
-- once flushed, one row per key and bucket, with its estimate
SELECT sc_rollup() >= 0 AS flushed;
SELECT c.name, s.key, s.bucket AT TIME ZONE 'UTC' AS bucket, v.value
  FROM slotted_counter.key_sketches s JOIN slotted_counter.counters c ON c.id = s.counter
  JOIN slotted_counter.key_values v ON (v.counter, v.key, v.bucket) = (s.counter, s.key, s.bucket)
 WHERE c.name IN ('daily', 'daily_t') ORDER BY 1, 2, 3;
-- (an add to an earlier day, not flushed yet)
SELECT c, sc_add(c, 1, 'e', '2026-11-19 12:00+00') AS e_19th,
       sc_count(c, 1, NULL, '2026-11-21+00') AS before_the_21st
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
-- sc_drop_buckets drops the buckets that start before a time, flushed or not: their rows go, and
-- their elements with them (key 1's of the 19th and the 20th)
SELECT c, sc_drop_buckets(c, '2026-11-21+00') AS dropped
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
SELECT c.name, s.key, s.bucket AT TIME ZONE 'UTC' AS bucket
  FROM slotted_counter.key_sketches s JOIN slotted_counter.counters c ON c.id = s.counter
 WHERE c.name IN ('daily', 'daily_t') ORDER BY 1, 2, 3;
SELECT c.name, v.key, v.bucket AT TIME ZONE 'UTC' AS bucket
  FROM slotted_counter.key_values v JOIN slotted_counter.counters c ON c.id = v.counter
 WHERE c.name IN ('daily', 'daily_t') ORDER BY 1, 2, 3;
SELECT c, sc_count(c, 1) AS all_days, sc_count(c, 1, NULL, '2026-11-21+00') AS before_the_21st,
       sc_count_total(c) AS total
  FROM (VALUES ('daily'), ('daily_t')) v(c) ORDER BY c;
SELECT sc_rollup() >= 0 AS flushed;
SELECT c.name, count(*) AS sketches,
       count(*) FILTER (WHERE s.bucket < '2026-11-21+00') AS before_the_21st
  FROM slotted_counter.key_sketches s JOIN slotted_counter.counters c ON c.id = s.counter
 WHERE c.name IN ('daily', 'daily_t') GROUP BY 1 ORDER BY 1;
-- a transaction's own adds to the buckets it drops go with them, as its own increments of an
-- ordinary counter do (they were no stored value: none counted as dropped); its adds to the
-- others stay
BEGIN;
SELECT sc_add('daily_t', 3, 'x', '2026-11-19 12:00+00') AS x_19th,
       sc_add('daily_t', 3, 'y', '2026-11-22 12:00+00') AS y_22nd;
SELECT sc_drop_buckets('daily_t', '2026-11-21+00') AS dropped;
SELECT sc_count('daily_t', 3) AS key_3,
       sc_count('daily_t', 3, NULL, '2026-11-21+00') AS before_the_21st;
COMMIT;
SELECT sc_count('daily_t', 3) AS key_3,
       sc_count('daily_t', 3, NULL, '2026-11-21+00') AS before_the_21st;
SELECT sc_rollup() >= 0 AS flushed;
SELECT s.key, s.bucket AT TIME ZONE 'UTC' AS bucket,
       slotted_counter.sketch_count(s.sketch) AS sketch
  FROM slotted_counter.key_sketches s JOIN slotted_counter.counters c ON c.id = s.counter
 WHERE c.name = 'daily_t' AND s.key = 3 ORDER BY 2;
-- an unbucketed counter has no buckets to drop (its bucket is no time), nor ranges to read
SELECT sc_drop_buckets('visitors', '2026-11-21+00');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('visitors', 1, '2026-11-20+00', '2026-11-21+00');
\echo :LAST_ERROR_SQLSTATE
-- with a retention: the adds of now are counted
SELECT sc_add('recent', 1, 'a'), sc_add('recent', 1, 'b'), sc_add('recent', 1, 'a'),
       sc_count('recent', 1), sc_count_total('recent');

-- transactional: an add is pending until COMMIT, and the transaction sees its own adds
BEGIN;
SELECT sc_add('visitors_t', 7, 'a') AS a, sc_add('visitors_t', 7, 'b') AS b,
       sc_add('visitors_t', 7, 'a') AS a_again;
SELECT sc_count('visitors_t', 7) AS own_adds,
       sc_count_keys('visitors_t', ARRAY[7, 1]) AS with_key_1,
       sc_count_total('visitors_t') AS total,
       slotted_counter.sketch_count(sc_sketch('visitors_t', 7)) AS sketch;
SELECT count(*) AS stored_before_commit FROM slotted_counter.key_sketches
 WHERE counter = :visitors_t_id AND key = 7;
COMMIT;
SELECT sc_count('visitors_t', 7);
-- once flushed, the key's sketch and its estimate are stored
SELECT sc_rollup() >= 0 AS flushed;
SELECT v.value, slotted_counter.sketch_count(s.sketch) AS stored_count
  FROM slotted_counter.key_sketches s
  JOIN slotted_counter.key_values v USING (counter, key, bucket)
 WHERE s.counter = :visitors_t_id AND s.key = 7;
-- an element committed already changes nothing
SELECT sc_add('visitors_t', 7, 'a') AS a, sc_add('visitors_t', 7, 'c') AS c;
-- ROLLBACK discards the adds
BEGIN;
SELECT sc_add('visitors_t', 8, 'a'), sc_add('visitors_t', 8, 'b'), sc_add('visitors_t', 7, 'd');
SELECT sc_count('visitors_t', 8) AS key_8, sc_count('visitors_t', 7) AS key_7;
ROLLBACK;
SELECT sc_count('visitors_t', 8) AS key_8, sc_count('visitors_t', 7) AS key_7;
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS stored FROM slotted_counter.key_sketches
 WHERE counter = :visitors_t_id AND key = 8;
-- ROLLBACK TO SAVEPOINT discards the adds after the savepoint only
BEGIN;
SELECT sc_add('visitors_t', 8, 'a');
SAVEPOINT s;
SELECT sc_add('visitors_t', 8, 'b'), sc_add('visitors_t', 8, 'a') AS a_again;
SELECT sc_count('visitors_t', 8);
ROLLBACK TO SAVEPOINT s;
SELECT sc_count('visitors_t', 8);
SELECT sc_add('visitors_t', 8, 'b') AS b_again;
SAVEPOINT t;
SELECT sc_add('visitors_t', 8, 'c');
RELEASE SAVEPOINT t;
COMMIT;
SELECT sc_count('visitors_t', 8);
-- a subtransaction rolled back by an exception block discards its adds too
DO $$
BEGIN
  PERFORM sc_add('visitors_t', 8, 'undone');
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
  NULL;
END $$;
SELECT sc_count('visitors_t', 8);
-- a transaction that added cannot be prepared (0A000): it is rolled back, adds and all
BEGIN;
SELECT sc_add('visitors_t', 9, 'a');
PREPARE TRANSACTION 'added';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts;
SELECT sc_count('visitors_t', 9);

-- the arguments of a call: NULL is 22004, an unknown counter 42704
SELECT sc_add(NULL, 1, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('visitors', NULL::bigint, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('visitors', 1, NULL::text);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('visitors', 1, NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('tags', NULL::text, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('visitors', NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_keys('visitors', NULL::bigint[]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_keys('visitors', ARRAY[1, NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('no_such_counter', 1, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('no_such_counter', 1);
\echo :LAST_ERROR_SQLSTATE
-- a bucketed counter refuses an infinite time (22008)
SELECT sc_add('daily', 1, 'a', 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('visitors', 1) AS unchanged;

-- a distinct counter counts nothing else: the functions of the other kinds refuse it (42809) ...
CREATE TABLE distinct_target (id bigint PRIMARY KEY, v bigint);
SELECT sc_incr('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('visitors_t', 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('daily', 1, 1, '2026-11-21+00');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('tags', 'alice');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_bounded('visitors', 1, 1, 0, 10);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('visitors', 1, 1, 'request-1');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('visitors', ARRAY[1, 2], ARRAY[1, 1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch_text('tags', ARRAY['alice'], ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('visitors', 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('visitors_t', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('tags', 'alice');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum_keys('visitors', ARRAY[1, 2]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('daily', 1, '2026-11-21+00', '2026-11-22+00');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_series('daily', 1, '2026-11-21+00', '2026-11-22+00');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('visitors');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('daily_t', '2026-11-21+00', '2026-11-22+00');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top('visitors', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top_text('tags', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('visitors', 'distinct_target', 'id', 'v');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
-- ... and none of them changed it
SELECT sc_count('visitors', 1) AS key_1, sc_count('visitors_t', 1) AS key_1_t,
       sc_count('tags', 'alice') AS alice,
       (SELECT count(*) FROM slotted_counter.attachments) AS attachments;
-- nor do sc_add and the distinct reads apply to a counter of another kind (42809)
SELECT sc_add('plain', 1, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('plain', 1, 42);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_add('lim', 1, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('plain', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('lim', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_keys('plain', ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_total('plain');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sketch('plain', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_total('lim');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('plain', 1) AS plain_still_counts;

-- privileges: a new counter is its owner's alone; sc_add needs UPDATE on it, the reads SELECT
-- (42501), as sc_grant gives them
CREATE ROLE sc_distinct_user;
SET ROLE sc_distinct_user;
SELECT sc_add('visitors', 1, 'dave');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_keys('visitors', ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_count_total('visitors');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sketch('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT slotted_counter.sketch_total('visitors');
\echo :LAST_ERROR_SQLSTATE
-- the stored sketches of a counter it may not read, it does not see
SELECT count(*) AS visible_sketches FROM slotted_counter.key_sketches WHERE counter = :visitors_id;
RESET ROLE;
SELECT sc_grant('visitors', 'SELECT', 'sc_distinct_user');
SET ROLE sc_distinct_user;
SELECT sc_count('visitors', 1), sc_count_keys('visitors', ARRAY[1, 2]),
       sc_count_total('visitors') > 0 AS total;
SELECT count(*) > 0 AS visible_sketches FROM slotted_counter.key_sketches
 WHERE counter = :visitors_id;
SELECT sc_add('visitors', 1, 'dave');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_grant('visitors', 'UPDATE', 'sc_distinct_user'),
       sc_revoke('visitors', 'SELECT', 'sc_distinct_user');
SET ROLE sc_distinct_user;
SELECT sc_add('visitors', 1, 'dave') AS dave, sc_add('visitors', 1, 'dave') AS dave_again;
SELECT sc_count('visitors', 1);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_count('visitors', 1);
SELECT sc_revoke('visitors', 'ALL', 'sc_distinct_user');
DROP ROLE sc_distinct_user;

-- sc_drop removes the counter's sketches with its values, those in the buffer too (key 1's dave
-- and key 30's, not flushed); a counter of the same name is a new one
SELECT sc_add('visitors', 30, 'unflushed');
SELECT count(*) AS sketches FROM slotted_counter.key_sketches
 WHERE counter IN (:visitors_id, :daily_id);
SELECT sc_drop('visitors'), sc_drop('daily');
SELECT count(*) AS sketches FROM slotted_counter.key_sketches
 WHERE counter IN (:visitors_id, :daily_id);
SELECT count(*) AS values FROM slotted_counter.key_values
 WHERE counter IN (:visitors_id, :daily_id);
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS sketches FROM slotted_counter.key_sketches
 WHERE counter IN (:visitors_id, :daily_id);
SELECT sc_create('visitors', 'buffered', kind => 'distinct');
SELECT sc_count('visitors', 1), sc_count('visitors', 30), sc_count_total('visitors'),
       sc_sketch('visitors', 1);

-- (and a transactional counter's committed adds not flushed yet)
SELECT sc_add('visitors_t', 1, 'unflushed'), sc_add('daily_t', 1, 'unflushed', '2026-11-22+00');
SELECT sc_drop('visitors'), sc_drop('visitors_t'), sc_drop('tags'), sc_drop('daily_t'),
       sc_drop('recent'), sc_drop('plain'), sc_drop('lim');
SELECT (SELECT count(*) FROM slotted_counter.key_sketches) AS sketches_left,
       (SELECT count(*) FROM slotted_counter.sketch_deltas) AS unflushed_left,
       (SELECT count(*) FROM slotted_counter.key_values) AS values_left;
SELECT sc_rollup() >= 0 AS flushed;
SELECT (SELECT count(*) FROM slotted_counter.key_sketches) AS sketches_left,
       (SELECT count(*) FROM slotted_counter.key_values) AS values_left;
DROP TABLE distinct_target;
