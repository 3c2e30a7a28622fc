\set k random(1, 1000000)
SELECT sc_sum('ranked', :k::bigint);
