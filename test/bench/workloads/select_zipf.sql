\set k random_zipfian(1, 1000000, 1.1)
SELECT :k::bigint;
