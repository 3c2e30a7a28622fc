-- Bucketed counters: counting per time bucket (UTC), reads over ranges, dropping old buckets.
\set VERBOSITY terse
SET TIME ZONE 'UTC';
SELECT sc_create('hits', 'buffered', '1 hour');
SELECT sc_create('visits', 'transactional', '1 day');
SELECT sc_create('buyers', 'buffered', '1 month');
SELECT sc_create('weekly', 'buffered', '7 days');
SELECT sc_create('quarterly', 'transactional', '3 months');
SELECT sc_create('yearly', 'buffered', '1 year');
SELECT sc_create('plain', 'buffered');
SELECT name, durability, bucket FROM slotted_counter.counters ORDER BY id;

-- sc_incr at a time counts into the bucket that holds it and returns that bucket's value
SELECT sc_incr('hits', 1, 1, '2026-11-21 10:00:00+00'),
       sc_incr('hits', 1, 1, '2026-11-21 10:59:59.999999+00'),
       sc_incr('hits', 1, 5, '2026-11-21 11:00:00+00'),
       sc_incr('hits', 1, 1, '2026-11-21 09:30:00+00'),
       sc_incr('hits', 2, 7, '2026-11-21 10:15:00+00');
-- all buckets, a range (since inclusive, until exclusive, by bucket start), open ends
SELECT sc_sum('hits', 1) AS all_buckets,
       sc_sum('hits', 1, '2026-11-21 10:00+00', '2026-11-21 11:00+00') AS ten_oclock,
       sc_sum('hits', 1, '2026-11-21 10:00+00', '2026-11-21 11:00:00.000001+00') AS ten_and_eleven,
       sc_sum('hits', 1, '2026-11-21 10:30+00', '2026-11-21 12:00+00') AS from_half_past_ten,
       sc_sum('hits', 1, NULL, '2026-11-21 10:00+00') AS before_ten,
       sc_sum('hits', 1, '2026-11-21 10:00+00', NULL) AS from_ten,
       sc_sum('hits', 1, '2026-11-21 10:00+00', '2026-11-21 10:00+00') AS empty,
       sc_sum('hits', 3) AS never_counted;
SELECT * FROM sc_series('hits', 1, '-infinity', 'infinity');
SELECT * FROM sc_series('hits', 1, '2026-11-21 10:00+00', '2026-11-21 11:00+00');
SELECT count(*) FROM sc_series('hits', 3, NULL, NULL);
-- a team: the sum over a group of keys and all their buckets (a key listed twice counts once)
SELECT sc_sum_keys('hits', ARRAY[1, 2, 3, 1]);
-- top keys over all buckets, and over a range
SELECT * FROM sc_top('hits', 5);
SELECT * FROM sc_top('hits', 5, '2026-11-21 11:00+00', NULL);
SELECT * FROM sc_top('hits', 1, '2026-11-21 10:00+00', '2026-11-21 11:00+00');
-- a bucket set back to zero is left out of the series, and a series skips the empty hours
SELECT sc_set('hits', 1, 0, '2026-11-21 09:45+00');
SELECT * FROM sc_series('hits', 1, NULL, NULL);
SELECT sc_incr('hits', 1, 3, '2026-11-21 15:00+00');
SELECT * FROM sc_series('hits', 1, NULL, NULL);
-- gaps filled by the caller: every hour of a range, 0 where nothing was counted
SELECT h AS hour, COALESCE(s.value, 0) AS value
FROM generate_series('2026-11-21 10:00+00'::timestamptz, '2026-11-21 15:00+00', '1 hour') h
LEFT JOIN sc_series('hits', 1, '2026-11-21 10:00+00', '2026-11-21 16:00+00') s ON s.bucket = h
ORDER BY h;

-- without a time, writes count at the start of the current statement (statement_timestamp())
SELECT sc_create('current', 'buffered', '1 hour');
DO $$
BEGIN
  PERFORM sc_incr('current', 9);
  PERFORM sc_incr_batch('current', ARRAY[9], ARRAY[2]);
  PERFORM sc_set('current', 8, 4);
  IF (SELECT array_agg(bucket || '=' || value) FROM sc_series('current', 9, NULL, NULL))
     <> ARRAY[date_trunc('hour', statement_timestamp()) || '=3']
     OR sc_sum('current', 8, date_trunc('hour', statement_timestamp()), NULL) <> 4 THEN
    RAISE EXCEPTION 'not counted in the current hour';
  END IF;
END $$;
SELECT sc_sum('current', 9), sc_sum('current', 8);

-- widths: days start at midnight, weeks on Mondays (as date_bin from 2000-01-03), calendar
-- months, quarters and years, all in UTC whatever the session's time zone
SET TIME ZONE 'America/New_York';
SELECT sc_incr('weekly', 1, 1, '2026-11-21 23:00-05');  -- a Saturday, Sunday 04:00 UTC
SET TIME ZONE 'UTC';
SELECT bucket, bucket = date_bin('7 days', '2026-11-22 04:00+00', '2000-01-03') AS as_date_bin,
       extract(isodow FROM bucket) AS isodow
FROM sc_series('weekly', 1, NULL, NULL);
SELECT sc_incr('buyers', 0, 1, '2024-02-29 23:59:59+00'), sc_incr('buyers', 0, 1, '2024-03-01 00:00+00');
SELECT sc_incr('quarterly', 0, 1, '2026-11-21'), sc_incr('quarterly', 0, 1, '1999-02-01');
SELECT sc_incr('yearly', 0, 1, '2026-11-21'), sc_incr('yearly', 0, 1, '1969-12-31 23:59:59+00');
SELECT 'buyers' AS counter, * FROM sc_series('buyers', 0, NULL, NULL)
UNION ALL SELECT 'quarterly', * FROM sc_series('quarterly', 0, NULL, NULL)
UNION ALL SELECT 'yearly', * FROM sc_series('yearly', 0, NULL, NULL) ORDER BY 1, 2;

-- "you're the n-th buyer this month": each month counts from 1 again, without a reset
SELECT sc_incr('buyers', 7, 1, at) AS nth_buyer, at
FROM unnest(ARRAY['2026-10-30', '2026-10-31', '2026-11-01', '2026-11-15', '2026-11-30 23:59:59']
            ::timestamptz[]) AS at;
-- or the reset of seed 004: sc_set to 0 returns the old value
SELECT sc_set('buyers', 7, 0, '2026-11-20');
SELECT sc_incr('buyers', 7, 1, '2026-11-20');

-- transactional: the increment belongs to its transaction
BEGIN;
SELECT sc_incr('visits', 1, 10, '2026-11-20 08:00+00'), sc_incr('visits', 1, 5, '2026-11-21 08:00+00');
SELECT sc_sum('visits', 1), sc_sum('visits', 1, '2026-11-21', NULL);
SELECT * FROM sc_series('visits', 1, NULL, NULL);
ROLLBACK;
SELECT sc_sum('visits', 1), count(*) AS buckets FROM sc_series('visits', 1, NULL, NULL);
BEGIN;
SELECT sc_incr('visits', 1, 10, '2026-11-20 08:00+00'), sc_incr('visits', 1, 5, '2026-11-21 08:00+00');
SAVEPOINT s;
SELECT sc_incr('visits', 1, 100, '2026-11-22 08:00+00');
ROLLBACK TO SAVEPOINT s;
SELECT sc_incr('visits', 2, 3, '2026-11-21 09:00+00');
COMMIT;
SELECT * FROM sc_series('visits', 1, NULL, NULL);
SELECT * FROM sc_top('visits', 5, '2026-11-21', '2026-11-22');
-- this transaction's own increments count in ranges, top and groups before the commit
BEGIN;
SELECT sc_incr('visits', 2, 20, '2026-11-21 10:00+00');
SELECT sc_sum('visits', 2, '2026-11-21', '2026-11-22'), sc_sum_keys('visits', ARRAY[1, 2]);
SELECT * FROM sc_top('visits', 5, '2026-11-21', '2026-11-22');
ROLLBACK;

-- the lagged values: one row per key and bucket, in the table ordinary SQL can read
SELECT sc_rollup() > 0 AS flushed;
SELECT key, bucket, value FROM slotted_counter.key_values
WHERE counter = 'hits'::slotted_counter::integer AND key IN (1, 2) ORDER BY key, bucket;
-- buckets only in the tables (not in the buffer) are read from there, merged with the buffer
INSERT INTO slotted_counter.key_values (counter, key, bucket, value)
VALUES ('hits'::slotted_counter::integer, 1, '2026-01-01 00:00+00', 1000);
INSERT INTO slotted_counter.deltas (counter, key, bucket, delta)
VALUES ('visits'::slotted_counter::integer, 1, '2026-01-01 00:00+00', 50);
SELECT sc_rollup() > 0 AS folded;
SELECT sc_sum('hits', 1), sc_sum('hits', 1, NULL, '2026-02-01'), sc_sum('visits', 1);
SELECT * FROM sc_top('hits', 1);

-- dropping old buckets: transactional, and counted
BEGIN;
SELECT sc_drop_buckets('hits', '2026-11-21 11:00+00');
SELECT * FROM sc_series('hits', 1, NULL, NULL);
SELECT sc_sum('hits', 1), sc_sum('hits', 2);
ROLLBACK;
SELECT sc_sum('hits', 1), sc_sum('hits', 2);
SELECT sc_drop_buckets('hits', '2026-11-21 11:00+00');
SELECT * FROM sc_series('hits', 1, NULL, NULL);
SELECT sc_sum('hits', 1), sc_sum('hits', 2), sc_sum_keys('hits', ARRAY[1, 2]);
SELECT * FROM sc_top('hits', 5, NULL, '2026-11-22');
SELECT count(*) FROM slotted_counter.key_values
WHERE counter = 'hits'::slotted_counter::integer AND bucket < '2026-11-21 11:00+00';
-- a late increment into a dropped hour counts again from 0
SELECT sc_incr('hits', 1, 1, '2026-11-21 10:00+00');
SELECT sc_drop_buckets('hits', '2026-11-21 11:00+00');
SELECT sc_drop_buckets('hits', '2026-11-21 11:00+00');
-- a drop rolled back to a savepoint leaves everything as it was
BEGIN;
SAVEPOINT s;
SELECT sc_drop_buckets('visits', 'infinity');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT sc_sum('visits', 1), sc_sum('visits', 2);
-- a rolled-back drop leaves the tables as they were, and keeps a buffered increment made
-- meanwhile of a bucket that was only in the tables (loaded as the other sessions see it)
INSERT INTO slotted_counter.key_values (counter, key, bucket, value)
VALUES ('hits'::slotted_counter::integer, 5, '2026-01-05 00:00+00', 100);
BEGIN;
SELECT sc_drop_buckets('hits', '2026-02-01');
SELECT sc_incr('hits', 5, 1, '2026-01-05 00:30+00');
ROLLBACK;
SELECT * FROM sc_series('hits', 5, NULL, '2026-02-01');
SELECT sc_rollup() > 0 AS flushed;
SELECT value FROM slotted_counter.key_values
WHERE counter = 'hits'::slotted_counter::integer AND key = 5 AND bucket = '2026-01-05 00:00+00';
-- a transaction's own increments of dropped buckets go with them
BEGIN;
SELECT sc_incr('visits', 3, 4, '2026-11-19'), sc_incr('visits', 3, 6, '2026-11-21');
SELECT sc_drop_buckets('visits', '2026-11-20');
SELECT sc_sum('visits', 3);
COMMIT;
SELECT * FROM sc_series('visits', 3, NULL, NULL);
SELECT sc_sum('visits', 1), sc_sum('visits', 2);
SELECT sc_rollup() >= 0 AS flushed;
SELECT key, bucket, value FROM slotted_counter.key_values
WHERE counter = 'visits'::slotted_counter::integer ORDER BY key, bucket;

-- a transaction that dropped buckets cannot be prepared (0A000), and drops nothing
BEGIN;
SELECT sc_drop_buckets('visits', 'infinity');
PREPARE TRANSACTION 'drop_buckets';
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('visits', 1), sc_sum('visits', 2);
-- bad input changes nothing: a time or a range on an unbucketed counter (22023)
SELECT sc_incr('plain', 1, 1);
SELECT sc_incr('plain', 1, 1, now());
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('plain', 1, 5, now());
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('plain', 1, now(), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_series('plain', 1, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop_buckets('plain', now());
\echo :LAST_ERROR_SQLSTATE
-- NULL ends mean all buckets, so an unbucketed counter answers its one value
SELECT sc_incr('plain', 1, 1, NULL), sc_sum('plain', 1, NULL, NULL);
-- since later than until (22023), an infinite time (22008), NULL where a value is needed (22004)
SELECT sc_sum('hits', 1, '2026-11-22', '2026-11-21');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_series('hits', 1, '2026-11-22', '2026-11-21');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top('hits', 1, '2026-11-22', '2026-11-21');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('hits', 1, 1, 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('hits', 1, 1, '-infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('yearly', 1, 1, '4714-12-01 00:00+00 BC');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop_buckets('hits', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('hits', NULL, now(), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_series(NULL, 1, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('hits', 1, NULL, now());
\echo :LAST_ERROR_SQLSTATE
-- a bucketed counter has no one lagged value to attach (0A000)
CREATE TABLE pages (id bigint PRIMARY KEY, hits bigint);
SELECT sc_attach('hits', 'pages', 'id', 'hits');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('plain', 1), sc_sum('hits', 1), sc_sum('yearly', 1);

SELECT count(sc_drop(c::slotted_counter))
FROM unnest(ARRAY['hits', 'visits', 'buyers', 'weekly', 'quarterly', 'yearly', 'plain', 'current']) c;
DROP TABLE pages;
