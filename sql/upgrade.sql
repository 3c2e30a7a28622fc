-- ALTER EXTENSION slotted_counter UPDATE from 0.2: the library works with 0.2's objects until
-- then, and the update keeps every value and attachment, gives the counters to the extension's
-- owner and grants them to PUBLIC (everyone could use them before), and names attaching roles.
\set VERBOSITY terse
DROP EXTENSION slotted_counter;
CREATE EXTENSION slotted_counter VERSION '0.2';
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
ALTER EXTENSION slotted_counter UPDATE;
\dx slotted_counter
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
SELECT failures, last_error FROM slotted_counter.attachments;
-- and new counters are private to their creator
SELECT sc_create('new_one', 'buffered');
SELECT owner = current_user AS mine, readers, writers FROM slotted_counter.counters WHERE name = 'new_one';
SELECT sc_drop(id::slotted_counter) FROM slotted_counter.counters ORDER BY id;
DROP FUNCTION attached();  -- from setup
DROP TABLE old_posts;
DROP ROLE sc_old_app;
