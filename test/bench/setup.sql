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

-- The counters of the throughput runs.
SELECT sc_create('hot', 'buffered');             -- one hot key (key 0)
SELECT sc_create('hot_tx', 'transactional');
SELECT sc_create('uniform', 'buffered');         -- keys 1..10,000, uniform
SELECT sc_create('uniform_tx', 'transactional');
SELECT sc_create('zipf', 'buffered');            -- keys 1..1,000,000, zipfian
SELECT sc_create('zipf_tx', 'transactional');
SELECT sc_create('mix', 'buffered');             -- sc_sum of a key while it is incremented
SELECT sc_create('batch', 'buffered');           -- 1,000 keys per call
SELECT sc_create('batch_tx', 'transactional');
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

-- Wall time of one statement in milliseconds, and its (single) result.
CREATE FUNCTION bench_ms(query text, OUT ms double precision, OUT result text) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    t0 := clock_timestamp();
    EXECUTE query INTO result;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1e3;
END $$;
