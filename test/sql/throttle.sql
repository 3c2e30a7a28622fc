-- Rate limiters: sc_create(..., rate, per, burst) makes a counter a limiter (GCRA), and
-- sc_throttle(limiter, key, cost) takes cost units of the key when they fit, else nothing. A fresh
-- key admits burst units at once, then rate units per `per`, one every per / rate. The clock
-- moves between calls: the intervals a call returns are shown as checks of their range, never as
-- they are.
-- (A cost below names the row, i, so that sc_throttle runs once per row: a function in FROM that
-- names nothing of the rows before it runs once for them all.)
\set VERBOSITY terse
SELECT sc_create('api', 'buffered', rate => 1, per => '1 hour', burst => 5),
       sc_create('api_t', rate => 1, per => '1 hour', burst => 5),
       sc_create('quota', rate => 10, per => '1 day'),
       sc_create('plain', 'buffered');
-- the limit is in the catalog (a NULL burst is the rate); retain is the time a used key takes to
-- be full again, burst × per / rate; the other counters have none
SELECT name, durability, bucket, retain, key_type, rate, per, burst
  FROM slotted_counter.counters WHERE name IN ('api', 'api_t', 'quota', 'plain') ORDER BY id;

-- 20 calls at once on a fresh key admit exactly the burst, the first five, each leaving one unit
-- less; a refused call would fit in just under an hour, when the first unit is back, and the key
-- is full again in just under five
SELECT c, count(*) FILTER (WHERE t.allowed) AS admitted,
       string_agg(i::text, ',' ORDER BY i) FILTER (WHERE t.allowed) AS which,
       string_agg(t.remaining::text, ',' ORDER BY i) AS remaining,
       bool_and(t.retry_after = '0') FILTER (WHERE t.allowed) AS admitted_now,
       bool_and(t.retry_after > '59 minutes' AND t.retry_after <= '1 hour')
         FILTER (WHERE NOT t.allowed) AS retry_within_the_hour,
       bool_and(t.reset_after > i * interval '1 hour' - interval '1 minute'
                AND t.reset_after <= i * interval '1 hour')
         FILTER (WHERE t.allowed) AS reset_an_hour_a_unit,
       bool_and(t.reset_after > '4 hours 59 minutes' AND t.reset_after <= '5 hours')
         FILTER (WHERE NOT t.allowed) AS reset_refused
  FROM (VALUES ('api'), ('api_t')) v(c), generate_series(1, 20) i,
       LATERAL sc_throttle(c, 1, i - i + 1) t
 GROUP BY c ORDER BY c;
-- the next call is refused the same way
SELECT c, t.allowed, t.remaining,
       t.retry_after > '59 minutes' AND t.retry_after <= '1 hour' AS retry_within_the_hour
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 1) t ORDER BY c;
-- another key has a burst of its own
SELECT c, count(*) FILTER (WHERE t.allowed) AS admitted, min(t.remaining) AS remaining
  FROM (VALUES ('api'), ('api_t')) v(c), generate_series(1, 7) i,
       LATERAL sc_throttle(c, 2, i - i + 1) t
 GROUP BY c ORDER BY c;

-- cost 0 reads and takes nothing: a fresh key is full (reset_after 0); an empty one admits 0
-- more, and reading it is no refusal
SELECT c, k, t.allowed, t.remaining, t.retry_after = '0' AS no_wait, t.reset_after = '0' AS full
  FROM (VALUES ('api'), ('api_t')) v(c), (VALUES (1), (3)) k(k), LATERAL sc_throttle(c, k, 0) t
 ORDER BY 1, 2;
-- a cost above what is left is refused whole and takes nothing: 3 taken of 5, then 3 more refused
-- (it would fit when the first unit is back), 2 left still, and those 2 are admitted
SELECT c, t.allowed, t.remaining
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 3, 3) t ORDER BY c;
SELECT c, t.allowed, t.remaining,
       t.retry_after > '59 minutes' AND t.retry_after <= '1 hour' AS retry_within_the_hour
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 3, 3) t ORDER BY c;
SELECT c, t.allowed, t.remaining
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 3, 0) t ORDER BY c;
SELECT c, t.allowed, t.remaining, t.retry_after = '0' AS no_wait
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 3, 2) t ORDER BY c;
-- a cost above the burst never fits: refused, with no time to retry after (NULL), on a full key
-- and on an empty one alike; a cost of the whole burst fits a full key
SELECT c, k, t.allowed, t.remaining, t.retry_after IS NULL AS never, t.reset_after = '0' AS full
  FROM (VALUES ('api'), ('api_t')) v(c), (VALUES (1), (4)) k(k), LATERAL sc_throttle(c, k, 6) t
 ORDER BY 1, 2;
SELECT c, t.allowed, t.remaining
  FROM (VALUES ('api'), ('api_t')) v(c), LATERAL sc_throttle(c, 5, 5) t ORDER BY c;
-- an untyped key is read as a bigint on a bigint limiter
SELECT allowed, remaining FROM sc_throttle('api', '7', 4);
SELECT allowed, remaining FROM sc_throttle('api', 7, 0);

-- text keys: each text has a burst of its own, compared by its bytes
SELECT sc_create('login', 'buffered', key_type => 'text', rate => 3, per => '1 day'),
       sc_create('login_t', key_type => 'text', rate => 3, per => '1 day');
SELECT name, durability, key_type, rate, per, burst FROM slotted_counter.counters
 WHERE name IN ('login', 'login_t') ORDER BY id;
SELECT c, k, count(*) FILTER (WHERE t.allowed) AS admitted, min(t.remaining) AS remaining
  FROM (VALUES ('login'), ('login_t')) v(c),
       (VALUES ('alice', 5), ('bob', 1), ('Alice', 2)) k(k, n),
       LATERAL generate_series(1, n) i, LATERAL sc_throttle(c, k, i - i + 1) t
 GROUP BY 1, 2 ORDER BY c, k COLLATE "C";
SELECT c, k, t.allowed, t.remaining, t.retry_after IS NULL AS never
  FROM (VALUES ('login'), ('login_t')) v(c),
       (VALUES ('alice', 0), ('bob', 2), ('bob', 1), ('carol', 4)) k(k, cost),
       LATERAL sc_throttle(c, k, cost) t ORDER BY c, k COLLATE "C", cost DESC;

-- what is stored: the keys that took something (not those only read or refused), once flushed
SELECT sc_rollup() >= 0 AS flushed;
SELECT c.name, string_agg(t.key::text, ',' ORDER BY t.key) AS stored
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name IN ('api', 'api_t') GROUP BY c.name ORDER BY 1;

-- the arguments of a limit (22023)
SELECT sc_create('bad', 'buffered', rate => 0, per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => -1, per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '-1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 hour', burst => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 hour', burst => -5);
\echo :LAST_ERROR_SQLSTATE
-- months have no fixed length
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 month');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 year');
\echo :LAST_ERROR_SQLSTATE
-- rate, per and burst go together; rate with per makes a limiter, nothing else does
SELECT sc_create('bad', 'buffered', rate => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', burst => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', per => '1 hour', burst => 5);
\echo :LAST_ERROR_SQLSTATE
-- a limiter has no buckets, and its retention is its own
SELECT sc_create('bad', 'buffered', '1 hour', rate => 1, per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', retain => '1 day', rate => 1, per => '1 hour');
\echo :LAST_ERROR_SQLSTATE
-- at most one unit a microsecond
SELECT sc_create('bad', 'buffered', rate => 2, per => '1 microsecond');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1000001, per => '1 second');
\echo :LAST_ERROR_SQLSTATE
-- a burst that takes more than 1000 years to come back
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 day', burst => 400000);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '400000 days');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('bad', 'buffered', rate => 1, per => '1 day', burst => 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS not_created FROM slotted_counter.counters WHERE name = 'bad';
-- the limits just inside: one unit a microsecond; a burst back in 999 years and some days
SELECT sc_create('per_microsecond', 'buffered', rate => 1000000, per => '1 second'),
       sc_create('centuries', 'buffered', rate => 1, per => '1 day', burst => 365000);
SELECT name, retain, rate, per, burst FROM slotted_counter.counters
 WHERE name IN ('per_microsecond', 'centuries') ORDER BY id;
SELECT c, t.allowed, t.remaining FROM (VALUES ('per_microsecond'), ('centuries')) v(c),
       LATERAL sc_throttle(c, 1, 1000) t ORDER BY c;
SELECT sc_drop('per_microsecond'), sc_drop('centuries');

-- the arguments of a call: a negative cost is 22023, a NULL 22004, an unknown counter 42704
SELECT * FROM sc_throttle('api', 1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('login', 'alice', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('api', NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('login', NULL::text);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('api', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('no_such_counter', 1);
\echo :LAST_ERROR_SQLSTATE
-- none of them took anything
SELECT allowed, remaining FROM sc_throttle('api', 4, 0);

-- a counter that is not a limiter is no limiter (42809) ...
SELECT * FROM sc_throttle('plain', 1);
\echo :LAST_ERROR_SQLSTATE
-- ... and a limiter counts nothing, by any other function (42809)
CREATE TABLE throttle_target (id bigint PRIMARY KEY, v bigint);
SELECT sc_incr('api', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('api_t', 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr('login', 'alice');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_bounded('api', 1, 1, 0, 10);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('api', 1, 1, 'request-1');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('api', ARRAY[1, 2], ARRAY[1, 1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_set('api', 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('api', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('login', 'alice');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_series('api', 1, now() - interval '1 day', now());
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top('api', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top_text('login', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_rank('api', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_total('api');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_alter_retention('api', '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('api', 'throttle_target', 'id', 'v');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop_buckets('api', now());
\echo :LAST_ERROR_SQLSTATE
-- and none of them changed it
SELECT c.name, c.retain,
       (SELECT count(*) FROM slotted_counter.attachments a WHERE a.counter = c.id) AS attachments
  FROM slotted_counter.counters c WHERE c.name = 'api';
SELECT allowed, remaining FROM sc_throttle('api', 1, 0);

-- transactional: the cost is taken at the call; ROLLBACK gives it back
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
BEGIN;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 4);
SELECT allowed, remaining FROM sc_throttle('quota', 1, 7);
ROLLBACK;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
-- as does ROLLBACK TO SAVEPOINT, for the calls after the savepoint only
BEGIN;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 3);
SAVEPOINT a;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 5);
ROLLBACK TO SAVEPOINT a;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
SAVEPOINT b;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 2);
RELEASE SAVEPOINT b;
COMMIT;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
-- a subtransaction rolled back by an exception block gives its cost back too
DO $$
BEGIN
  PERFORM sc_throttle('quota', 1, 5);
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
  NULL;
END $$;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
-- a refused call in a transaction that commits took nothing
BEGIN;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 6);
COMMIT;
SELECT allowed, remaining FROM sc_throttle('quota', 1, 0);
-- a transaction that throttled cannot be prepared (0A000); it is rolled back, cost and all
BEGIN;
SELECT allowed, remaining FROM sc_throttle('quota', 2, 4);
PREPARE TRANSACTION 'throttled';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts;
SELECT allowed, remaining FROM sc_throttle('quota', 2, 0);

-- buffered: a call takes effect at once and survives ROLLBACK, like nextval
SELECT allowed, remaining FROM sc_throttle('api', 8, 0);
BEGIN;
SELECT allowed, remaining FROM sc_throttle('api', 8, 2);
ROLLBACK;
SELECT allowed, remaining FROM sc_throttle('api', 8, 0);

-- privileges, as for sc_incr: UPDATE on the limiter calls sc_throttle (42501 without it)
CREATE ROLE sc_throttler;
SET ROLE sc_throttler;
SELECT * FROM sc_throttle('quota', 5);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_grant('quota', 'SELECT', 'sc_throttler');
SET ROLE sc_throttler;
SELECT * FROM sc_throttle('quota', 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_throttle('quota', 5, 0);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_grant('quota', 'UPDATE', 'sc_throttler');
SET ROLE sc_throttler;
SELECT allowed, remaining FROM sc_throttle('quota', 5, 3);
SELECT * FROM sc_throttle('api', 5);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_revoke('quota', 'UPDATE', 'sc_throttler');
SET ROLE sc_throttler;
SELECT * FROM sc_throttle('quota', 5);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT allowed, remaining FROM sc_throttle('quota', 5, 0);
SELECT sc_revoke('quota', 'ALL', 'sc_throttler');
DROP ROLE sc_throttler;

-- sc_drop drops a limiter, its keys with it; a new one of the same name starts full
SELECT id AS api_id FROM slotted_counter.counters WHERE name = 'api' \gset
SELECT count(*) > 0 AS stored FROM slotted_counter.key_values WHERE counter = :api_id;
SELECT sc_drop('api');
SELECT * FROM sc_throttle('api', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_create('api', 'buffered', rate => 1, per => '1 hour', burst => 5);
SELECT allowed, remaining FROM sc_throttle('api', 1, 0);
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS rows_left FROM slotted_counter.key_values WHERE counter = :api_id;

SELECT sc_drop('api'), sc_drop('api_t'), sc_drop('quota'), sc_drop('plain'), sc_drop('login'),
       sc_drop('login_t');
DROP TABLE throttle_target;
