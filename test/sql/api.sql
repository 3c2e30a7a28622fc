-- Buffered counters: create, increment, read, roll up, drop.
\set VERBOSITY terse
SELECT sc_create('downloads', 'buffered');
SELECT name, durability, bucket FROM slotted_counter.counters ORDER BY name;
-- defaults: key 0, delta 1; each call returns the new value
SELECT sc_incr('downloads');
SELECT sc_incr('downloads');
SELECT sc_incr('downloads', 0, 40);
SELECT sc_incr('downloads', 42, -5);
SELECT sc_sum('downloads'), sc_sum('downloads', 0), sc_sum('downloads', 42), sc_sum('downloads', 7);
-- buffered increments take effect at once and survive rollback, like nextval
BEGIN;
SELECT sc_incr('downloads', 1, 10);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT sc_incr('downloads', 1, 10);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT sc_sum('downloads', 1);
-- sc_rollup writes every dirty value and says how many rows
SELECT sc_rollup();
SELECT key, t.bucket, value FROM slotted_counter.key_values t
  JOIN slotted_counter.counters c ON c.id = t.counter WHERE c.name = 'downloads' ORDER BY key;
SELECT sc_rollup();
-- many keys in one statement
SELECT count(*), sum(v) FROM (SELECT sc_incr('downloads', k, k) AS v FROM generate_series(1000, 1999) k) s;
SELECT sc_rollup();
SELECT sum(value) FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
  WHERE c.name = 'downloads' AND key >= 1000;
-- a drop removes the counter, its buffered values and its stored values
SELECT sc_drop('downloads');
SELECT count(*) FROM slotted_counter.counters WHERE name = 'downloads';
SELECT count(*) FROM slotted_counter.key_values;
SELECT sc_sum('downloads');
-- the name can be used again, and the new counter starts from zero
SELECT sc_create('downloads', 'buffered');
SELECT sc_sum('downloads'), sc_incr('downloads');
-- a drop rolled back keeps the counter and its value
BEGIN;
SELECT sc_drop('downloads');
ROLLBACK;
SELECT sc_sum('downloads');
-- a create rolled back leaves nothing
BEGIN;
SELECT sc_create('ephemeral', 'buffered');
SELECT sc_incr('ephemeral');
ROLLBACK;
SELECT count(*) FROM slotted_counter.counters WHERE name = 'ephemeral';
SELECT sc_sum('ephemeral');
SELECT sc_drop('downloads');
