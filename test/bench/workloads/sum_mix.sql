SELECT sc_incr('mix', 0, 1);
SELECT sc_sum('mix', 0);
