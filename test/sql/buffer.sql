-- The buffer and its monitoring view.
\set VERBOSITY terse
SELECT sc_create('hits', 'buffered');
SELECT count(*) FROM (SELECT sc_incr('hits', k % 100) FROM generate_series(1, 1000) k) s;
-- (the flusher these increments started may still be starting: it shows after the rollup)
SELECT capacity, entries_used >= 100 AS has_entries
  FROM slotted_counter.stats WHERE datname = current_database();
-- (the flusher may have written some of the 100 keys on its own by now)
SELECT sc_rollup() BETWEEN 0 AND 100 AS rolled_up;
SELECT dirty_entries, flushes > 0 AS flushed, rows_written >= 100 AS wrote, last_flush_at IS NOT NULL AS has_time,
       last_flush_ms >= 0 AS has_duration, worker_pid IS NOT NULL AS has_pid
  FROM slotted_counter.stats WHERE datname = current_database();
-- the flusher shows in pg_stat_activity under its own backend_type
SELECT backend_type, datname = current_database() AS this_database
  FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher' AND datname = current_database();
-- the flusher also flushes on its own, every flush_interval (0, only on sc_rollup(), in the
-- other tests)
ALTER SYSTEM SET slotted_counter.flush_interval = '200ms';
SELECT pg_reload_conf();
SELECT sc_incr('hits', 5, 1000);
DO $$
BEGIN
  FOR i IN 1..500 LOOP  -- 10 s at most
    EXIT WHEN EXISTS (SELECT FROM slotted_counter.key_values t JOIN slotted_counter.counters c
                      ON c.id = t.counter WHERE c.name = 'hits' AND key = 5 AND value > 10);
    PERFORM pg_sleep(0.02);
  END LOOP;
END $$;
SELECT value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name = 'hits' AND key = 5;
ALTER SYSTEM RESET slotted_counter.flush_interval;
SELECT pg_reload_conf();
-- the flusher reports its writes to the statistics that autovacuum reads
SELECT pg_stat_clear_snapshot();
SELECT n_tup_ins >= 100 AND n_tup_upd >= 1 AS flusher_writes_counted
  FROM pg_stat_user_tables WHERE relid = 'slotted_counter.key_values'::regclass;
-- sc_sum of a resident key reads shared memory only: the values table is not scanned
SELECT pg_stat_force_next_flush();
SELECT seq_scan + coalesce(idx_scan, 0) AS scans_before FROM pg_stat_user_tables
  WHERE relid = 'slotted_counter.key_values'::regclass \gset
SELECT pg_stat_clear_snapshot();
SELECT sc_sum('hits', 5), sc_sum('hits', 5), sc_sum('hits', 6);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT seq_scan + coalesce(idx_scan, 0) - :scans_before AS key_values_scans_for_three_reads
  FROM pg_stat_user_tables WHERE relid = 'slotted_counter.key_values'::regclass;
-- Nor a key never stored, once the flusher rebuilt the filter of stored keys after a flush
-- (30 s at most): the filter answers for it.
DO $$
BEGIN
  FOR i IN 1..1500 LOOP
    EXIT WHEN (SELECT stored_keys FROM slotted_counter.stats
               WHERE datname = current_database()) = 'valid';
    PERFORM sc_rollup();
    PERFORM pg_sleep(0.02);
  END LOOP;
END $$;
SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database();
SELECT pg_stat_force_next_flush();
SELECT seq_scan + coalesce(idx_scan, 0) AS scans_before FROM pg_stat_user_tables
  WHERE relid = 'slotted_counter.key_values'::regclass \gset
SELECT pg_stat_clear_snapshot();
SELECT sc_sum('hits', 123456);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT seq_scan + coalesce(idx_scan, 0) - :scans_before AS key_values_scans_for_a_new_key
  FROM pg_stat_user_tables WHERE relid = 'slotted_counter.key_values'::regclass;
-- A row that any statement inserts joins the filter (its insert trigger): a key that is not
-- resident and has a row is read from the table.
INSERT INTO slotted_counter.key_values (counter, key, value)
  VALUES ('hits'::slotted_counter::integer, 654321, 7);
SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database();
SELECT sc_sum('hits', 654321);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT seq_scan + coalesce(idx_scan, 0) - :scans_before AS key_values_scans_after_a_miss
  FROM pg_stat_user_tables WHERE relid = 'slotted_counter.key_values'::regclass;
-- An UPDATE of a key column makes the filter answer nothing until the flusher rebuilt it.
UPDATE slotted_counter.key_values SET key = 654322
  WHERE counter = 'hits'::slotted_counter::integer AND key = 654321;
SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database();
SELECT sc_sum('hits', 654322);
SELECT sc_drop('hits');
-- A flush inserts keys it never flushed (by COPY), and when one of them has a row after
-- all (here a row put in by hand; also a key whose row holds 0, loaded again), writes them all
-- again as upserts: nothing is lost, nothing counted twice, one row per key.
-- (While this transaction holds the counter's row, flushes skip the counter.)
SELECT sc_create('fresh', 'buffered');
BEGIN;
SELECT name FROM slotted_counter.counters WHERE name = 'fresh' FOR UPDATE;
SELECT sc_incr('fresh', k, 10) FROM generate_series(1, 3) k;
INSERT INTO slotted_counter.key_values (counter, key, bucket, value)
  VALUES ('fresh'::slotted_counter::integer, 2, '-infinity', 1000);
COMMIT;
SELECT sc_rollup() IS NOT NULL AS flushed;
SELECT key, value FROM slotted_counter.key_values
  WHERE counter = 'fresh'::slotted_counter::integer ORDER BY key;
-- and flushed keys are written as upserts again
SELECT sc_incr('fresh', k, 1) FROM generate_series(1, 4) k;
SELECT sc_rollup() IS NOT NULL AS flushed;
SELECT key, value FROM slotted_counter.key_values
  WHERE counter = 'fresh'::slotted_counter::integer ORDER BY key;
-- keys flushed before are written as UPDATEs through the index; one whose row is gone (deleted
-- here by hand, so its earlier flushes are lost with it) makes the flush write them all again as
-- upserts: the row comes back with the new delta, and no other key counts twice
DELETE FROM slotted_counter.key_values WHERE counter = 'fresh'::slotted_counter::integer AND key = 3;
SELECT sc_incr('fresh', k, 100) FROM generate_series(1, 4) k;
SELECT sc_rollup() IS NOT NULL AS flushed;
SELECT key, value FROM slotted_counter.key_values
  WHERE counter = 'fresh'::slotted_counter::integer ORDER BY key;
-- the same for a bucketed counter (its UPDATE matches the bucket, not NULL), flushed with an
-- unbucketed one in the same flush
SELECT sc_create('fresh_hourly', 'buffered', '1 hour');
SELECT sc_incr('fresh_hourly', k, 1, '2026-01-01 10:30+00') FROM generate_series(1, 3) k;
SELECT sc_rollup() IS NOT NULL AS flushed;
SELECT sc_incr('fresh_hourly', k, 10, '2026-01-01 10:45+00') FROM generate_series(1, 3) k;
SELECT sc_incr('fresh', 1, 1000);
SELECT sc_rollup() IS NOT NULL AS flushed;
DELETE FROM slotted_counter.key_values WHERE counter = 'fresh_hourly'::slotted_counter::integer AND key = 2;
SELECT sc_incr('fresh_hourly', k, 100, '2026-01-01 10:50+00') FROM generate_series(1, 3) k;
SELECT sc_incr('fresh', 1, 1000);
SELECT sc_rollup() IS NOT NULL AS flushed;
SELECT key, bucket AT TIME ZONE 'UTC' AS bucket, value FROM slotted_counter.key_values
  WHERE counter IN ('fresh'::slotted_counter::integer, 'fresh_hourly'::slotted_counter::integer)
    AND key IN (1, 2, 3)
  ORDER BY counter, key;
SELECT sc_drop('fresh_hourly');
-- a key not in the buffer is read from its row: through the unique index, or by a query when
-- the index is not as the scripts made it (here: renamed)
INSERT INTO slotted_counter.key_values (counter, key, bucket, value)
  VALUES ('fresh'::slotted_counter::integer, 20, '-infinity', 77),
         ('fresh'::slotted_counter::integer, 21, '-infinity', 88);
SELECT sc_sum('fresh', 20) AS read, sc_incr('fresh', 20) AS loaded, sc_sum('fresh', 22) AS no_row;
ALTER INDEX slotted_counter.key_values_pkey RENAME TO key_values_renamed;
SELECT sc_sum('fresh', 21) AS read, sc_incr('fresh', 21) AS loaded, sc_sum('fresh', 23) AS no_row;
ALTER INDEX slotted_counter.key_values_renamed RENAME TO key_values_pkey;
SELECT sc_drop('fresh');
