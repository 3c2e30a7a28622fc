-- Objects the benchmark workloads use; run once in a fresh database.
CREATE EXTENSION slotted_counter;
-- The baseline the extension replaces: one row that every writer updates.
CREATE TABLE hot (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO hot VALUES (1, 0);
SELECT sc_create('hot', 'buffered');
-- The append-only baseline a transactional counter competes with: one new row per event.
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY, v integer NOT NULL);
SELECT sc_create('hot_tx', 'transactional');
