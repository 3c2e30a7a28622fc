\set k random_zipfian(1, 1000000, 1.1)
SELECT sc_incr('zipf', :k::bigint, 1);
