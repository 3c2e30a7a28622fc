-- sc_attach: the lagged total of each changed key, written into the user's own table by the
-- attacher (a worker of its own) after a flush, as the role that attached. (attached(): setup.)
\set VERBOSITY terse
CREATE TABLE posts (id integer PRIMARY KEY, title text, views bigint NOT NULL DEFAULT 0,
                    likes numeric NOT NULL DEFAULT 0);
INSERT INTO posts (id, title) SELECT g, 'post ' || g FROM generate_series(1, 3) g;
SELECT sc_create('post_views', 'buffered');
SELECT sc_create('post_likes');
SELECT sc_attach('post_views', 'posts', 'id', 'views', '0');
SELECT counter::slotted_counter, target, key_column, value_column, every,
       last_run IS NULL AS never_run, failures, last_error
  FROM slotted_counter.attachments;
-- each run writes the changed keys; a key with no row (99) is skipped and counted
SELECT sc_incr_batch('post_views', ARRAY[1, 1, 2, 99], ARRAY[1, 1, 1, 1]);
SELECT attached();
SELECT id, views FROM posts ORDER BY id;
SELECT attach_skipped, attach_errors FROM slotted_counter.stats WHERE datname = current_database();
-- only keys changed since the last run are written
UPDATE posts SET views = -1 WHERE id = 2;
SELECT sc_incr('post_views', 1, 5);
SELECT attached();
SELECT id, views FROM posts ORDER BY id;
-- a transactional counter, into a numeric column
SELECT sc_attach('post_likes', 'posts', 'id', 'likes', '0');
SELECT sc_incr('post_likes', 3, 4);
SELECT attached();
SELECT id, likes FROM posts ORDER BY id;
-- every: at most once per interval (the first run writes what was flushed before it; counted
-- and flushed first, so that a run between the attach and the flush cannot miss it)
SELECT sc_incr('post_views', 3, 30);
SELECT sc_rollup() >= 0 AS flushed;
SELECT sc_attach('post_views', 'posts', 'id', 'views', '1 hour');
SELECT attached();
SELECT sc_incr('post_views', 3, 30);
SELECT attached();
SELECT id, views FROM posts WHERE id = 3;
-- identifiers are quoted
CREATE TABLE "Odd ""Table""" ("Key Col" bigint, "Value Col" bigint);
INSERT INTO "Odd ""Table""" VALUES (3, 0);
SELECT sc_attach('post_likes', '"Odd ""Table"""', 'Key Col', 'Value Col', '0');
SELECT sc_incr('post_likes', 3, 1);
SELECT attached();
SELECT * FROM "Odd ""Table""";
-- bad input: 22004, 42P01, 42703, 42804, 22023, 42809, and what cannot work: the same column for
-- key and value (22023), a temporary table (0A000), an interval no timestamp can take (22023)
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
SELECT sc_attach('post_views', 'posts', 'views', 'views');
\echo :LAST_ERROR_SQLSTATE
CREATE TEMP TABLE scratch (id bigint, views bigint);
SELECT sc_attach('post_views', 'scratch', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'posts', 'id', 'views', '178000000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_attach('post_views', 'posts', 'id', 'views', '101 years');
\echo :LAST_ERROR_SQLSTATE
-- only the counter's owner attaches and detaches (42501), only to a table it owns (42501: the
-- runs write the table as its owner), and the key must be readable and the value updatable
CREATE ROLE sc_attach_reader;
GRANT SELECT, UPDATE ON posts TO sc_attach_reader;
SET ROLE sc_attach_reader;
SELECT sc_attach('post_views', 'posts', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_detach('post_views', 'posts');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_create('reader_views', 'buffered');
SELECT sc_alter_owner('reader_views', 'sc_attach_reader');
SET ROLE sc_attach_reader;
SELECT sc_attach('reader_views', 'posts', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE TABLE mirror (id bigint, views bigint);
INSERT INTO mirror VALUES (1, 0);
ALTER TABLE mirror OWNER TO sc_attach_reader;
REVOKE UPDATE ON mirror FROM sc_attach_reader;
SET ROLE sc_attach_reader;
SELECT sc_attach('reader_views', 'mirror', 'id', 'views');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT UPDATE ON mirror TO sc_attach_reader;
-- a run that fails (the table's owner lost the privilege) changes nothing, is counted and shown,
-- and the other attachments go on
SET ROLE sc_attach_reader;
SELECT sc_attach('reader_views', 'mirror', 'id', 'views', '0');
SELECT sc_incr('reader_views', 1, 7);
RESET ROLE;
SELECT attached();
SELECT views FROM mirror;
REVOKE UPDATE ON mirror FROM sc_attach_reader;
SELECT sc_attach('post_views', 'posts', 'id', 'views', '0');
SELECT sc_incr('post_views', 1, 100), sc_incr('reader_views', 1, 100);
SELECT attached();
SELECT id, views FROM posts WHERE id = 1;
SELECT views FROM mirror;
-- (a failing attachment may be tried more than once before the check: failing, not how often)
SELECT counter::slotted_counter, target, failures > 0 AS failing, last_error
  FROM slotted_counter.attachments ORDER BY target::regclass::text, counter;
SELECT attach_errors > 0 AS counted FROM slotted_counter.stats WHERE datname = current_database();
-- given the privilege back, the next run writes what changed meanwhile and clears the failure
GRANT UPDATE ON mirror TO sc_attach_reader;
SELECT attached();
SELECT views FROM mirror;
SELECT target, failures, last_error FROM slotted_counter.attachments WHERE target = 'mirror'::regclass;
-- a column that goes away makes its attachment fail, saying so, until it is back
ALTER TABLE mirror RENAME COLUMN views TO old_views;
SELECT sc_incr('reader_views', 1, 1);
SELECT attached();
SELECT target, failures > 0 AS failing, last_error FROM slotted_counter.attachments WHERE target = 'mirror'::regclass;
ALTER TABLE mirror RENAME COLUMN old_views TO views;
SELECT attached();
SELECT views, (SELECT failures FROM slotted_counter.attachments WHERE target = 'mirror'::regclass)
  FROM mirror;
-- detach stops the writes
SELECT sc_detach('post_views', 'posts');
SELECT sc_incr('post_views', 1, 1000);
SELECT attached();
SELECT id, views FROM posts WHERE id = 1;
SELECT sc_detach('post_views', 'posts');
\echo :LAST_ERROR_SQLSTATE
-- a dropped table takes its attachments with it, as it takes its triggers (not when the drop
-- rolls back)
BEGIN;
DROP TABLE mirror;
ROLLBACK;
SELECT count(*) FROM slotted_counter.attachments WHERE target = 'mirror'::regclass;
DROP TABLE mirror;
SELECT count(*) FROM slotted_counter.attachments WHERE counter = 'reader_views'::slotted_counter::integer;
-- dropping a counter drops its attachments
SELECT sc_drop('post_likes');
SELECT count(*) FROM slotted_counter.attachments;
SELECT sc_drop('post_views');
SELECT sc_drop('reader_views');
DROP VIEW posts_view;
DROP TABLE posts, "Odd ""Table""";
DROP ROLE sc_attach_reader;
