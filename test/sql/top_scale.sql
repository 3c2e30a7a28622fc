-- sc_top at the size users run it: 12,000 keys in the buffer, some of them also stored with an
-- older value, and 3,000 keys only in the values table; a buffered counter and a transactional
-- one with this transaction's own increments. The truth is computed here by SQL from what was
-- counted, independently of every read function of the extension.
-- (sc_top's result array once lived in SPI's memory and was read after SPI_finish had freed it:
-- with a few keys the freed memory still held the rows, from about 5,000 keys on the backend
-- crashed; an assert-enabled server clobbers freed memory, so the rows below come out wrong.)
\set VERBOSITY terse
SET TIME ZONE 'UTC';
CREATE TEMP TABLE truth_b (key bigint PRIMARY KEY, value bigint NOT NULL);
CREATE TEMP TABLE truth_t (key bigint PRIMARY KEY, value bigint NOT NULL);
SELECT sc_create('scale_b', 'buffered');
SELECT sc_create('scale_t');

-- buffered: 12,000 keys, values spread over 1..10007 (a key every 10,007 repeats a value: ties)
INSERT INTO truth_b SELECT k, 1 + (k * 7919) % 10007 FROM generate_series(1, 12000) k;
SELECT cardinality(sc_incr_batch('scale_b', array_agg(key ORDER BY key), array_agg(value ORDER BY key)))
  FROM truth_b;
-- key 7 is the largest when flushed, then falls back: its stored row is stale and largest
SELECT sc_incr('scale_b', 7, 40000) - 40000 = (SELECT value FROM truth_b WHERE key = 7) AS exact;
SELECT sc_rollup() >= 0 AS flushed;
SELECT count(*), max(value) = 40000 + (SELECT value FROM truth_b WHERE key = 7) AS key_7_stored_largest
  FROM slotted_counter.key_values WHERE counter = 'scale_b'::slotted_counter::integer;
SELECT sc_incr('scale_b', 7, -40000) = (SELECT value FROM truth_b WHERE key = 7) AS exact;
-- keys 1..5 climb after the flush: their stored rows are stale and smaller
SELECT count(*) FROM (SELECT sc_incr('scale_b', k, 15000) FROM generate_series(1, 5) k) s;
UPDATE truth_b SET value = value + 15000 WHERE key BETWEEN 1 AND 5;
-- 3,000 keys only in the values table, some of them larger than any key in the buffer
INSERT INTO truth_b SELECT k, (k::bigint * 104729) % 20011 FROM generate_series(100001, 103000) k;
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT 'scale_b'::slotted_counter::integer, key, value FROM truth_b WHERE key > 100000;
SELECT * FROM sc_top('scale_b', 10);
SELECT array(SELECT row(key, value) FROM sc_top('scale_b', 10))
     = array(SELECT row(key, value) FROM truth_b ORDER BY value DESC, key LIMIT 10) AS top_10_exact;
-- every key at once, largest first (a key that reads 0, as key 100055 does, is not ranked)
SELECT array(SELECT row(key, value) FROM sc_top('scale_b', 100000))
     = array(SELECT row(key, value) FROM truth_b WHERE value <> 0 ORDER BY value DESC, key) AS all_keys_exact;

-- transactional: committed in one batch, folded, then more committed (folded when the flusher
-- next runs: before or after the reads below, the values are the same)
INSERT INTO truth_t SELECT k, 1 + (k * 7919) % 10007 FROM generate_series(1, 12000) k;
SELECT cardinality(sc_incr_batch('scale_t', array_agg(key ORDER BY key), array_agg(value ORDER BY key)))
  FROM truth_t;
SELECT sc_rollup() >= 0 AS folded;
SELECT cardinality(sc_incr_batch('scale_t', ARRAY[1, 2, 3, 4, 5], ARRAY[15000, 15000, 15000, 15000, 15000]));
UPDATE truth_t SET value = value + 15000 WHERE key BETWEEN 1 AND 5;
SELECT * FROM sc_top('scale_t', 10);
SELECT array(SELECT row(key, value) FROM sc_top('scale_t', 10))
     = array(SELECT row(key, value) FROM truth_t ORDER BY value DESC, key LIMIT 10) AS top_10_exact;
-- this transaction's own increments lift a key into the top 10 and drop one out of it
BEGIN;
SELECT sc_incr('scale_t', 11, 50000) > 50000 AS lifted, sc_incr('scale_t', 1, -50000) < 0 AS dropped,
       sc_incr('scale_t', 200000, 30000) AS new_key;
UPDATE truth_t SET value = value + 50000 WHERE key = 11;
UPDATE truth_t SET value = value - 50000 WHERE key = 1;
INSERT INTO truth_t VALUES (200000, 30000);
SELECT * FROM sc_top('scale_t', 10);
SELECT array(SELECT row(key, value) FROM sc_top('scale_t', 10))
     = array(SELECT row(key, value) FROM truth_t ORDER BY value DESC, key LIMIT 10) AS top_10_exact,
       array(SELECT row(key, value) FROM sc_top('scale_t', 100000))
     = array(SELECT row(key, value) FROM truth_t WHERE value <> 0 ORDER BY value DESC, key) AS all_keys_exact;
ROLLBACK;
-- rolled back: the committed values again
SELECT * FROM sc_top('scale_t', 3);
SELECT array(SELECT row(key, value) FROM sc_top('scale_t', 10))
     = array(SELECT row(key, value) FROM truth_t ORDER BY value DESC, key LIMIT 10) AS top_10_exact;

SELECT sc_drop('scale_b'), sc_drop('scale_t');
DROP TABLE truth_b, truth_t;
