\set k random(1, 10000)
SELECT sc_incr('uniform_untyped', :k, 1);
