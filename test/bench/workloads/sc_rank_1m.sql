\set k random(1, 1000000)
SELECT sc_rank('ranked', :k::bigint);
