-- Expiry exact on read, as a Redis TTL: a key of an unbucketed counter with a retention whose
-- last write was `retain` ago or more reads as never counted, at once, whether or not the flusher
-- has deleted its row, and a write to it counts from 0. A read's "now" is its statement's start;
-- a buffered write's time is when it adds (within its statement), a transactional write's its
-- commit.
-- flush_interval is 0 here: nothing is flushed, and nothing deleted, but by sc_rollup() and by
-- the flush that a committed sc_alter_retention asks for.
-- Every expiry below comes from one pg_sleep(1.1) past a retention of 1 second (sleeping longer is
-- always safe). What must not have expired is read under a retention of 1 hour (a counter created
-- so, or one lengthened to it), or in the statement that wrote it: a slow machine cannot expire it.
\set VERBOSITY terse
-- whatever earlier tests asked the flusher for is done before these keys exist
SELECT sc_rollup() >= 0 AS settled;
SELECT sc_create('exp_b', 'buffered', retain => '1 second'),
       sc_create('exp_t', 'transactional', retain => '1 second'),
       sc_create('top_b', 'buffered', retain => '1 second'),
       sc_create('top_t', 'transactional', retain => '1 second'),
       sc_create('live_b', 'buffered', retain => '1 hour'),
       sc_create('live_t', 'transactional', retain => '1 hour'),
       sc_create('short_b', 'buffered', retain => '1 hour'),
       sc_create('short_t', 'transactional', retain => '1 hour'),
       sc_create('kept_b', 'buffered'),
       sc_create('kept_t'),
       sc_create('hourly_b', 'buffered', '1 hour', '1 second');

-- slotted_counter.key_values.written_at (shown by lagged) is the time of the key's last write, not
-- of the flush that stored it: within a buffered write's statement, at a transactional commit
SELECT sc_incr('live_b', 100, 50) AS live_b, statement_timestamp() AS write_started \gset
SELECT clock_timestamp() AS before_commit \gset
SELECT sc_incr('live_t', 100, 50) AS live_t \gset
SELECT clock_timestamp() AS after_commit \gset
\echo :live_b :live_t
SELECT sc_incr('exp_b', 100, 50), sc_incr('exp_t', 100, 50);
SELECT sc_rollup() > 0 AS flushed;
SELECT counter, key, value, written_at BETWEEN :'write_started' AND :'before_commit' AS in_the_write,
       written_at BETWEEN :'before_commit' AND :'after_commit' AS in_the_commit
  FROM slotted_counter.lagged WHERE counter IN ('live_b', 'live_t') ORDER BY 1;

-- the keys that expire, all written before the one sleep (none of them is flushed)
SELECT c, sc_incr_batch(c, '{1,2,3,4,5,7,8,10,11,12,13}',
                        '{100,200,300,400,500,700,800,1000,1100,1200,1300}')
  FROM (VALUES ('exp_b'), ('exp_t'), ('live_b'), ('live_t'), ('short_b'), ('short_t'),
               ('kept_b'), ('kept_t')) v(c);
-- a request id applied before the expiry
SELECT sc_incr_once('exp_b', 6, 60, 'exp-6') AS buffered, sc_incr_once('exp_t', 6, 60, 'exp-6') AS transactional;
-- the largest value of each leaderboard
SELECT sc_incr_batch(c, '{1,2,3}', '{10,20,1000}') FROM (VALUES ('top_b'), ('top_t')) v(c);
-- a bucketed counter: a bucket that ends tomorrow, one that ended an hour ago
SELECT sc_incr('hourly_b', 1, 10, now() + interval '1 day') AS tomorrow,
       sc_incr('hourly_b', 1, 1, now() - interval '2 hours') AS ended;
-- a transaction that writes before the expiry and commits after it (the sleep): expiry is
-- decided at commit, so its delta counts from 0
BEGIN;
SELECT sc_incr('exp_t', 13, 3) > 0 AS pending;
-- the sleep. A statement reads as of its start: key 20, written before the sleep, reads its
-- value after it in the statement; so does key 21, written after the sleep.
SELECT sc_incr('exp_b', 20, 5) AS k20, pg_sleep(1.1), sc_incr('exp_b', 21, 5) AS k21,
       sc_sum('exp_b', 20) AS k20_read, sc_sum('exp_b', 21) AS k21_read;
COMMIT;

-- Every key written before the sleep reads 0, in every read, though nothing deleted it (exp_t's
-- key 13, committed after the sleep, and exp_b's key 21, written at its end, are left out)
SELECT c, sc_sum(c, 1) AS k1, sc_sum(c, 10) AS largest, sc_sum(c, 20) AS k20,
       sc_sum_keys(c, '{1,2,3,4,5,6,7,8,10,11,12,20}') AS keys,
       (SELECT count(*) FROM sc_top(c, 100) t WHERE t.key NOT IN (13, 21)) AS ranked
  FROM (VALUES ('exp_b'), ('exp_t')) v(c);
SELECT * FROM sc_top('top_b', 10);
SELECT * FROM sc_top('top_t', 10);
-- ... and the lagged values leave out what expired, stored or not
SELECT counter, key, value FROM slotted_counter.lagged
 WHERE counter IN ('exp_b', 'exp_t', 'live_b', 'live_t') ORDER BY 1, 2;
-- within its retention a key keeps its value; without a retention, or with buckets (which expire
-- by their end), nothing changes
SELECT c, sc_sum(c, 1) AS k1, sc_sum(c, 10) AS largest,
       sc_sum_keys(c, '{1,2,3,4,5,7,8,10,11,12,13}') AS keys
  FROM (VALUES ('live_b'), ('live_t'), ('short_b'), ('short_t'), ('kept_b'), ('kept_t')) v(c);
SELECT * FROM sc_top('live_b', 3);
SELECT * FROM sc_top('live_t', 3);
SELECT sc_sum('hourly_b', 1) AS tomorrow_only;
-- keys only in the table (as after a restart, an eviction or a restore), last written 2 hours
-- and 30 minutes ago, of counters of 1 hour: the first reads 0 everywhere, the second its value
INSERT INTO slotted_counter.key_values (counter, key, value, written_at)
SELECT c::slotted_counter::integer, k, v, now() - w
  FROM (VALUES ('live_b'), ('live_t')) v(c),
       (VALUES (200, 2000, interval '2 hours'), (201, 5, interval '30 minutes')) x(k, v, w);
SELECT c, (SELECT string_agg(t.key || ':' || t.value, ',' ORDER BY t.value DESC) FROM sc_top(c, 2) t) AS top
  FROM (VALUES ('live_b'), ('live_t')) v(c);
SELECT c, sc_sum(c, 200) AS k200, sc_sum(c, 201) AS k201, sc_sum_keys(c, '{200,201}') AS keys,
       (SELECT string_agg(l.key || ':' || l.value, ',' ORDER BY l.key) FROM slotted_counter.lagged l
         WHERE l.counter = c AND l.key >= 200) AS lagged
  FROM (VALUES ('live_b'), ('live_t')) v(c);

-- A write to an expired key counts from 0: sc_incr returns its delta, sc_set the old value 0,
-- sc_incr_bounded checks its bounds against 0 (-5 from 0 goes below 0: refused; +50 from 0
-- stays within 60), sc_incr_once applies from 0 and a repeat returns that, and an id applied
-- before the expiry still returns its first value and applies nothing.
SELECT c, sc_incr(c, 1, 5) AS incr, sc_set(c, 2, 7) AS set_old,
       sc_incr_bounded(c, 3, -5, 0, 1000) AS refused, sc_incr_bounded(c, 4, 50, 0, 60) AS bounded,
       sc_incr_once(c, 5, 4, 'exp-5') AS once, sc_incr_once(c, 5, 4, 'exp-5') AS repeat,
       sc_incr_once(c, 6, 60, 'exp-6') AS repeat_from_before
  FROM (VALUES ('exp_b'), ('exp_t')) v(c);
SELECT sc_sum('exp_b', 6) AS buffered, sc_sum('exp_t', 6) AS transactional;
-- a batch counts each expired key from 0 (key 9 was never counted)
SELECT c, sc_incr_batch(c, '{7,8,7,9}', '{1,2,3,4}') FROM (VALUES ('exp_b'), ('exp_t')) v(c);
-- a key expired, then written, then read (in the statement that wrote it)
SELECT sc_incr('exp_b', 12, 3) AS written, sc_sum('exp_b', 12) AS read,
       sc_sum_keys('exp_b', '{12}') AS keys;
-- a transactional increment returns this transaction's own delta; its reads show the same
BEGIN;
SELECT sc_incr('exp_t', 12, 5);
SELECT sc_incr('exp_t', 12, 2) AS incr, sc_sum('exp_t', 12) AS sum, sc_sum_keys('exp_t', '{12}') AS keys;
COMMIT;
-- a rollback: the buffered increment stays (read below); the transactional key is still expired
BEGIN;
SELECT sc_incr('exp_b', 11, 5) AS buffered, sc_incr('exp_t', 11, 5) AS transactional;
ROLLBACK;
SELECT sc_sum('exp_t', 11) AS rolled_back;
-- the leaderboards: the largest key expired, three keys written since, listed in the statement
-- (buffered) or the transaction (transactional) that wrote them
CREATE FUNCTION expiry_written_top(c slotted_counter, keys bigint[], deltas bigint[])
RETURNS TABLE(key bigint, value bigint) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM sc_incr_batch(c, keys, deltas);
  RETURN QUERY SELECT t.key, t.value FROM sc_top(c, 10) t;
END $$;
SELECT * FROM expiry_written_top('top_b', '{1,2,4}', '{5,7,6}');
BEGIN;
SELECT sc_incr_batch('top_t', '{1,2,4}', '{5,7,6}');
SELECT * FROM sc_top('top_t', 10);
COMMIT;

-- A longer retention: with last-write times, a key that read 0 but was never deleted (nor
-- written since) comes back with its value; a key written since its expiry holds what was
-- written since. A refused bound, a repeated request id and a rolled back transactional
-- increment wrote nothing: their keys come back as they were.
SELECT sc_alter_retention(c, '1 hour') FROM (VALUES ('exp_b'), ('exp_t'), ('top_b'), ('top_t')) v(c);
SELECT k, sc_sum('exp_b', k) AS exp_b, sc_sum('exp_t', k) AS exp_t
  FROM unnest('{1,2,3,4,5,6,7,8,9,10,11,12,13,20,21}'::bigint[]) k ORDER BY k;
SELECT * FROM sc_top('top_b', 10);
SELECT * FROM sc_top('top_t', 10);

-- A shorter retention expires live keys at once
SELECT sc_sum_keys('short_b', '{1,2,3}') AS buffered, sc_sum_keys('short_t', '{1,2,3}') AS transactional;
SELECT sc_alter_retention('short_b', '1 second'), sc_alter_retention('short_t', '1 second');
SELECT c, sc_sum(c, 1) AS k1, sc_sum_keys(c, '{1,2,3,4,5,7,8,10,11,12,13}') AS keys,
       (SELECT count(*) FROM sc_top(c, 100)) AS ranked
  FROM (VALUES ('short_b'), ('short_t')) v(c);
-- sc_rollup deletes what expired: a longer retention cannot bring that back
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS stored FROM slotted_counter.key_values
 WHERE counter IN ('short_b'::slotted_counter::integer, 'short_t'::slotted_counter::integer);
SELECT sc_alter_retention('short_b', '1 hour'), sc_alter_retention('short_t', '1 hour');
SELECT c, sc_sum(c, 1) AS k1, sc_sum_keys(c, '{1,2,3,4,5,7,8,10,11,12,13}') AS keys
  FROM (VALUES ('short_b'), ('short_t')) v(c);
-- a flush of a key not written since leaves its time alone
SELECT counter, key, value, written_at BETWEEN :'write_started' AND :'before_commit' AS in_the_write,
       written_at BETWEEN :'before_commit' AND :'after_commit' AS in_the_commit
  FROM slotted_counter.lagged WHERE counter IN ('live_b', 'live_t') AND key = 100 ORDER BY 1;

-- A counter's first retention: its keys' writes carried no time before it, so each value in the
-- buffer counts as written when the retention was set, never sooner (a key written just before
-- does not read 0), and its row gets that time with the next flush.
SELECT sc_create('later_b', 'buffered'), sc_create('later_t');
SELECT sc_incr('later_b', 1, 5), sc_incr('later_t', 1, 5);
SELECT sc_alter_retention('later_b', '1 hour'), sc_alter_retention('later_t', '1 hour');
SELECT sc_sum('later_b', 1) AS buffered, sc_sum('later_t', 1) AS transactional;
SELECT sc_rollup() >= 0 AS flushed;
SELECT counter, value, written_at > now() - interval '1 minute' AS written_lately
  FROM slotted_counter.lagged WHERE counter IN ('later_b', 'later_t') ORDER BY 1;

-- The transaction that shortens a retention reads with it at once (key 1, written before the
-- sleep); its rollback takes it back. A counter's first retention, in the same transaction,
-- counts its values as written then (kept_b's key 1 does not read 0).
BEGIN;
SELECT sc_sum('live_b', 1) AS before, sc_alter_retention('live_b', '1 second');
SELECT sc_sum('live_b', 1) AS shortened;
ROLLBACK;
SELECT sc_sum('live_b', 1) AS rolled_back;
BEGIN;
SELECT sc_alter_retention('kept_b', '1 second');
SELECT sc_sum('kept_b', 1) AS first_retention;
ROLLBACK;

DROP FUNCTION expiry_written_top(slotted_counter, bigint[], bigint[]);
SELECT sc_drop(c) FROM (VALUES ('exp_b'), ('exp_t'), ('top_b'), ('top_t'), ('live_b'), ('live_t'),
                               ('short_b'), ('short_t'), ('kept_b'), ('kept_t'), ('hourly_b'),
                               ('later_b'), ('later_t')) v(c);
