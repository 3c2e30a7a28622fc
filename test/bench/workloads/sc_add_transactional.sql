-- sc_add_buffered.sql on a transactional counter: each call a commit that writes the key's sketch.
\set element random(1, 1000000000)
SELECT sc_add('distinct_hot_tx', 0, :element);
