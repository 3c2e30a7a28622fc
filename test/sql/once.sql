-- sc_incr_once: an increment that applies once per request id (within
-- slotted_counter.dedupe_window); a repeat applies nothing and returns the first call's value.
\set VERBOSITY terse
SELECT sc_create('payments', 'buffered'), sc_create('payments_t');
-- a payment webhook delivered three times counts once; every delivery gets the first value
SELECT sc_incr_once('payments', 7, 100, 'evt_1') AS first, sc_incr_once('payments', 7, 100, 'evt_1') AS retry,
       sc_incr_once('payments', 7, 100, 'evt_1') AS again, sc_sum('payments', 7) AS value;
SELECT sc_incr_once('payments_t', 7, 100, 'evt_1') AS first, sc_incr_once('payments_t', 7, 100, 'evt_1') AS retry,
       sc_sum('payments_t', 7) AS value;
-- another id counts; the id decides, whatever key or delta a repeat names
SELECT sc_incr_once('payments', 7, 50, 'evt_2') AS other_id, sc_incr_once('payments', 8, 999, 'evt_1') AS repeat,
       sc_sum('payments', 7) AS key_7, sc_sum('payments', 8) AS key_8;
-- ids are per counter
SELECT sc_incr_once('payments_t', 8, 1, 'evt_2') AS same_id_other_counter;
-- a flush writes the buffered ids with their increments; the table answers after it
SELECT sc_rollup() >= 0 AS flushed;
SELECT c.name, r.request_id, r.key, r.bucket, r.result
  FROM slotted_counter.requests r JOIN slotted_counter.counters c ON c.id = r.counter ORDER BY 1, 2;
SELECT sc_incr_once('payments', 7, 100, 'evt_1') AS after_flush, sc_sum('payments', 7) AS value;
-- transactional: the id commits with the increment; rolled back, a retry applies
BEGIN;
SELECT sc_incr_once('payments_t', 1, 5, 'evt_9');
ROLLBACK;
SELECT sc_incr_once('payments_t', 1, 5, 'evt_9') AS retried, sc_sum('payments_t', 1) AS value;
BEGIN;
SELECT sc_incr_once('payments_t', 2, 5, 'evt_10') AS first, sc_incr_once('payments_t', 2, 5, 'evt_10') AS repeat;
COMMIT;
SELECT sc_sum('payments_t', 2) AS once;
-- buffered: the increment is made at the call, as sc_incr's, and a rollback keeps both
BEGIN;
SELECT sc_incr_once('payments', 2, 5, 'evt_11');
ROLLBACK;
SELECT sc_incr_once('payments', 2, 5, 'evt_11') AS repeat, sc_sum('payments', 2) AS value;
-- bucketed: the first call's bucket
SELECT sc_create('daily', 'buffered', '1 day');
SELECT sc_incr_once('daily', 1, 1, 'r1', '2026-01-01 10:00+00') AS first,
       sc_incr_once('daily', 1, 1, 'r1', '2026-01-02 10:00+00') AS repeat,
       sc_sum('daily', 1, '2026-01-02', NULL) AS second_day, sc_sum('daily', 1) AS value;
-- the arguments
SELECT sc_incr_once('payments', 1, 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments', 1, 1, '');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments', 1, 1, repeat('x', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments', 1, 1, repeat('x', 255)) AS longest;
SELECT sc_incr_once('payments', NULL, 1, 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('no_such', 1, 1, 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments', 1, 1, 'k', '2026-01-01');
\echo :LAST_ERROR_SQLSTATE
-- an overflow counts nothing and keeps no id: the retry with a fixed delta applies
SELECT sc_set('payments', 3, 9223372036854775807);
SELECT sc_incr_once('payments', 3, 1, 'ovf');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments', 3, -7, 'ovf') AS applied;
SELECT sc_set('payments_t', 3, 9223372036854775807);
SELECT sc_incr_once('payments_t', 3, 1, 'ovf');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_once('payments_t', 3, -7, 'ovf') AS applied;
-- privileges: UPDATE, as sc_incr; the ids' rows only for readers of the counter
CREATE ROLE sc_once_reader;
SELECT sc_grant('payments', 'SELECT', 'sc_once_reader');
SET ROLE sc_once_reader;
SELECT sc_incr_once('payments', 1, 1, 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT DISTINCT counter::slotted_counter FROM slotted_counter.requests;
RESET ROLE;
-- an id whose row is older than the window (here a row put in by hand: no session has the id in
-- memory) applies again, and the flush takes its row over with the new result and time (it
-- inserts new ids in bulk, and upserts them all when one of them has a row); a new id flushed
-- with it keeps its own
INSERT INTO slotted_counter.requests (counter, request_id, key, bucket, result, applied_at)
  VALUES ('payments'::slotted_counter::integer, 'old_1', 5, '-infinity', 77, now() - interval '2 days');
SELECT sc_incr_once('payments', 5, 100, 'old_1') AS applies_again,
       sc_incr_once('payments', 5, 1000, 'new_1') AS new_id;
SELECT sc_rollup() >= 0 AS flushed;
SELECT request_id, key, result, applied_at > now() - interval '1 hour' AS recent
  FROM slotted_counter.requests WHERE request_id IN ('old_1', 'new_1') ORDER BY request_id;
SELECT sc_sum('payments', 5);
-- a dropped counter takes its ids: made again, the same id applies
SELECT sc_drop('payments');
SELECT sc_create('payments', 'buffered');
SELECT sc_incr_once('payments', 7, 100, 'evt_1') AS applies_again;
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*) AS rows_of_new_counter FROM slotted_counter.requests WHERE counter = 'payments'::slotted_counter::integer;
SELECT sc_drop('payments'), sc_drop('payments_t'), sc_drop('daily');
SELECT count(*) AS none_left FROM slotted_counter.requests;
DROP ROLE sc_once_reader;
