SELECT sc_incr('hot', 0, 1);
