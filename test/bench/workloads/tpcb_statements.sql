-- tpcb-like with the teller and branch writes replaced by two statements that change nothing: the
-- round trips the counters' two calls cost, without the counters (history 'e').
\set aid random(1, 100000)
\set bid random(1, 1)
\set tid random(1, 10)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT :tid::bigint + :delta;
SELECT :bid::bigint + :delta;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP, 'e');
END;
