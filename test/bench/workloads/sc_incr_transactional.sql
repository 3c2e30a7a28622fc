SELECT sc_incr('hot_tx', 0, 1);
