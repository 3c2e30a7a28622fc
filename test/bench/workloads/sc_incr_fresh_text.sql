\set k random(1, 1000000000)
SELECT sc_incr('fresh_text', '/p/' || :k);
