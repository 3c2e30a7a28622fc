-- The call as the guide makes it, in FROM with every column: PostgreSQL's function scan around it.
SELECT allowed, remaining, retry_after, reset_after FROM sc_throttle('throttle_hot', 0);
