-- tpcb-like without the teller and branch writes: what the counters' cost is measured against.
\set aid random(1, 100000)
\set bid random(1, 1)
\set tid random(1, 10)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP, 'w');
END;
