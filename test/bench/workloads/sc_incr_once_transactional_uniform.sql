\set k random(1, 10000)
\set r random(1, 9000000000000000000)
SELECT sc_incr_once('once_tx', :k::bigint, 1, 'r' || :r);
