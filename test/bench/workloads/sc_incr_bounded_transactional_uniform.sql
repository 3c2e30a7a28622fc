\set k random(1, 10000)
SELECT sc_incr_bounded('bounded_tx', :k::bigint, 1, 0, 1000000000000);
