\set k random(1, 10000)
SELECT sc_incr('uniform_text_tx', '/p/' || :k, 1);
