-- Transactional counters (the default): an increment belongs to its transaction.
\set VERBOSITY terse
SELECT sc_create('orders');
SELECT name, durability FROM slotted_counter.counters WHERE name = 'orders';
-- outside a transaction block each call commits at once
SELECT sc_incr('orders', 1);
SELECT sc_incr('orders', 1, 9);
-- inside one: the committed value plus this transaction's own increments
BEGIN;
SELECT sc_incr('orders', 1, 5), sc_incr('orders', 1, 5);
SELECT sc_sum('orders', 1);
COMMIT;
SELECT sc_sum('orders', 1);
-- rolled back, it leaves no trace
BEGIN;
SELECT sc_incr('orders', 1, 1000);
ROLLBACK;
SELECT sc_sum('orders', 1);
-- ROLLBACK TO SAVEPOINT drops what came after the savepoint; RELEASE keeps it
BEGIN;
SELECT sc_incr('orders', 1, 1);
SAVEPOINT a;
SELECT sc_incr('orders', 1, 100);
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT sc_incr('orders', 1, 10);
RELEASE SAVEPOINT b;
SAVEPOINT c;
SELECT sc_incr('orders', 2, 7);
ROLLBACK TO SAVEPOINT c;
SELECT sc_sum('orders', 1), sc_sum('orders', 2);
COMMIT;
SELECT sc_sum('orders', 1), sc_sum('orders', 2);
-- a savepoint released into an outer one is undone with it; what came before both stays
BEGIN;
SELECT sc_incr('orders', 30, 1);
SAVEPOINT a;
SELECT sc_incr('orders', 30, 10);
SAVEPOINT b;
SELECT sc_incr('orders', 30, 100);
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
SELECT sc_incr('orders', 30, 1000);
RELEASE SAVEPOINT a;
SAVEPOINT c;
SELECT sc_incr('orders', 30, 10000);
RELEASE SAVEPOINT c;
SELECT sc_sum('orders', 30);
COMMIT;
SELECT sc_sum('orders', 30);
-- an error aborts the transaction, and its increments with it
BEGIN;
SELECT sc_incr('orders', 1, 50);
SELECT 1 / 0;
COMMIT;
SELECT sc_sum('orders', 1);
-- a subtransaction that fails (a PL/pgSQL exception block) drops only its own increments
DO $$
BEGIN
  PERFORM sc_incr('orders', 3, 1);
  BEGIN
    PERFORM sc_incr('orders', 3, 100);
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN
    NULL;
  END;
  PERFORM sc_incr('orders', 3, 1);
END $$;
SELECT sc_sum('orders', 3);
-- many increments of one key in one transaction write one row
BEGIN;
SELECT count(sc_incr('orders', 4)) FROM generate_series(1, 1000);
COMMIT;
SELECT sc_sum('orders', 4);
SELECT count(*) AS delta_rows, sum(delta) FROM slotted_counter.deltas d
  JOIN slotted_counter.counters c ON c.id = d.counter WHERE c.name = 'orders' AND d.key = 4;
-- the flusher folds the deltas into key_values
SELECT sc_rollup() > 0 AS folded;
SELECT count(*) FROM slotted_counter.deltas;
SELECT key, value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name = 'orders' ORDER BY key;
-- both durabilities in one transaction: the buffered increment survives the rollback
SELECT sc_create('views', 'buffered');
BEGIN;
SELECT sc_incr('views', 1), sc_incr('orders', 1);
ROLLBACK;
SELECT sc_sum('views', 1), sc_sum('orders', 1);
-- a read-only transaction cannot increment a transactional counter: 25006
BEGIN READ ONLY;
SELECT sc_incr('orders', 1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- nor create, drop or change a counter, its privileges or its owner, as DDL and GRANT cannot:
-- 25006, naming the function, and nothing changes
BEGIN READ ONLY;
SELECT sc_create('read_only_made', 'buffered');
ROLLBACK;
BEGIN READ ONLY;
SELECT sc_drop('orders');
ROLLBACK;
BEGIN READ ONLY;
SELECT sc_alter_retention('orders', '1 day');
ROLLBACK;
BEGIN READ ONLY;
SELECT sc_grant('orders', 'SELECT', 'PUBLIC');
ROLLBACK;
BEGIN READ ONLY;
SELECT sc_revoke('orders', 'SELECT', 'PUBLIC');
ROLLBACK;
BEGIN READ ONLY;
SELECT sc_alter_owner('orders', current_user);
ROLLBACK;
SELECT count(*) AS made FROM slotted_counter.counters WHERE name = 'read_only_made';
SELECT sc_has_privilege('PUBLIC', 'orders', 'SELECT') AS public_may_read;
-- PREPARE TRANSACTION with pending increments is refused: 0A000, and nothing is counted
BEGIN;
SELECT sc_incr('orders', 1);
PREPARE TRANSACTION 'with_increments';
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('orders', 1), (SELECT count(*) FROM pg_prepared_xacts) AS prepared;
-- increments all undone by ROLLBACK TO SAVEPOINT leave nothing pending: it can be prepared
BEGIN;
SAVEPOINT s;
SELECT sc_incr('orders', 1);
ROLLBACK TO SAVEPOINT s;
PREPARE TRANSACTION 'undone';
COMMIT PREPARED 'undone';
SELECT sc_sum('orders', 1);
-- a transaction that touched only a buffered counter can be prepared
BEGIN;
SELECT sc_incr('views', 1);
PREPARE TRANSACTION 'buffered_only';
COMMIT PREPARED 'buffered_only';
SELECT sc_sum('views', 1);
-- overflow: 22003 at the increment, and nothing changes
SELECT sc_incr('orders', 5, 9223372036854775800);
BEGIN;
SELECT sc_incr('orders', 5, 7);
SELECT sc_incr('orders', 5, 1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT sc_sum('orders', 5);
-- a counter dropped by this transaction is gone for it at once; a rolled-back drop changes nothing
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES ('orders'::slotted_counter::integer, 77, 10);
BEGIN;
SELECT sc_drop('orders');
SELECT sc_sum('orders', 77);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT sc_sum('orders', 77), sc_incr('orders', 77);
-- commits write slotted_counter.deltas below the executor, and maintain any index added to it:
-- an index scan finds the rows they wrote
CREATE INDEX deltas_by_key ON slotted_counter.deltas (key);
SELECT sc_incr('orders', 77);
SELECT sc_incr('orders', 77);
-- (in one snapshot, because the flusher folds deltas into key_values at any moment)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT sum(delta) FROM slotted_counter.deltas WHERE key = 77;
SELECT sum(delta) AS by_index FROM slotted_counter.deltas WHERE key = 77 \gset
SET LOCAL enable_seqscan = on;
SET LOCAL enable_indexscan = off;
SELECT sum(delta) IS NOT DISTINCT FROM nullif(:'by_index', '')::numeric AS index_finds_every_row
FROM slotted_counter.deltas WHERE key = 77;
COMMIT;
DROP INDEX slotted_counter.deltas_by_key;
SELECT sc_drop('orders');
SELECT sc_drop('views');
SELECT count(*) FROM slotted_counter.deltas;
-- slotted_counter.deltas is written with heap_insert: rewritten into another access method it is
-- refused at commit (55000), not corrupted, and the scripts create it USING heap whatever
-- default_table_access_method says
CREATE ACCESS METHOD heap_alias TYPE TABLE HANDLER heap_tableam_handler;
ALTER TABLE slotted_counter.deltas SET ACCESS METHOD heap_alias;
SELECT sc_create('am_check');
BEGIN;
SELECT sc_incr('am_check', 1);
COMMIT;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE slotted_counter.deltas SET ACCESS METHOD heap;
SELECT sc_incr('am_check', 1), sc_sum('am_check', 1);
SELECT sc_drop('am_check');
DROP ACCESS METHOD heap_alias;
-- many keys through nested subtransactions: released ones move up a level, rolled-back ones go
SELECT sc_create('nested');
BEGIN;
SELECT count(sc_incr('nested', g)) FROM generate_series(1, 300) g;
SAVEPOINT a;
SELECT count(sc_incr('nested', g, 2)) FROM generate_series(1, 500) g;
SAVEPOINT b;
SELECT count(sc_incr('nested', g, 4)) FROM generate_series(200, 700) g;
RELEASE SAVEPOINT b;
SAVEPOINT c;
SELECT count(sc_incr('nested', g, 8)) FROM generate_series(1, 1000) g;
ROLLBACK TO SAVEPOINT c;
RELEASE SAVEPOINT a;
SELECT sc_sum_keys('nested', ARRAY(SELECT generate_series(1, 1000))::bigint[]);
COMMIT;
SELECT sc_sum_keys('nested', ARRAY(SELECT generate_series(1, 1000))::bigint[]);
SELECT sc_drop('nested');
-- A transaction of more keys than a quarter of the buffer (max_entries: 100000) commits as a
-- large commit (large_commit.hpp): the rows of the keys out of the buffer are its own to write;
-- a key with a commit in the buffer not yet folded is reserved as in any commit. With a mix of
-- counters, a bucketed one, a bounded increment and a savepoint rolled back.
-- A bucket drop first, so that loads read the deltas until the next fold: the large commit folds
-- its counters' deltas itself (key 3's), stamped with its own time, not its transaction's start.
SELECT sc_create('large'), sc_create('large_hourly', 'transactional', bucket => '1 hour');
BEGIN;
SELECT sc_incr('large', 3, 1000);
COMMIT;
SELECT sc_drop_buckets('large_hourly', '2020-01-01');
BEGIN;
CREATE TEMP TABLE large_start AS SELECT now() AS t;
SELECT count(sc_incr('large', k, k % 7 + 1)) FROM generate_series(1, 25001) k;
SELECT count(sc_incr('large_hourly', k, 1, '2026-01-01 00:30+00'::timestamptz + (k % 2) * interval '1 hour'))
  FROM generate_series(1, 100) k;
SELECT sc_incr_bounded('large', 4, 10, 0, 15);
SAVEPOINT s;
SELECT count(sc_incr('large', k, 1000)) FROM generate_series(1, 10) k;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT sc_sum('large', 3), sc_sum('large', 4), sc_sum('large', 25001), sc_sum('large', 25002),
       sc_total('large') = 1000 + 10 + (SELECT sum(k % 7 + 1) FROM generate_series(1, 25001) k),
       sc_total('large_hourly');
SELECT updated_at > (SELECT t FROM large_start) AS stamped_at_commit
  FROM slotted_counter.key_values WHERE counter = 'large'::slotted_counter::integer AND key = 3;
-- again, the keys' rows now written: a value that would leave its bounds fails the commit, and
-- nothing of it counts
BEGIN;
SELECT count(sc_incr('large', k, 1)) FROM generate_series(5, 25005) k;
SELECT sc_incr_bounded('large', 4, -1, 0, 15);
UPDATE slotted_counter.key_values SET value = 0
 WHERE counter = 'large'::slotted_counter::integer AND key = 4;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT sc_sum('large', 4), sc_sum('large', 25001);
SELECT sc_drop('large'), sc_drop('large_hourly');
