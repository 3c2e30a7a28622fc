-- Owners and privileges per counter, like sequences: SELECT reads, UPDATE writes, the owner (and
-- superusers) may also drop, attach, detach, grant, revoke and give the counter away; creating
-- one needs CREATE on the database; a role sees the rows of the counters it may read.
\set VERBOSITY terse
SELECT current_database() AS db \gset
CREATE ROLE sc_owner;
CREATE ROLE sc_reader;
CREATE ROLE sc_writer;
CREATE ROLE sc_nobody;
CREATE ROLE sc_heir;
GRANT sc_heir TO sc_owner;
GRANT CREATE ON DATABASE :"db" TO sc_owner, sc_heir;
CREATE TABLE target (id bigint PRIMARY KEY, v bigint);
ALTER TABLE target OWNER TO sc_owner;

-- Runs sql as role, returns 'ok' or the error's SQLSTATE, and undoes whatever it did.
CREATE FUNCTION try_as(role name, sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    EXECUTE sql;
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'undo' THEN RETURN 'ok'; END IF;
    RETURN SQLSTATE;
  END;
END $$;

-- What role sees of the extension's tables: counters by name | rows of key_values | of attachments.
CREATE FUNCTION visible_as(role name) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  seen text;
BEGIN
  BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    EXECUTE $q$SELECT concat_ws(' | ',
        (SELECT string_agg(name, ',' ORDER BY name) FROM slotted_counter.counters),
        (SELECT count(*) FROM slotted_counter.key_values),
        (SELECT count(*) FROM slotted_counter.attachments))$q$ INTO seen;
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'undo' THEN RETURN seen; END IF;
    RAISE;
  END;
END $$;

-- sc_owner creates four counters: c (buffered) and c_h (hourly buckets) granted to sc_reader
-- (SELECT) and sc_writer (UPDATE); pub and pub_h granted to PUBLIC.
SET ROLE sc_owner;
SELECT sc_create('c', 'buffered'), sc_create('c_h', 'buffered', '1 hour'),
       sc_create('pub', 'buffered'), sc_create('pub_h', 'buffered', '1 hour');
SELECT sc_grant('c', 'SELECT', 'sc_reader'), sc_grant('c_h', 'select', 'sc_reader'),
       sc_grant('c', 'UPDATE', 'sc_writer'), sc_grant('c_h', ' Update ', 'sc_writer'),
       sc_grant('pub', 'ALL', 'PUBLIC'), sc_grant('pub_h', 'SELECT, UPDATE', 'public');
SELECT sc_attach('c', 'target', 'id', 'v'), sc_attach('pub', 'target', 'id', 'v');
SELECT sc_incr('c', 1, 10), sc_incr('pub', 1, 10), sc_incr('c_h', 1), sc_incr('pub_h', 1);
RESET ROLE;
-- A counter's owner and grants are those of its guard, the sequence slotted_counters.<name>.
SELECT c.name, s.relowner::regrole AS owner, s.relacl
  FROM slotted_counter.counters c JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass ORDER BY c.id;

-- The matrix: every function against the owner, a SELECT grantee, an UPDATE grantee, a role with
-- no grant, the same role on counters granted to PUBLIC, and a superuser.
WITH calls(n, sql) AS (VALUES
  (1, $$SELECT sc_incr('{c}')$$),
  (2, $$SELECT sc_incr('{c}', 1, 1)$$),
  (3, $$SELECT sc_incr('{c}_h', 1, 1, now())$$),
  (4, $$SELECT sc_incr_batch('{c}', ARRAY[1, 2], ARRAY[1, 1])$$),
  (5, $$SELECT sc_set('{c}', 1, 5)$$),
  (6, $$SELECT sc_drop_buckets('{c}_h', now() - interval '1 day')$$),
  (7, $$SELECT sc_sum('{c}', 1)$$),
  (8, $$SELECT sc_sum_keys('{c}', ARRAY[1, 2])$$),
  (9, $$SELECT sc_sum('{c}_h', 1, NULL, NULL)$$),
  (10, $$SELECT sc_series('{c}_h', 1, NULL, NULL)$$),
  (11, $$SELECT sc_top('{c}', 3)$$),
  (12, $$SELECT sc_top('{c}_h', 3, NULL, NULL)$$),
  (13, $$SELECT sc_attach('{c}', 'target', 'id', 'v', '1 hour')$$),
  (14, $$SELECT sc_detach('{c}', 'target')$$),
  (15, $$SELECT sc_grant('{c}', 'SELECT', 'sc_nobody')$$),
  (16, $$SELECT sc_revoke('{c}', 'SELECT', 'sc_reader')$$),
  (17, $$SELECT sc_alter_owner('{c}', 'sc_heir')$$),
  (18, $$SELECT sc_drop('{c}')$$),
  (19, $$SELECT sc_has_privilege('{c}', 'SELECT')$$),
  (20, $$SELECT sc_rollup()$$),
  (21, $$SELECT sc_create('{c}_new')$$))
SELECT n, replace(sql, '{c}', 'c') AS call,
       try_as('sc_owner', replace(sql, '{c}', 'c')) AS owner,
       try_as('sc_reader', replace(sql, '{c}', 'c')) AS "select",
       try_as('sc_writer', replace(sql, '{c}', 'c')) AS "update",
       try_as('sc_nobody', replace(sql, '{c}', 'c')) AS "none",
       try_as('sc_nobody', replace(sql, '{c}', 'pub')) AS "public",
       try_as(current_user, replace(sql, '{c}', 'c')) AS superuser
FROM calls ORDER BY n;

-- What a refusal says: 42501 with the counter's name.
SET ROLE sc_nobody;
SELECT sc_incr('c');
SELECT sc_sum('c');
SELECT sc_drop('c');
SELECT sc_create('mine');
RESET ROLE;
SET ROLE sc_owner;
SELECT sc_alter_owner('c', 'sc_writer');
RESET ROLE;
-- a superuser may give it to anyone, and take it back
SELECT sc_alter_owner('c', 'sc_nobody');
SELECT s.relowner::regrole AS owner FROM slotted_counter.counters c JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass WHERE c.name = 'c';
SELECT sc_alter_owner('c', 'sc_owner');

-- sc_has_privilege, as has_sequence_privilege: any of the listed privileges; for the current
-- role, or for a role (PUBLIC too); superusers hold everything.
SELECT r, sc_has_privilege(r, 'c', 'SELECT') AS "select", sc_has_privilege(r, 'c', 'UPDATE') AS "update",
       sc_has_privilege(r, 'c', 'SELECT, UPDATE') AS "any",
       sc_has_privilege(r, 'pub', 'UPDATE') AS pub_update
FROM unnest(ARRAY['sc_owner', 'sc_reader', 'sc_writer', 'sc_nobody', 'public', current_user]) r;
SET ROLE sc_reader;
SELECT sc_has_privilege('c', 'select'), sc_has_privilege('c', 'update');
-- about another role: only its members and the counter's owner may ask (PUBLIC: anyone)
SELECT sc_has_privilege('sc_reader', 'c', 'SELECT') AS own, sc_has_privilege('public', 'c', 'SELECT') AS public;
SELECT sc_has_privilege('sc_owner', 'c', 'SELECT');
RESET ROLE;
SET ROLE sc_owner;
SELECT sc_has_privilege('sc_reader', 'c', 'SELECT') AS asked_by_the_owner;
RESET ROLE;
-- integer::slotted_counter names only a counter the role holds a privilege on
SET ROLE sc_reader;
SELECT (SELECT id FROM slotted_counter.counters WHERE name = 'c')::slotted_counter AS readable;
RESET ROLE;
SELECT set_config('sc.c_id', id::text, false) IS NOT NULL AS noted FROM slotted_counter.counters WHERE name = 'c';
SET ROLE sc_nobody;
DO $$
BEGIN
  PERFORM current_setting('sc.c_id')::integer::slotted_counter;
EXCEPTION WHEN undefined_object THEN
  RAISE NOTICE 'the id of a counter sc_nobody may not use names no counter: %', SQLSTATE;
END
$$;
RESET ROLE;
-- bad input: 22023 for an unknown privilege, 42704 for an unknown role or counter, NULL is NULL
SELECT sc_grant('c', 'DELETE', 'sc_reader');
SELECT sc_grant('c', 'SELECT, ', 'sc_reader');
SELECT sc_has_privilege('c', 'ALL');
SELECT sc_grant('c', 'SELECT', 'no_such_role');
SELECT sc_grant('c', 'SELECT', repeat('r', 100));
SELECT sc_grant('no_such_counter', 'SELECT', 'sc_reader');
SELECT sc_has_privilege('no_such_role', 'c', 'SELECT');
SELECT sc_grant('c', NULL, 'sc_reader');
SELECT sc_has_privilege('c', NULL) IS NULL AS is_null;

-- A grant to a role is a grant to its members; granting twice is once; revoking takes it back.
CREATE ROLE sc_team;
GRANT sc_team TO sc_nobody;
SET ROLE sc_owner;
SELECT sc_grant('c', 'SELECT', 'sc_team'), sc_grant('c', 'SELECT', 'sc_team');
RESET ROLE;
SELECT s.relacl FROM slotted_counter.counters c JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass WHERE c.name = 'c';
SET ROLE sc_nobody;
SELECT sc_sum('c', 1) > 0 AS reads_through_team;
RESET ROLE;
REVOKE sc_team FROM sc_nobody;
SET ROLE sc_nobody;
SELECT sc_sum('c', 1);
RESET ROLE;
SET ROLE sc_owner;
SELECT sc_revoke('c', 'ALL', 'sc_team'), sc_revoke('c', 'UPDATE', 'sc_reader');
RESET ROLE;
SELECT s.relacl FROM slotted_counter.counters c JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass WHERE c.name = 'c';

-- The owner gives the counter away: the new owner holds everything, the old one nothing more.
SET ROLE sc_owner;
SELECT sc_alter_owner('c', 'sc_heir');
SELECT sc_incr('c');
RESET ROLE;
REVOKE sc_heir FROM sc_owner;
SET ROLE sc_owner;
SELECT sc_incr('c');
RESET ROLE;
SET ROLE sc_heir;
SELECT sc_incr('c', 1, 0) > 0 AS heir_writes;
SELECT sc_alter_owner('c', 'sc_owner');
RESET ROLE;
SELECT sc_alter_owner('c', 'sc_owner');

-- The guard is PostgreSQL's own object: GRANT and REVOKE on it are sc_grant and sc_revoke, and
-- has_sequence_privilege agrees with sc_has_privilege. Only its owner drops it (42501), and no one
-- renames, moves or alters it (0A000): the counter stays whole.
SET ROLE sc_owner;
GRANT SELECT ON SEQUENCE slotted_counters.c TO sc_nobody;
SELECT sc_has_privilege('sc_nobody', 'c', 'SELECT') AS granted_by_grant,
       has_sequence_privilege('sc_nobody', 'slotted_counters.c', 'SELECT') AS core_agrees;
SET ROLE sc_nobody;
SELECT sc_sum('c', 1) >= 0 AS reads;
SET ROLE sc_owner;
REVOKE SELECT ON SEQUENCE slotted_counters.c FROM sc_nobody;
SELECT sc_has_privilege('sc_nobody', 'c', 'SELECT') AS revoked;
\set VERBOSITY default
SET ROLE sc_nobody;
DROP SEQUENCE slotted_counters.c;
\echo :LAST_ERROR_SQLSTATE
SET ROLE sc_owner;
ALTER SEQUENCE slotted_counters.c RENAME TO d;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE slotted_counters.c SET SCHEMA public;
\echo :LAST_ERROR_SQLSTATE
ALTER SEQUENCE slotted_counters.c OWNED BY target.id;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT sc_incr('c', 1, 0) > 0 AS still_counts;
RESET ROLE;
-- Another role's object made to depend on a guard (a DEFAULT nextval() of it) does not keep the
-- owner from dropping the counter: it goes with it, with core's NOTICE, as with DROP ... CASCADE.
CREATE SCHEMA squat AUTHORIZATION sc_nobody;
SET ROLE sc_owner;
SELECT sc_create('depended');
SET ROLE sc_nobody;
CREATE TABLE squat.t (x bigint DEFAULT nextval('slotted_counters.depended'));
SET ROLE sc_owner;
SELECT sc_drop('depended');
RESET ROLE;
SELECT column_default FROM information_schema.columns
 WHERE table_schema = 'squat' AND table_name = 't';
DROP SCHEMA squat CASCADE;

-- DROP SEQUENCE of a guard by the counter's owner (as pg_restore --clean runs it) drops the
-- counter, as sc_drop does.
SET ROLE sc_owner;
SELECT sc_create('by_sequence');
SELECT sc_incr('by_sequence', 1, 5);
DROP SEQUENCE slotted_counters.by_sequence;
SELECT sc_sum('by_sequence', 1);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- A guard belongs to its counter by its start, the counter's id: one that does not (left from
-- a dropped counter of the same name, on a subscriber say) grants nothing, not even to the
-- owner; superusers still may. (The start is changed by hand here, as only a copy would.)
SET ROLE sc_owner;
SELECT sc_create('bound');
SELECT sc_grant('bound', 'SELECT', 'sc_reader');
RESET ROLE;
UPDATE pg_sequence SET seqstart = seqstart + 1000
 WHERE seqrelid = 'slotted_counters.bound'::regclass;
SELECT sc_drop(sc_create('epoch_mover'));
SET ROLE sc_reader;
SELECT sc_sum('bound');
\echo :LAST_ERROR_SQLSTATE
SET ROLE sc_owner;
SELECT sc_incr('bound');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT sc_sum('bound') AS superuser_reads;
-- and nothing can be granted or given on a counter without its guard (55000)
SELECT sc_grant('bound', 'SELECT', 'sc_nobody');
\echo :LAST_ERROR_SQLSTATE
SELECT sc_alter_owner('bound', 'sc_heir');
\echo :LAST_ERROR_SQLSTATE
UPDATE pg_sequence SET seqstart = seqstart - 1000
 WHERE seqrelid = 'slotted_counters.bound'::regclass;
SELECT sc_drop(sc_create('epoch_mover'));
SET ROLE sc_reader;
SELECT sc_sum('bound') AS reads_again;
RESET ROLE;
SELECT sc_drop('bound');
-- As for tables: pg_read_all_data reads every counter, pg_write_all_data writes every counter.
GRANT pg_read_all_data, pg_write_all_data TO sc_nobody;
SET ROLE sc_nobody;
SELECT sc_sum('c', 1) >= 0 AS read_all, sc_incr('c', 1, 0) >= 0 AS write_all;
RESET ROLE;
REVOKE pg_read_all_data, pg_write_all_data FROM sc_nobody;
-- The guards' schema keeps its name.
ALTER SCHEMA slotted_counters RENAME TO elsewhere;
\echo :LAST_ERROR_SQLSTATE

-- What a role may not read, it does not see: rows of the extension's tables per role.
SELECT sc_rollup() >= 0 AS flushed;
SELECT r, visible_as(r) FROM unnest(ARRAY['sc_owner', 'sc_reader', 'sc_writer', 'sc_nobody', current_user]) r
ORDER BY r;
-- and none writes them directly: the extension does
SET ROLE sc_owner;
INSERT INTO slotted_counter.counters (id, name, durability) VALUES (999, 'x', 'buffered');
UPDATE slotted_counter.counters SET name = 'x';
DELETE FROM slotted_counter.key_values;
RESET ROLE;

-- slotted_counter.stats: other databases only for members of pg_read_all_stats
SET ROLE sc_nobody;
SELECT count(*) FILTER (WHERE datname <> current_database()) AS others,
       count(*) FILTER (WHERE datname = current_database()) AS mine
FROM slotted_counter.stats;
RESET ROLE;

SELECT sc_drop(id::slotted_counter) FROM slotted_counter.counters ORDER BY id;
DROP FUNCTION try_as(name, text), visible_as(name);
DROP TABLE target;
REVOKE CREATE ON DATABASE :"db" FROM sc_owner, sc_heir;
DROP ROLE sc_owner, sc_reader, sc_writer, sc_nobody, sc_heir, sc_team;
