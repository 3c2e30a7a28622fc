-- tpcb-like with the teller and branch balances kept by transactional counters, both incremented
-- by one statement (history 'c', as tpcb_counters.sql: the same check covers both).
\set aid random(1, 100000)
\set bid random(1, 1)
\set tid random(1, 10)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT sc_incr('tpcb_tellers', :tid, :delta), sc_incr('tpcb_branches', :bid, :delta);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP, 'c');
END;
