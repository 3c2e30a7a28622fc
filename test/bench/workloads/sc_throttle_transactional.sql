SELECT allowed FROM sc_throttle('throttle_hot_tx', 0);
