-- One call in the select list, as sc_incr's workload makes it: the answer's first column.
SELECT (sc_throttle('throttle_hot', 0)).allowed;
