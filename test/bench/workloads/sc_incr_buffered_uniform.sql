\set k random(1, 10000)
SELECT sc_incr('uniform', :k::bigint, 1);
