-- Retention: sc_create(..., retain) and sc_alter_retention. A bucketed counter's buckets that
-- ended `retain` ago or more are left out of every read at once and dropped by the flusher; an
-- unbucketed counter's keys not written for `retain` are deleted by the flusher (sc_rollup runs
-- a pass at once).
\set VERBOSITY terse
SELECT sc_create('hits_r', 'buffered', '1 hour', '1 day'),
       sc_create('hits_rt', 'transactional', '1 hour', retain => '1 day'),
       sc_create('visits_r', 'buffered', retain => '1 hour'),
       sc_create('visits_rt', retain => '1 hour');
SELECT name, durability, bucket, retain FROM slotted_counter.counters WHERE name LIKE '%\_r%' ORDER BY id;
-- the arguments: positive, at most 1000 years, NULL forever
SELECT sc_create('bad', 'buffered', NULL, '0');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', NULL, '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', NULL, '1 day -1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', NULL, '1001 years');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('forever', 'buffered', NULL, NULL), sc_create('forever', retain => '1 day', if_not_exists => true);
SELECT retain IS NULL AS kept_forever FROM slotted_counter.counters WHERE name = 'forever';
SELECT count(*) AS not_created FROM slotted_counter.counters WHERE name = 'bad';

-- bucketed: three days back, two hours back, now; the first has expired, whatever is stored
SELECT sc_incr(c, 1, 100, now() - interval '3 days'), sc_incr(c, 1, 10, now() - interval '2 hours'),
       sc_incr(c, 1, 1), sc_incr(c, 2, 1000, now() - interval '25 hours')
  FROM (VALUES ('hits_r'), ('hits_rt')) v(c);
SELECT c, sc_sum(c, 1) AS sum, sc_sum(c, 1, NULL, NULL) AS all_buckets,
       sc_sum(c, 1, now() - interval '4 days', now() - interval '2 days') AS expired_range,
       sc_sum_keys(c, '{1,2}') AS keys, (SELECT count(*) FROM sc_series(c, 1, NULL, NULL)) AS series,
       (SELECT string_agg(key || '=' || value, ',') FROM sc_top(c, 10)) AS top
  FROM (VALUES ('hits_r'), ('hits_rt')) v(c);
SELECT sc_rollup() >= 0 AS flushed;
-- the flusher dropped them (from key_values and the buffer); nothing else changed
SELECT c.name, count(*) AS rows, min(t.bucket) >= now() - interval '1 day 1 hour' AS only_retained
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name IN ('hits_r', 'hits_rt') GROUP BY c.name ORDER BY 1;
SELECT sc_sum('hits_r', 1), sc_sum('hits_rt', 1), sc_sum('hits_r', 2), sc_sum('hits_rt', 2);
-- a longer retention brings nothing back
SELECT sc_alter_retention('hits_r', '1 year');
SELECT sc_sum('hits_r', 1, NULL, NULL), sc_sum('hits_r', 2);
-- an increment at an expired time is counted and read nowhere; the next pass drops it
SELECT sc_alter_retention('hits_r', '1 day');
SELECT sc_incr('hits_r', 3, 5, now() - interval '2 days') AS counted, sc_sum('hits_r', 3) AS read;

-- unbucketed: a key last written long ago (its row aged by hand) goes; one written since stays
SELECT sc_incr(c, k, 10) FROM (VALUES ('visits_r'), ('visits_rt')) v(c), generate_series(1, 3) k;
SELECT sc_rollup() >= 0 AS flushed;
UPDATE slotted_counter.key_values SET written_at = now() - interval '2 hours'
 WHERE counter IN ('visits_r'::slotted_counter::integer, 'visits_rt'::slotted_counter::integer);
SELECT sc_incr(c, 2, 1) FROM (VALUES ('visits_r'), ('visits_rt')) v(c);
SELECT sc_rollup() >= 0 AS flushed;
SELECT c, sc_sum(c, 1) AS expired, sc_sum(c, 2) AS written, sc_sum(c, 3) AS expired_too,
       sc_sum_keys(c, '{1,2,3}') AS keys
  FROM (VALUES ('visits_r'), ('visits_rt')) v(c);
SELECT c.name, string_agg(t.key::text, ',' ORDER BY t.key) AS stored
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name IN ('visits_r', 'visits_rt') GROUP BY c.name ORDER BY 1;
-- an expired key starts again from 0
SELECT sc_incr('visits_r', 1, 1), sc_incr('visits_rt', 1, 1);
-- within the retention nothing goes
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_sum('visits_r', 2), sc_sum('visits_rt', 2);
-- a counter without retention keeps its keys whatever their age
SELECT sc_incr('forever', 1, 7);
SELECT sc_rollup() >= 0 AS flushed;
UPDATE slotted_counter.key_values SET written_at = now() - interval '100 years'
 WHERE counter = 'forever'::slotted_counter::integer;
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_sum('forever', 1);
-- NULL: forever, from now on
SELECT sc_alter_retention('visits_r', NULL);
UPDATE slotted_counter.key_values SET written_at = now() - interval '2 hours'
 WHERE counter = 'visits_r'::slotted_counter::integer;
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_sum('visits_r', 2) AS kept;

-- sc_alter_retention: the owner's; the arguments
CREATE ROLE sc_retention_user;
SELECT sc_grant('visits_r', 'ALL', 'sc_retention_user');
SET ROLE sc_retention_user;
SELECT sc_alter_retention('visits_r', '1 day');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_alter_retention('no_such_counter', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_alter_retention(NULL, '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_alter_retention('visits_r', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
-- with its transaction, like any DDL
BEGIN;
SELECT sc_alter_retention('visits_r', '5 minutes');
SELECT retain FROM slotted_counter.counters WHERE name = 'visits_r';
ROLLBACK;
SELECT retain IS NULL AS still_forever FROM slotted_counter.counters WHERE name = 'visits_r';
SELECT sc_drop('visits_r'), sc_drop('visits_rt'), sc_drop('hits_r'), sc_drop('hits_rt'), sc_drop('forever');
DROP OWNED BY sc_retention_user;
DROP ROLE sc_retention_user;
