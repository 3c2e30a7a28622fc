SELECT (sc_throttle('throttle_hot_tx', 0)).allowed;
