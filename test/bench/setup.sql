-- Objects the benchmark workloads use; run once in a fresh database.
CREATE EXTENSION slotted_counter;

-- Baselines. The row every writer updates (hot-row UPDATE, synchronous_commit on and off):
CREATE TABLE hot (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO hot VALUES (1, 0);
-- The append-only table a transactional counter competes with: one new row per event.
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY, v integer NOT NULL);
-- The slotted-rows workaround the project starts from ("pageviews_counts" and GitHub's
-- slotted_counters): one counter spread over 100 rows, a random slot upserted per event.
CREATE TABLE slots (id integer NOT NULL, slot smallint NOT NULL, n bigint NOT NULL,
                    PRIMARY KEY (id, slot));

-- pgbench's TPC-B-like tables at scale 1 (as pgbench -i makes them: fillfactor 100, primary
-- keys), for the stock transaction, the one with counters, and the one without the hot writes.
CREATE TABLE pgbench_branches (bid integer PRIMARY KEY, bbalance integer, filler char(88));
CREATE TABLE pgbench_tellers (tid integer PRIMARY KEY, bid integer, tbalance integer, filler char(84));
CREATE TABLE pgbench_accounts (aid integer PRIMARY KEY, bid integer, abalance integer, filler char(84));
CREATE TABLE pgbench_history (tid integer, bid integer, aid integer, delta integer,
                              mtime timestamp, filler char(22));
INSERT INTO pgbench_branches SELECT 1, 0;
INSERT INTO pgbench_tellers SELECT t, 1, 0 FROM generate_series(1, 10) t;
INSERT INTO pgbench_accounts SELECT a, 1, 0, '' FROM generate_series(1, 100000) a;
SELECT sc_create('tpcb_tellers', 'transactional'), sc_create('tpcb_branches', 'transactional');

-- The counters of the throughput runs.
SELECT sc_create('hot', 'buffered');             -- one hot key (key 0)
SELECT sc_create('hot_tx', 'transactional');
SELECT sc_create('uniform', 'buffered');         -- keys 1..10,000, uniform
SELECT sc_create('uniform_tx', 'transactional');
SELECT sc_create('uniform_text', 'buffered', key_type => 'text');  -- '/p/1'..'/p/10000', uniform
SELECT sc_create('uniform_text_tx', 'transactional', key_type => 'text');
SELECT sc_create('uniform_untyped', 'buffered');  -- keys 1..10,000, sent as untyped placeholders
SELECT sc_create('zipf', 'buffered');            -- keys 1..1,000,000, zipfian
SELECT sc_create('zipf_tx', 'transactional');
SELECT sc_create('mix', 'buffered');             -- sc_sum of a key while it is incremented
SELECT sc_create('ranked', 'buffered');          -- keys 1..1,000,000, all flushed (sc_rank, sc_total)
SELECT sc_create('batch', 'buffered');           -- 1,000 keys per call
SELECT sc_create('batch_tx', 'transactional');
SELECT sc_create('bounded', 'buffered');         -- sc_incr_bounded, keys 1..10,000, uniform
-- Rate limiters of one hot key that admit every call of a run (a million per second, a burst of
-- a billion): each call writes the key's arrival time, the limiter's costlier path.
SELECT sc_create('throttle_hot', 'buffered', rate => 1000000, per => '1 second',
                 burst => 1000000000);
SELECT sc_create('throttle_hot_tx', 'transactional', rate => 1000000, per => '1 second',
                 burst => 1000000000);
-- Distinct counters of one hot key (sc_add): its sketch turns dense after its first 1,280
-- elements, from then on a register's compare-and-swap, mostly a read.
SELECT sc_create('distinct_hot', 'buffered', kind => 'distinct');
SELECT sc_create('distinct_hot_tx', 'transactional', kind => 'distinct');
SELECT sc_create('bounded_tx', 'transactional');
SELECT sc_create('once', 'buffered');             -- sc_incr_once, a new request id per call
SELECT sc_create('once_tx', 'transactional');
SELECT sc_create('fresh', 'buffered');            -- a new key per call: what retention is for
SELECT sc_create('fresh_retained', 'buffered', retain => '2 seconds');
SELECT sc_create('fresh_text', 'buffered', key_type => 'text');  -- a new text key per call
-- What a flush is measured against: an INSERT of as many rows into a table of key_values' shape:
-- its columns and defaults, its indexes (the primary key (counter, key, bucket), the partial one of
-- buckets) and its fillfactor; not its triggers (counter_totals), which are the flush's own work.
CREATE TABLE flush_baseline (LIKE slotted_counter.key_values INCLUDING ALL)
    WITH (fillfactor = 50);

-- The single-backend measurements (one resident key each).
SELECT sc_create('inproc', 'buffered');
SELECT sc_create('inproc_tx', 'transactional');

-- Wall time of one statement in nanoseconds per row, measured inside the backend.
CREATE FUNCTION bench_ns(query text, n bigint) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    t0 := clock_timestamp();
    EXECUTE query;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e9 / n;
END $$;

-- Wall time of one statement that returns nothing, in milliseconds.
CREATE FUNCTION bench_exec_ms(query text) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    t0 := clock_timestamp();
    EXECUTE query;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e3;
END $$;

-- Wall time of one statement in milliseconds, and its (single) result.
CREATE FUNCTION bench_ms(query text, OUT ms double precision, OUT result text) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    t0 := clock_timestamp();
    EXECUTE query INTO result;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1e3;
END $$;
