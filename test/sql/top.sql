-- sc_top: the n largest keys, largest first, in real time.
\set VERBOSITY terse
SELECT sc_create('downloads', 'buffered');
SELECT sc_create('score');
SELECT sc_incr_batch('downloads', ARRAY[1, 2, 3, 4, 5], ARRAY[50, 10, 30, 30, -5]);
SELECT * FROM sc_top('downloads', 3);
-- ties are ordered by key; n larger than the number of keys returns them all; 0 returns none
SELECT * FROM sc_top('downloads', 10);
SELECT count(*) FROM sc_top('downloads', 0);
-- keys not in the buffer come from the values table, merged with the buffer's exact values
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES
  ('downloads'::slotted_counter::integer, 100, 40), ('downloads'::slotted_counter::integer, 101, 1);
SELECT * FROM sc_top('downloads', 3);
SELECT sc_incr('downloads', 2, 100);
SELECT * FROM sc_top('downloads', 2);
-- transactional: committed values, plus this transaction's own increments
SELECT sc_incr_batch('score', ARRAY[1, 2, 3], ARRAY[5, 7, 9]);
SELECT sc_rollup() > 0 AS flushed;
-- a transactional key only in the tables counts its key_values row and its deltas (which the next
-- flush folds into key_values; a key leaves the buffer only after its deltas were folded)
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES ('score'::slotted_counter::integer, 50, 2);
INSERT INTO slotted_counter.deltas (counter, key, delta) VALUES
  ('score'::slotted_counter::integer, 50, 3), ('score'::slotted_counter::integer, 50, 5);
SELECT sc_rollup() > 0 AS folded;
SELECT * FROM sc_top('score', 2);
BEGIN;
SELECT sc_incr('score', 1, 10), sc_incr('score', 3, -8), sc_incr('score', 4, 6);
SELECT * FROM sc_top('score', 3);
ROLLBACK;
SELECT * FROM sc_top('score', 3);
-- a key that reads 0 is not ranked: one only read, one whose increment was rolled back, one a
-- transaction brings back to 0, a bucketed key with no bucket in range
SELECT sc_create('zeros'), sc_create('zeros_h', 'transactional', '1 hour');
SELECT sc_incr('zeros', 1, 5), sc_sum('zeros', 42);
BEGIN;
SELECT sc_incr('zeros', 43, 2);
ROLLBACK;
SELECT * FROM sc_top('zeros', 10);
BEGIN;
SELECT sc_incr('zeros', 1, -5), sc_incr('zeros', 44, 1);
SELECT * FROM sc_top('zeros', 10);
ROLLBACK;
SELECT sc_incr('zeros_h', 1, 4, '2026-01-01 10:00+00'), sc_incr('zeros_h', 2, 3, '2026-01-01 11:00+00');
BEGIN;
SELECT sc_incr('zeros_h', 3, 9, '2026-01-01 10:00+00');
ROLLBACK;
SELECT * FROM sc_top('zeros_h', 10, '2026-01-01 10:00+00', '2026-01-01 11:00+00');
SELECT sc_drop('zeros'), sc_drop('zeros_h');
-- bad input: NULL 22004, negative n 22023, a time range on an unbucketed counter 22023
SELECT * FROM sc_top('score', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top('score', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_top('score', 3, now() - interval '1 hour', now());
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop('downloads');
SELECT sc_drop('score');
