-- sc_total and sc_total_series: the sum over every key, exact now. sc_rank: 1 + the number of
-- keys with a larger value, the key's own value now, the others' as of the last flush.
\set VERBOSITY terse
SELECT sc_create('views', 'buffered'), sc_create('views_t'),
       sc_create('hits', 'buffered', '1 hour'), sc_create('hits_t', 'transactional', '1 hour');
-- nothing counted: 0
SELECT sc_total('views'), sc_total('views_t'), sc_total('hits'), sc_total('hits_t');
-- values not flushed yet count at once
SELECT count(sc_incr(c, k, k * 10)) FROM (VALUES ('views'), ('views_t')) v(c), generate_series(1, 5) k;
SELECT sc_total('views') AS buffered, sc_total('views_t') AS transactional;
-- stored and resident together, and a key in the buffer since its flush
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_incr('views', 6, 60), sc_incr('views_t', 6, 60), sc_incr('views', 1, 1), sc_incr('views_t', 1, 1);
SELECT sc_total('views') AS buffered, sc_total('views_t') AS transactional;
-- a transaction sees its own increments of a transactional counter, and they go with it
BEGIN;
SELECT sc_incr('views_t', 1, 1000), sc_incr('views_t', 42, 1);
SELECT sc_total('views_t') AS own_pending;
ROLLBACK;
SELECT sc_total('views_t') AS rolled_back;
-- negative values count too
SELECT sc_incr('views', 7, -500), sc_total('views');
-- only the total must be a bigint, not a sum on the way to it (whatever order the keys come in)
SELECT sc_create('edge'), sc_create('edge_b', 'buffered');
SELECT sc_incr(c, 5, 9223372036854775807), sc_incr(c, 1, 10), sc_incr(c, 6, -9223372036854775808)
  FROM (VALUES ('edge'), ('edge_b')) v(c);
SELECT sc_total('edge') AS transactional, sc_total('edge_b') AS buffered;
BEGIN;
SELECT sc_incr('edge', 7, 9223372036854775807), sc_total('edge') AS out_of_range_while_pending;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop('edge'), sc_drop('edge_b');
-- the same through a placeholder
PREPARE total(text) AS SELECT sc_total($1);
EXECUTE total('views');
DEALLOCATE total;

-- bucketed: over a range, and per bucket
SELECT count(sc_incr(c, k, 1, t))
  FROM (VALUES ('hits'), ('hits_t')) v(c), generate_series(1, 3) k,
       (VALUES (timestamptz '2026-11-20 10:05+00'), ('2026-11-20 11:05+00'),
               ('2026-11-20 11:35+00')) w(t);
SELECT sc_total('hits') AS all_buckets, sc_total('hits', '2026-11-20 11:00+00', NULL) AS from_11,
       sc_total('hits_t', NULL, '2026-11-20 11:00+00') AS before_11;
SELECT * FROM sc_total_series('hits', NULL, NULL);
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_incr('hits_t', 9, 100, '2026-11-20 12:00+00');
SELECT * FROM sc_total_series('hits_t', '2026-11-20 11:00+00', '2026-11-20 13:00+00');
SELECT * FROM sc_total_series('hits', '2026-11-20 12:00+00', '2026-11-20 13:00+00') AS nothing;
-- bad input
SELECT sc_total(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('no_such_counter');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('views', now(), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_total_series('views', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('hits', '2026-11-21', '2026-11-20');
\echo :LAST_ERROR_SQLSTATE

-- sc_rank: ties share a rank; a key that reads 0 ranks after every key above 0
SELECT sc_create('points', 'buffered'), sc_create('points_t');
SELECT count(sc_incr(c, k, v))
  FROM (VALUES ('points'), ('points_t')) p(c), (VALUES (1, 50), (2, 30), (3, 30), (4, 10)) kv(k, v);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_rank(c, 1) AS k1, sc_rank(c, 2) AS k2, sc_rank(c, 3) AS k3, sc_rank(c, 4) AS k4,
       sc_rank(c, 99) AS never_counted
  FROM (VALUES ('points'), ('points_t')) p(c);
-- a key's own value is read now; the others' as of the last flush
SELECT sc_incr('points', 4, 90), sc_incr('points_t', 4, 90);
SELECT c, sc_rank(c, 4) AS k4_now, sc_rank(c, 1) AS k1_before_the_flush
  FROM (VALUES ('points'), ('points_t')) p(c);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_rank(c, 1) AS k1_after_the_flush FROM (VALUES ('points'), ('points_t')) p(c);
-- this transaction's own increments count for its own key
BEGIN;
SELECT sc_incr('points_t', 2, 100);
SELECT sc_rank('points_t', 2) AS own_pending;
ROLLBACK;
SELECT sc_rank('points_t', 2) AS rolled_back;
-- a negative value ranks after every key above it (a key that reads 0 is not ranked)
SELECT sc_incr('points', 5, -5), sc_rank('points', 5) AS negative;
-- bucketed: over a range
SELECT sc_incr('hits', 2, 5, '2026-11-20 10:10+00');
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_rank('hits', 1) AS k1, sc_rank('hits', 2) AS k2,
       sc_rank('hits', 1, '2026-11-20 11:00+00', NULL) AS k1_from_11,
       sc_rank('hits', 2, NULL, '2026-11-20 11:00+00') AS k2_before_11;
-- keys_above, sc_rank's count for a value given (the router adds it up over its nodes): sc_rank
-- is 1 + the count above the key's own value, whole or over a range
SELECT bool_and(sc_rank(c, k) = 1 + slotted_counter.keys_above(c, k, sc_sum(c, k))) AS same
  FROM (VALUES ('points'::slotted_counter), ('points_t')) p(c), generate_series(1, 6) k;
SELECT slotted_counter.keys_above('points', 99, 0) AS above_zero,
       slotted_counter.keys_above('points', 99, -1000) AS above_minus_1000,
       slotted_counter.keys_above('points', 99, 1000000) AS above_all;
SELECT sc_rank('hits', 1, '2026-11-20 11:00+00', NULL) =
       1 + slotted_counter.keys_above('hits', 1, sc_sum('hits', 1, '2026-11-20 11:00+00', NULL),
                                      '2026-11-20 11:00+00', NULL) AS ranged_same;
-- bad input
SELECT sc_rank('points', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank('no_such_counter', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank('points', 1, now(), NULL);
\echo :LAST_ERROR_SQLSTATE

-- a key that expired counts in neither
SELECT sc_create('recent', 'buffered', retain => '1 second'), sc_create('recent_t', retain => '1 second');
SELECT count(sc_incr(c, k, k)) FROM (VALUES ('recent'), ('recent_t')) r(c), generate_series(1, 4) k;
SELECT sc_rollup() >= 0 AS flushed;
SELECT pg_sleep(1.1);
SELECT sc_incr('recent', 1, 100), sc_incr('recent_t', 1, 100);
SELECT c, sc_total(c) AS total, sc_rank(c, 1) AS k1, sc_rank(c, 2) AS k2_expired
  FROM (VALUES ('recent'), ('recent_t')) r(c);

-- a role that may not read the counter may not total or rank it
CREATE ROLE rank_total_reader;
SET ROLE rank_total_reader;
SELECT sc_total('views');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank('points', 1);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_grant('points', 'SELECT', 'rank_total_reader');
SET ROLE rank_total_reader;
SELECT sc_rank('points', 1);
RESET ROLE;
DROP OWNED BY rank_total_reader;
DROP ROLE rank_total_reader;

SELECT sc_drop(c) FROM (VALUES ('views'), ('views_t'), ('hits'), ('hits_t'), ('points'),
                               ('points_t'), ('recent'), ('recent_t')) v(c);

-- slotted_counter.counter_totals: one row per counter and bucket, always the sum of the counter's rows
-- of that bucket in slotted_counter.key_values, whatever wrote them; none left by a dropped bucket
-- or counter.
CREATE TEMP VIEW sums_mismatched AS
SELECT count(*) AS mismatched FROM (SELECT counter, bucket, sum(value) AS v FROM slotted_counter.key_values
                                     GROUP BY counter, bucket) t
  FULL JOIN slotted_counter.counter_totals s ON s.counter = t.counter AND s.bucket = t.bucket
 WHERE coalesce(t.v, 0) <> coalesce(s.value, 0);
SELECT sc_create('s_b', 'buffered'), sc_create('s_t'), sc_create('s_h', 'buffered', '1 hour'),
       sc_create('s_ht', 'transactional', '1 hour');
SELECT count(sc_incr(c, k, k, t))
  FROM (VALUES ('s_h'), ('s_ht')) v(c), generate_series(1, 50) k,
       (VALUES (timestamptz '2026-11-20 10:05+00'), ('2026-11-20 11:05+00')) w(t);
SELECT count(sc_incr(c, k, k)) FROM (VALUES ('s_b'), ('s_t')) v(c), generate_series(1, 50) k;
SELECT sc_set('s_b', 3, 9223372036854775807), sc_set('s_b', 4, 9223372036854775807);
SELECT sc_rollup() >= 0 AS flushed;
SELECT * FROM sums_mismatched;
SELECT counter::slotted_counter, bucket, value FROM slotted_counter.counter_totals
 WHERE counter IN ('s_b'::slotted_counter::integer, 's_h'::slotted_counter::integer)
 ORDER BY 1, 2;
-- the sum of bigints need not be one; the total must
SELECT sc_total('s_b');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('s_b', 3, 0), sc_set('s_b', 4, 0), sc_total('s_b') AS back_in_range;
-- a value set from one end of bigint to the other between two flushes: flushed all the same, in
-- two steps (each row stays a bigint)
SELECT sc_set('s_b', 5, 9223372036854775807), sc_rollup() >= 0 AS flushed;
SELECT sc_set('s_b', 5, -9223372036854775808), sc_rollup() >= 0 AS flushed,
       sc_rollup() >= 0 AS flushed_again;
SELECT value FROM slotted_counter.key_values WHERE counter = 's_b'::slotted_counter::integer AND key = 5;
SELECT sc_set('s_b', 5, 5);
-- a batch written through, a set, a rollback, then a dropped bucket
SELECT sc_incr_batch('s_b', ARRAY[1, 2, 1000], ARRAY[5, 5, 5]);
BEGIN;
SELECT sc_incr('s_t', 1, 1000);
ROLLBACK;
SELECT sc_drop_buckets('s_h', '2026-11-20 11:00+00'), sc_drop_buckets('s_ht', '2026-11-20 11:00+00');
SELECT sc_rollup() >= 0 AS flushed;
SELECT * FROM sums_mismatched;
SELECT c, sc_total(c) FROM (VALUES ('s_b'), ('s_t'), ('s_h'), ('s_ht')) v(c);
SELECT count(*) AS sums_of_dropped_buckets FROM slotted_counter.counter_totals
 WHERE counter IN ('s_h'::slotted_counter::integer, 's_ht'::slotted_counter::integer)
   AND bucket < '2026-11-20 11:00+00';
SELECT sc_drop(c) FROM (VALUES ('s_b'), ('s_t'), ('s_h'), ('s_ht')) v(c);
SELECT count(*) AS sums_left FROM slotted_counter.counter_totals;
