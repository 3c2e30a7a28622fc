-- sc_attach: the lagged total of each changed key, written into the user's own table.
\set VERBOSITY terse
CREATE TABLE posts (id integer PRIMARY KEY, title text, views bigint NOT NULL DEFAULT 0,
                    likes numeric NOT NULL DEFAULT 0);
INSERT INTO posts (id, title) SELECT g, 'post ' || g FROM generate_series(1, 3) g;
SELECT sc_create('post_views', 'buffered');
SELECT sc_create('post_likes');
SELECT sc_attach('post_views', 'posts', 'id', 'views', '0');
SELECT counter::slotted_counter, target, key_column, value_column, every, last_run IS NULL AS never_run
  FROM slotted_counter.attachments;
-- each flush writes the changed keys; a key with no row (99) is skipped and counted
SELECT sc_incr('post_views', ARRAY[1, 1, 2, 99], ARRAY[1, 1, 1, 1]);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, views FROM posts ORDER BY id;
SELECT attach_skipped, attach_errors FROM slotted_counter.stats WHERE datname = current_database();
-- only keys changed since the last run are written
UPDATE posts SET views = -1 WHERE id = 2;
SELECT sc_incr('post_views', 1, 5);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, views FROM posts ORDER BY id;
-- a transactional counter, into a numeric column
SELECT sc_attach('post_likes', 'posts', 'id', 'likes', '0');
SELECT sc_incr('post_likes', 3, 4);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, likes FROM posts ORDER BY id;
-- every: at most once per interval (the first run is at the next flush)
SELECT sc_attach('post_views', 'posts', 'id', 'views', '1 hour'), sc_incr('post_views', 3, 30);
SELECT sc_rollup() > 0 AS flushed;
SELECT sc_incr('post_views', 3, 30);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, views FROM posts WHERE id = 3;
-- identifiers are quoted
CREATE TABLE "Odd ""Table""" ("Key Col" bigint, "Value Col" bigint);
INSERT INTO "Odd ""Table""" VALUES (3, 0);
SELECT sc_attach('post_likes', '"Odd ""Table"""', 'Key Col', 'Value Col', '0');
SELECT sc_incr('post_likes', 3, 1);
SELECT sc_rollup() > 0 AS flushed;
SELECT * FROM "Odd ""Table""";
-- bad input: 22004, 42P01, 42703, 42804, 22023, 42809, and 42501 for a role that may not update
SELECT sc_attach('post_views', 'posts', 'id', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'no_such_table', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'posts', 'no_such_column', 'views');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'posts', 'id', 'title');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'posts', 'id', 'views', '-1 minute');
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW posts_view AS SELECT * FROM posts;
SELECT sc_attach('post_views', 'posts_view', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE sc_attach_reader;
GRANT SELECT ON posts TO sc_attach_reader;
SET ROLE sc_attach_reader;
SELECT sc_attach('post_views', 'posts', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- a target that fails (its attaching role lost the privilege) is counted, and the rest goes on
CREATE TABLE mirror (id bigint, views bigint);
INSERT INTO mirror VALUES (1, 0);
GRANT SELECT, UPDATE ON mirror TO sc_attach_reader;
SET ROLE sc_attach_reader;
SELECT sc_attach('post_views', 'mirror', 'id', 'views', '0');
RESET ROLE;
REVOKE UPDATE ON mirror FROM sc_attach_reader;
SELECT sc_attach('post_views', 'posts', 'id', 'views', '0');
SELECT sc_incr('post_views', 1, 100);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, views FROM posts WHERE id = 1;
SELECT views FROM mirror;
SELECT attach_errors > 0 AS counted FROM slotted_counter.stats WHERE datname = current_database();
-- detach stops the writes
SELECT sc_detach('post_views', 'mirror');
SELECT sc_detach('post_views', 'posts');
SELECT sc_incr('post_views', 1, 1000);
SELECT sc_rollup() > 0 AS flushed;
SELECT id, views FROM posts WHERE id = 1;
SELECT sc_detach('post_views', 'posts');
\echo :LAST_ERROR_SQLSTATE
-- dropping a counter drops its attachments
SELECT sc_drop('post_likes');
SELECT count(*) FROM slotted_counter.attachments;
SELECT sc_drop('post_views');
DROP VIEW posts_view;
DROP TABLE posts, mirror, "Odd ""Table""";
DROP ROLE sc_attach_reader;
