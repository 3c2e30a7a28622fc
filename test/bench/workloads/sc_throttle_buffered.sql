SELECT allowed FROM sc_throttle('throttle_hot', 0);
