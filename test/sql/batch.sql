-- Batch increments and group sums.
\set VERBOSITY terse
SELECT sc_create('likes', 'buffered');
SELECT sc_create('points');
-- a batch returns each new value, in order; a key listed twice counts twice
SELECT sc_incr_batch('likes', ARRAY[1, 2, 1, 3], ARRAY[10, 20, 5, -1]);
SELECT sc_sum('likes', 1), sc_sum('likes', 2), sc_sum('likes', 3);
SELECT sc_incr_batch('likes', '{}'::bigint[], '{}'::bigint[]);
-- a group sum adds up its keys; a key listed twice counts once, a key never counted is 0
SELECT sc_sum_keys('likes', ARRAY[1, 2, 3]), sc_sum_keys('likes', ARRAY[1, 1, 2, 99]), sc_sum_keys('likes', '{}'::bigint[]);
-- keys not in the buffer are read from the values table (one stored there before a restart)
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES ('likes'::slotted_counter::integer, 777, 40);
SELECT sc_sum_keys('likes', ARRAY[1, 777]);
-- transactional: a batch belongs to its transaction, and a group sum sees the own increments
SELECT sc_incr_batch('points', ARRAY[1, 2], ARRAY[3, 4]);
BEGIN;
SELECT sc_incr_batch('points', ARRAY[1, 2, 3], ARRAY[100, 100, 100]);
SELECT sc_sum_keys('points', ARRAY[1, 2, 3]);
ROLLBACK;
SELECT sc_sum_keys('points', ARRAY[1, 2, 3]);
-- bad input changes nothing: lengths 22023, NULL elements or arrays 22004, two dimensions 22023
SELECT sc_incr_batch('likes', ARRAY[1, 2], ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('likes', ARRAY[1, NULL], ARRAY[1, 1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('likes', ARRAY[1, 2], ARRAY[1, NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('likes', NULL::bigint[], ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_incr_batch('likes', ARRAY[[1, 2]], ARRAY[[1, 2]]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum_keys('likes', ARRAY[1, NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('likes', 1), sc_sum('likes', 2);
-- an overflow in the middle of a buffered batch takes back what the batch had added
SELECT sc_incr('likes', 4, 9223372036854775800);
SELECT sc_incr_batch('likes', ARRAY[1, 2, 4, 3], ARRAY[1, 1, 100, 1]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('likes', 1), sc_sum('likes', 2), sc_sum('likes', 3), sc_sum('likes', 4);
-- and in a transactional one, the failed statement's increments go with it
BEGIN;
SELECT sc_incr('points', 5, 9223372036854775800);
SAVEPOINT s;
SELECT sc_incr_batch('points', ARRAY[1, 5], ARRAY[1, 100]);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK TO SAVEPOINT s;
SELECT sc_sum('points', 1), sc_sum('points', 5);
COMMIT;
-- a group sum past the bigint range: 22003
SELECT sc_sum_keys('likes', ARRAY[4, 777]);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop('likes');
SELECT sc_drop('points');
-- a batch of more keys than batches may pin (a quarter of the buffer) on a counter created by
-- its own transaction, which the flusher cannot see: every key is made resident instead
BEGIN;
SELECT sc_create('fresh', 'buffered');
SELECT cardinality(sc_incr_batch('fresh', ARRAY(SELECT generate_series(1, 30000))::bigint[],
                                 array_fill(2::bigint, ARRAY[30000])));
SELECT sc_sum_keys('fresh', ARRAY(SELECT generate_series(1, 30000))::bigint[]);
COMMIT;
SELECT sc_rollup() >= 0;
SELECT count(*), sum(value) FROM slotted_counter.key_values WHERE counter = 'fresh'::slotted_counter::integer;
SELECT sc_drop('fresh');
