-- The buffer and its monitoring view.
\set VERBOSITY terse
SELECT sc_create('hits', 'buffered');
SELECT count(*) FROM (SELECT sc_incr('hits', k % 100) FROM generate_series(1, 1000) k) s;
SELECT capacity, entries_used >= 100 AS has_entries, worker_state <> 'not running' AS has_flusher
  FROM slotted_counter.stats WHERE datname = current_database();
SELECT sc_rollup();
SELECT dirty_entries, flushes > 0 AS flushed, rows_written >= 100 AS wrote, last_flush_at IS NOT NULL AS has_time,
       last_flush_ms >= 0 AS has_duration, worker_pid IS NOT NULL AS has_pid
  FROM slotted_counter.stats WHERE datname = current_database();
-- the flusher shows in pg_stat_activity under its own backend_type
SELECT backend_type, datname = current_database() AS this_database
  FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher' AND datname = current_database();
-- the flusher also flushes on its own, every flush_interval
SELECT sc_incr('hits', 5, 1000);
SELECT pg_sleep(1);
SELECT value FROM slotted_counter.totals t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name = 'hits' AND key = 5;
SELECT sc_drop('hits');
