\set k random(1, 10000)
SELECT :k::bigint;
