-- ALTER EXTENSION slotted_counter UPDATE from 0.2: the library works with 0.2's objects until
-- then, and the update keeps every value and attachment, carries the user's views, functions
-- and columns that name counters over to the name-based type (0.4), gives the counters to the extension's
-- owner and grants them to PUBLIC (everyone could use them before), and names attaching roles.
\set VERBOSITY terse
DROP EXTENSION slotted_counter;
-- the deltas table is a heap whatever default_table_access_method says
CREATE ACCESS METHOD heap_alias TYPE TABLE HANDLER heap_tableam_handler;
SET default_table_access_method = heap_alias;
CREATE EXTENSION slotted_counter VERSION '0.2';
RESET default_table_access_method;
SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE c.oid = 'slotted_counter.deltas'::regclass;
CREATE ROLE sc_old_app;
CREATE TABLE old_posts (id bigint PRIMARY KEY, views bigint NOT NULL DEFAULT 0);
ALTER TABLE old_posts OWNER TO sc_old_app;
INSERT INTO old_posts SELECT generate_series(1, 3);
-- on 0.2's objects: counting, reading, creating work; attaching waits for the update
SELECT sc_create('old_b', 'buffered'), sc_create('old_t'), sc_create('old_h', 'buffered', '1 day');
SELECT sc_incr('old_b', 1, 5), sc_incr('old_t', 2, 7), sc_incr('old_h', 3, 1, '2026-01-01');
SET ROLE sc_old_app;
SELECT sc_incr('old_b', 1, 1), sc_sum('old_t', 2);
RESET ROLE;
SELECT sc_attach('old_b', 'old_posts', 'id', 'views');
-- an attachment made by 0.2's library, with its role's OID
INSERT INTO slotted_counter.attachments (counter, target, key_column, value_column, every, role)
  SELECT 'old_b'::slotted_counter::integer, 'old_posts', 'id', 'views', '0',
         'sc_old_app'::regrole::oid;
SELECT sc_rollup() >= 0 AS flushed;
-- the user's objects that name counters, made before the update (when a reference was an id)
CREATE TABLE old_refs (id int PRIMARY KEY, c slotted_counter DEFAULT 'old_b', cs slotted_counter[]);
INSERT INTO old_refs VALUES (1, 'old_b', '{old_b,old_t}'), (2, 'old_t', NULL);
INSERT INTO old_refs (id) VALUES (3);
CREATE VIEW old_view AS SELECT sc_sum('old_b', 1) AS b, sc_sum('old_t', 2) AS t;
CREATE VIEW old_view_of_view WITH (security_barrier) AS SELECT b + t AS total FROM old_view;
COMMENT ON VIEW old_view IS 'made on 0.2';
GRANT SELECT ON old_view TO sc_old_app;
ALTER VIEW old_view_of_view OWNER TO sc_old_app;
CREATE VIEW old_by_column AS SELECT r.id, sc_sum(r.c, 1) AS v FROM old_refs r;
CREATE MATERIALIZED VIEW old_mat AS SELECT sc_sum('old_b', 1) AS b, current_user AS filled_by;
ALTER MATERIALIZED VIEW old_mat OWNER TO sc_old_app;
CREATE FUNCTION old_atomic() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT sc_sum('old_t', 2); END;
CREATE FUNCTION old_param(c slotted_counter) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN sc_sum(c, 1); END $$;
REVOKE ALL ON FUNCTION old_param(slotted_counter) FROM PUBLIC;
-- a domain over the type cannot be carried across: the update stops, naming it, changing nothing
CREATE DOMAIN old_domain AS slotted_counter;
ALTER EXTENSION slotted_counter UPDATE;
\echo :LAST_ERROR_SQLSTATE
SELECT extversion FROM pg_extension WHERE extname = 'slotted_counter';
SELECT * FROM old_view;
DROP DOMAIN old_domain;
ALTER EXTENSION slotted_counter UPDATE;
\dx slotted_counter
-- 0.5: totals keeps room on its pages for HOT updates by the flusher
SELECT reloptions FROM pg_class WHERE oid = 'slotted_counter.totals'::regclass;
-- 0.6: bounded increments
SELECT sc_incr_bounded('old_b', 1, 0, NULL, NULL) IS NOT NULL AS bounded;
-- every object is back, with its owner, options, privileges and comment, outside the extension
SELECT * FROM old_view;
SELECT * FROM old_view_of_view;
SELECT * FROM old_by_column ORDER BY id;
-- filled again as its owner (REFRESH), not as the role running the update
SELECT * FROM old_mat;
SELECT old_atomic(), old_param('old_b');
SELECT id, c, cs FROM old_refs ORDER BY id;
INSERT INTO old_refs (id) VALUES (4) RETURNING c;
SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner) AS owner, c.reloptions, c.relacl,
       obj_description(c.oid, 'pg_class') AS comment,
       EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e') AS member
  FROM pg_class c WHERE c.relname LIKE 'old\_%' AND c.relkind IN ('v', 'm') ORDER BY 1;
SELECT p.oid::regprocedure, p.proacl,
       EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') AS member
  FROM pg_proc p WHERE p.proname LIKE 'old\_%' ORDER BY 1;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
  WHERE attrelid = 'old_refs'::regclass AND attname IN ('c', 'cs') ORDER BY attnum;
SELECT name, owner = (SELECT extowner::regrole::name FROM pg_extension WHERE extname = 'slotted_counter') AS extension_owner,
       readers, writers FROM slotted_counter.counters ORDER BY id;
SELECT sc_sum('old_b', 1), sc_sum('old_t', 2), sc_sum('old_h', 3);
SELECT counter::slotted_counter, target, role, failures FROM slotted_counter.attachments;
-- still open to every role, until the owner says otherwise
SET ROLE sc_old_app;
SELECT sc_incr('old_b', 1, 1), sc_incr('old_t', 2, 1), sc_sum('old_h', 3);
RESET ROLE;
-- the attachment made before the update runs, as its role
SELECT attached();
SELECT id, views FROM old_posts ORDER BY id;
-- revoked from PUBLIC: the role may no longer write it, nor have it attached
SELECT sc_revoke('old_b', 'ALL', 'PUBLIC');
SET ROLE sc_old_app;
SELECT sc_incr('old_b', 1, 1);
RESET ROLE;
SELECT sc_incr('old_b', 1, 1);
SELECT attached();
SELECT id, views FROM old_posts WHERE id = 1;
-- (failing, not how many times: a periodic flush between two statements retries it once more)
SELECT failures > 0 AS failing, last_error FROM slotted_counter.attachments;
-- and new counters are private to their creator
SELECT sc_create('new_one', 'buffered');
SELECT owner = current_user AS mine, readers, writers FROM slotted_counter.counters WHERE name = 'new_one';
-- and now they are bound by name: a drop and re-create reaches the new counter
SELECT sc_drop('old_t');
SELECT sc_create('old_t', 'buffered');
SELECT sc_incr('old_t', 2, 40);
SELECT * FROM old_view;
SELECT old_atomic();
SELECT sc_drop(id::slotted_counter) FROM slotted_counter.counters ORDER BY id;
DROP FUNCTION attached();  -- from setup
DROP VIEW old_view_of_view, old_view, old_by_column;
DROP MATERIALIZED VIEW old_mat;
DROP FUNCTION old_atomic(), old_param(slotted_counter);
DROP TABLE old_posts, old_refs;
DROP ROLE sc_old_app;
-- From 0.6: the new library works with 0.6's sc_create (if_not_exists fourth) until the update,
-- which moves if_not_exists after retain and keeps every counter forever.
DROP EXTENSION slotted_counter;
CREATE EXTENSION slotted_counter VERSION '0.6';
SELECT sc_create('six', 'buffered', NULL, true), sc_create('six', 'buffered', NULL, true);
SELECT sc_incr('six', 1, 6);
SELECT sc_rollup() >= 0 AS flushed;
ALTER EXTENSION slotted_counter UPDATE;
SELECT name, retain FROM slotted_counter.counters;
SELECT sc_sum('six', 1), sc_create('six', if_not_exists => true), sc_create('seven', 'buffered', NULL, '1 day');
SELECT sc_create('eight', 'buffered', NULL, true);  -- a fourth argument is retain now
\echo :LAST_ERROR_SQLSTATE
SELECT sc_drop('six'), sc_drop('seven');
DROP EXTENSION slotted_counter;
CREATE EXTENSION slotted_counter;
