-- slotted_counter 0.3 -> 0.4: a counter is referred to by its name, bound when a call runs.
--
-- Up to 0.3 the type slotted_counter held a counter's integer id, looked up when a statement
-- was parsed: views, functions and prepared statements froze the id (and broke when the counter
-- was dropped and created again), and pg_restore could not read a name before the extension's
-- tables were filled. From 0.4 it holds the name. A type's representation cannot be altered, so
-- this update replaces the type and every function that takes it, and carries the user's objects
-- across: views, materialized views and functions that use the type are saved (as
-- pg_get_viewdef / pg_get_functiondef write them: a stored reference prints as its counter's
-- name), dropped, and created again with their owner, options, privileges and comments; table
-- columns of the type are converted to the names of their counters. Anything else that uses the
-- type (a domain, a composite type, a trigger, a policy, an aggregate) stops the update with a
-- list, before anything is changed. All of it is one transaction.

\echo Use "ALTER EXTENSION slotted_counter UPDATE TO '0.4'" to load this file. \quit

-- What the update does after the type is replaced, in order: phase 'convert' (table columns),
-- then 'recreate' (the saved objects). Dropped at the end.
CREATE TABLE slotted_counter.update_steps (
    n integer GENERATED ALWAYS AS IDENTITY, phase text, statement text);

DO $update$
DECLARE
  ext oid := (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'slotted_counter');
  old_type oid := (SELECT t.oid FROM pg_catalog.pg_type t
                   JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_type'::regclass
                    AND d.objid = t.oid AND d.refobjid = ext AND d.deptype = 'e'
                   WHERE t.typname = 'slotted_counter');
  saved_path text := pg_catalog.current_setting('search_path');
  unsupported text;
  obj record;
  name text;
  kind text;
BEGIN
  -- Every statement below names objects with their schema.
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);

  -- A fresh CREATE EXTENSION runs this script in the transaction that made the old type.
  IF (SELECT t.xmin = pg_current_xact_id()::xid FROM pg_type t WHERE t.oid = old_type) THEN
    INSERT INTO slotted_counter.update_steps (phase) VALUES ('fresh');
  END IF;

  -- Everything that depends on the old type, directly or through other objects (a view's rule
  -- stands for its view; a column for its table's column).
  CREATE TABLE slotted_counter.update_users AS
  WITH RECURSIVE dep(classid, objid, objsubid) AS (
      SELECT 'pg_type'::regclass::oid, old_type, 0
    UNION
      SELECT CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 'pg_class'::regclass::oid
                  ELSE d.classid END,
             CASE WHEN d.classid = 'pg_rewrite'::regclass THEN r.ev_class ELSE d.objid END,
             CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 0 ELSE d.objsubid END
      FROM dep JOIN pg_depend d ON d.refclassid = dep.classid AND d.refobjid = dep.objid
                AND (dep.objsubid = 0 OR d.refobjsubid = dep.objsubid)
      LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
      WHERE d.deptype IN ('n', 'a', 'i'))
  SELECT dep.*,
         EXISTS (SELECT FROM pg_depend e WHERE e.classid = dep.classid AND e.objid = dep.objid
                 AND e.refclassid = 'pg_extension'::regclass AND e.refobjid = ext
                 AND e.deptype = 'e') AS member,
         CASE WHEN dep.classid = 'pg_class'::regclass
              THEN (SELECT relkind FROM pg_class WHERE oid = dep.objid) END AS relkind
  FROM dep;

  -- The extension's own objects, and what belongs to them, are replaced below.
  DELETE FROM slotted_counter.update_users u
  WHERE member
     OR classid IN ('pg_amop'::regclass, 'pg_amproc'::regclass)
     OR (classid = 'pg_type'::regclass AND objid = old_type)
     OR (classid = 'pg_type'::regclass  -- the row type of a view or table found here
         AND (SELECT typtype FROM pg_type WHERE oid = u.objid) = 'c')
     OR (classid = 'pg_type'::regclass
         AND (SELECT e.typtype FROM pg_type a JOIN pg_type e ON e.oid = a.typelem
              WHERE a.oid = u.objid AND a.typcategory = 'A') = 'c')
     OR (classid = 'pg_type'::regclass
         AND (SELECT typelem FROM pg_type WHERE oid = u.objid) = old_type
         AND (SELECT typcategory FROM pg_type WHERE oid = u.objid) = 'A');

  SELECT string_agg(pg_describe_object(classid, objid, objsubid), E'\n' ORDER BY objid)
    INTO unsupported
  FROM slotted_counter.update_users u
  WHERE NOT (
        (classid = 'pg_class'::regclass AND objsubid = 0 AND relkind IN ('v', 'm'))
     OR (classid = 'pg_class'::regclass AND objsubid > 0 AND relkind IN ('r', 'p')
         AND (SELECT atttypid FROM pg_attribute WHERE attrelid = objid AND attnum = objsubid)
             IN (SELECT oid FROM pg_type WHERE oid = old_type OR typelem = old_type AND typcategory = 'A'))
     OR (classid = 'pg_class'::regclass AND relkind = 'i')
     OR classid = 'pg_attrdef'::regclass
     OR (classid = 'pg_proc'::regclass AND (SELECT prokind FROM pg_proc WHERE oid = objid) IN ('f', 'p')));
  IF unsupported IS NOT NULL THEN
    RAISE EXCEPTION 'cannot update extension slotted_counter: objects use its type slotted_counter'
      USING ERRCODE = 'dependent_objects_still_exist',
            DETAIL = E'The type changes from a counter id to a counter name. These objects use it:\n' || unsupported,
            HINT = 'Drop them, run ALTER EXTENSION slotted_counter UPDATE, and create them again.';
  END IF;

  -- Views, materialized views and functions: all saved in creation order, then dropped.
  FOR obj IN
    SELECT u.classid, u.objid, u.relkind FROM slotted_counter.update_users u
    WHERE (u.classid = 'pg_class'::regclass AND u.objsubid = 0 AND u.relkind IN ('v', 'm'))
       OR u.classid = 'pg_proc'::regclass
    ORDER BY u.objid
  LOOP
    IF obj.classid = 'pg_class'::regclass THEN
      SELECT c.oid::regclass::text,
             CASE c.relkind WHEN 'v' THEN 'VIEW' ELSE 'MATERIALIZED VIEW' END
        INTO name, kind
      FROM pg_class c WHERE c.oid = obj.objid;
      INSERT INTO slotted_counter.update_steps (phase, statement)
      SELECT 'recreate',
             format('CREATE %s %s%s AS %s%s', kind, name,
                    CASE WHEN c.reloptions IS NOT NULL
                         THEN ' WITH (' || array_to_string(c.reloptions, ', ') || ')' ELSE '' END,
                    rtrim(pg_get_viewdef(c.oid), ';'),
                    -- filled below by REFRESH, which runs the query as the owner
                    CASE WHEN c.relkind = 'm' THEN ' WITH NO DATA' ELSE '' END)
      FROM pg_class c WHERE c.oid = obj.objid;
      INSERT INTO slotted_counter.update_steps (phase, statement)
      SELECT 'recreate', s FROM (
        SELECT format('ALTER EXTENSION slotted_counter DROP %s %s', kind, name) AS s
        UNION ALL
        SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = obj.objid
        UNION ALL
        SELECT format('ALTER %s %s OWNER TO %I', kind, name, pg_get_userbyid(c.relowner))
        FROM pg_class c WHERE c.oid = obj.objid
        UNION ALL
        SELECT format('REFRESH MATERIALIZED VIEW %s', name)
        FROM pg_class c WHERE c.oid = obj.objid AND c.relkind = 'm' AND c.relispopulated
        UNION ALL
        SELECT format('REVOKE ALL ON %s FROM PUBLIC, %I', name, pg_get_userbyid(c.relowner))
        FROM pg_class c WHERE c.oid = obj.objid AND c.relacl IS NOT NULL
        UNION ALL
        SELECT format('GRANT %s ON %s TO %s%s', a.privilege_type, name,
                      CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
                      CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
        FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = obj.objid
        UNION ALL
        SELECT format('COMMENT ON %s %s IS %L', kind, name, d.description)
        FROM pg_description d WHERE d.classoid = 'pg_class'::regclass AND d.objoid = obj.objid
          AND d.objsubid = 0
        UNION ALL
        SELECT format('COMMENT ON COLUMN %s.%I IS %L', name, a.attname, d.description)
        FROM pg_description d JOIN pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid
        WHERE d.classoid = 'pg_class'::regclass AND d.objoid = obj.objid AND d.objsubid > 0) steps;
      INSERT INTO slotted_counter.update_steps (phase, statement)
      VALUES ('drop', format('DROP %s IF EXISTS %s CASCADE', kind, name));
    ELSE
      SELECT p.oid::regprocedure::text, CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END
        INTO name, kind
      FROM pg_proc p WHERE p.oid = obj.objid;
      INSERT INTO slotted_counter.update_steps (phase, statement)
      SELECT 'recreate', s FROM (
        SELECT 1 AS o, pg_get_functiondef(obj.objid) AS s
        UNION ALL
        SELECT 2, format('ALTER EXTENSION slotted_counter DROP %s %s', kind, name)
        UNION ALL
        SELECT 3, format('ALTER %s %s OWNER TO %I', kind, name, pg_get_userbyid(p.proowner))
        FROM pg_proc p WHERE p.oid = obj.objid
        UNION ALL
        SELECT 4, format('REVOKE ALL ON %s %s FROM PUBLIC, %I', kind, name, pg_get_userbyid(p.proowner))
        FROM pg_proc p WHERE p.oid = obj.objid AND p.proacl IS NOT NULL
        UNION ALL
        SELECT 5, format('GRANT %s ON %s %s TO %s%s', a.privilege_type, kind, name,
                         CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
                         CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
        FROM pg_proc p, aclexplode(p.proacl) a WHERE p.oid = obj.objid
        UNION ALL
        SELECT 6, format('COMMENT ON %s %s IS %L', kind, name, d.description)
        FROM pg_description d WHERE d.classoid = 'pg_proc'::regclass AND d.objoid = obj.objid) steps
      ORDER BY o;
      INSERT INTO slotted_counter.update_steps (phase, statement)
      VALUES ('drop', format('DROP %s IF EXISTS %s CASCADE', kind, name));
    END IF;
  END LOOP;
  -- Every object that depends on one dropped here was saved above.
  FOR obj IN SELECT statement FROM slotted_counter.update_steps WHERE phase = 'drop' ORDER BY n
  LOOP
    EXECUTE obj.statement;
  END LOOP;

  -- Table columns of the type (or of its array): converted to the names of their counters, with
  -- their defaults set again (a dangling id becomes its digits, which name no counter).
  FOR obj IN
    SELECT u.objid AS relid, a.attname, a.attndims > 0 OR t.typcategory = 'A' AS is_array,
           pg_get_expr(ad.adbin, ad.adrelid) AS default_expr
    FROM slotted_counter.update_users u
    JOIN pg_attribute a ON a.attrelid = u.objid AND a.attnum = u.objsubid
    JOIN pg_type t ON t.oid = a.atttypid
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE u.classid = 'pg_class'::regclass AND u.objsubid > 0
    ORDER BY u.objid, u.objsubid
  LOOP
    name := obj.relid::regclass::text;
    IF obj.default_expr IS NOT NULL THEN
      EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', name, obj.attname);
    END IF;
    INSERT INTO slotted_counter.update_steps (phase, statement) VALUES
      ('convert',
       format('ALTER TABLE %s ALTER COLUMN %I TYPE @extschema@.slotted_counter%s USING %I::text%s::@extschema@.slotted_counter%s',
              name, obj.attname, CASE WHEN obj.is_array THEN '[]' ELSE '' END, obj.attname,
              CASE WHEN obj.is_array THEN '[]' ELSE '' END, CASE WHEN obj.is_array THEN '[]' ELSE '' END));
    IF obj.default_expr IS NOT NULL THEN
      INSERT INTO slotted_counter.update_steps (phase, statement) VALUES
        ('convert', format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', name, obj.attname,
                              obj.default_expr));
    END IF;
  END LOOP;

  PERFORM pg_catalog.set_config('search_path', saved_path, true);
END
$update$;

-- The old type and its functions step aside under other names while columns are converted.
ALTER TYPE slotted_counter RENAME TO slotted_counter_03;
ALTER FUNCTION slotted_counter_in(cstring) RENAME TO slotted_counter_03_in;
ALTER FUNCTION slotted_counter_recv(internal) RENAME TO slotted_counter_03_recv;
ALTER FUNCTION slotted_counter_out(slotted_counter_03) RENAME TO slotted_counter_03_out;
ALTER FUNCTION slotted_counter_send(slotted_counter_03) RENAME TO slotted_counter_03_send;
ALTER OPERATOR CLASS slotted_counter_hash_ops USING hash RENAME TO slotted_counter_03_hash_ops;
ALTER OPERATOR FAMILY slotted_counter_hash_ops USING hash RENAME TO slotted_counter_03_hash_ops;
DROP VIEW slotted_counter.lagged;

-- The type: a counter's name. Input checks only that it can be one (1 to 63 bytes); output,
-- binary output, equality, order and hashing are those of its bytes.
CREATE TYPE slotted_counter;
CREATE FUNCTION slotted_counter_in(cstring) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_name_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_out(slotted_counter) RETURNS cstring
    AS 'textout' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_recv(internal) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_name_recv' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION slotted_counter_send(slotted_counter) RETURNS bytea
    AS 'textsend' LANGUAGE internal STABLE STRICT PARALLEL SAFE;
CREATE TYPE slotted_counter (
    INPUT = slotted_counter_in,
    OUTPUT = slotted_counter_out,
    RECEIVE = slotted_counter_recv,
    SEND = slotted_counter_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = extended
);

CREATE FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteaeq' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_ne(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteane' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_lt(slotted_counter, slotted_counter) RETURNS boolean
    AS 'bytealt' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_le(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteale' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_gt(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteagt' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_ge(slotted_counter, slotted_counter) RETURNS boolean
    AS 'byteage' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_cmp(slotted_counter, slotted_counter) RETURNS integer
    AS 'byteacmp' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_hash(slotted_counter) RETURNS integer
    AS 'hashvarlena' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION slotted_counter_hash_extended(slotted_counter, bigint) RETURNS bigint
    AS 'hashvarlenaextended' LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;

CREATE OPERATOR = (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (
    LEFTARG = slotted_counter, RIGHTARG = slotted_counter, PROCEDURE = slotted_counter_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel);

CREATE OPERATOR CLASS slotted_counter_ops DEFAULT FOR TYPE slotted_counter USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 slotted_counter_cmp(slotted_counter, slotted_counter);
CREATE OPERATOR CLASS slotted_counter_hash_ops DEFAULT FOR TYPE slotted_counter USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 slotted_counter_hash(slotted_counter),
    FUNCTION 2 slotted_counter_hash_extended(slotted_counter, bigint);

-- A counter given as text, varchar or name, as drivers and PL/pgSQL pass it, needs no cast;
-- the name's syntax is checked. To text it converts like any type (explicitly, or on assignment).
CREATE CAST (text AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (varchar AS slotted_counter) WITH INOUT AS IMPLICIT;
CREATE CAST (name AS slotted_counter) WITH INOUT AS IMPLICIT;
-- To and from the ids that slotted_counter.totals and .deltas store: a lookup (42704 if none).
CREATE FUNCTION slotted_counter_of_id(integer) RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'slotted_counter_of_id' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
CREATE FUNCTION slotted_counter_id(slotted_counter) RETURNS integer
    AS 'MODULE_PATHNAME', 'slotted_counter_id' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
CREATE CAST (integer AS slotted_counter) WITH FUNCTION slotted_counter_of_id(integer);
CREATE CAST (slotted_counter AS integer) WITH FUNCTION slotted_counter_id(slotted_counter);

-- Columns of the old type become names.
DO $convert$
DECLARE
  step record;
BEGIN
  FOR step IN SELECT statement FROM slotted_counter.update_steps WHERE phase = 'convert' ORDER BY n
  LOOP
    EXECUTE step.statement;
  END LOOP;
END
$convert$;

-- The old type and its functions stay, out of the way in schema slotted_counter under other
-- names, until a later version drops them: PostgreSQL takes no lock on a function, so a
-- statement parsed before this update commits may call them after it, and must find them (the
-- library still serves them). Nothing of the user's uses them any more; their casts go.
DROP CAST (text AS slotted_counter_03);
DROP CAST (varchar AS slotted_counter_03);
DROP CAST (name AS slotted_counter_03);
DROP CAST (integer AS slotted_counter_03);
DROP CAST (slotted_counter_03 AS integer);
ALTER TYPE slotted_counter_03 SET SCHEMA slotted_counter;
ALTER OPERATOR CLASS slotted_counter_03_hash_ops USING hash SET SCHEMA slotted_counter;
ALTER OPERATOR FAMILY slotted_counter_03_hash_ops USING hash SET SCHEMA slotted_counter;
DO $retire$
DECLARE
  old_type oid := 'slotted_counter.slotted_counter_03'::pg_catalog.regtype;
  ext oid := (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'slotted_counter');
  f record;
BEGIN
  FOR f IN
    SELECT p.oid, p.proname FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
     AND d.objid = p.oid AND d.refobjid = ext AND d.deptype = 'e'
    WHERE p.prorettype = old_type OR old_type = ANY (p.proargtypes::pg_catalog.oid[])
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SET SCHEMA slotted_counter',
                              f.oid::pg_catalog.regprocedure);
    IF f.proname NOT LIKE 'slotted\_counter\_03%' THEN
      EXECUTE pg_catalog.format('ALTER FUNCTION %s RENAME TO %I', f.oid::pg_catalog.regprocedure,
                                f.proname || '_03');
    END IF;
  END LOOP;
  FOR f IN
    SELECT o.oid FROM pg_catalog.pg_operator o WHERE o.oprleft = old_type
  LOOP
    EXECUTE pg_catalog.format('ALTER OPERATOR %s SET SCHEMA slotted_counter',
                              f.oid::pg_catalog.regoperator);
  END LOOP;
END
$retire$;

-- Counters
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL, if_not_exists boolean DEFAULT false)
    RETURNS slotted_counter
    AS 'MODULE_PATHNAME', 'sc_create_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_drop(counter slotted_counter, if_exists boolean DEFAULT false) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_drop_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Writes
CREATE FUNCTION sc_incr(counter slotted_counter, key bigint DEFAULT 0, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr(counter slotted_counter, key bigint, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_incr_at_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_incr_batch(counter slotted_counter, keys bigint[], deltas bigint[])
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'sc_incr_batch_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_set(counter slotted_counter, key bigint, value bigint,
                       at timestamptz DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_set_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Real-time reads
CREATE FUNCTION sc_sum(counter slotted_counter, key bigint DEFAULT 0) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum_keys(counter slotted_counter, keys bigint[]) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_keys_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_sum(counter slotted_counter, key bigint, since timestamptz,
                       until timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_sum_range_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_series(counter slotted_counter, key bigint, since timestamptz,
                          until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    AS 'MODULE_PATHNAME', 'sc_series_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 24;
CREATE FUNCTION sc_top(counter slotted_counter, n integer, since timestamptz DEFAULT NULL,
                       until timestamptz DEFAULT NULL)
    RETURNS TABLE(key bigint, value bigint)
    AS 'MODULE_PATHNAME', 'sc_top_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 10;
CREATE FUNCTION sc_drop_buckets(counter slotted_counter, before timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_drop_buckets_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Deferred aggregates
CREATE FUNCTION sc_attach(counter slotted_counter, target regclass, key_column name,
                          value_column name, every interval DEFAULT '1 minute') RETURNS void
    AS 'MODULE_PATHNAME', 'sc_attach_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_detach(counter slotted_counter, target regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_detach_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Privileges
CREATE FUNCTION sc_grant(counter slotted_counter, privileges text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_grant_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_revoke(counter slotted_counter, privileges text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_revoke_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_alter_owner(counter slotted_counter, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_alter_owner_by_name' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
CREATE FUNCTION sc_has_privilege(counter slotted_counter, privilege text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_has_privilege_by_name' LANGUAGE C STRICT STABLE;
CREATE FUNCTION sc_has_privilege(role text, counter slotted_counter, privilege text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'sc_has_privilege_role_by_name' LANGUAGE C STRICT STABLE;

-- The lagged values with their counter's name, as its caller.
CREATE VIEW slotted_counter.lagged WITH (security_invoker = true) AS
    SELECT c.name::slotted_counter AS counter, t.key, t.bucket, t.value, t.updated_at
    FROM slotted_counter.totals t JOIN slotted_counter.counters c
      ON c.id OPERATOR(pg_catalog.=) t.counter;
GRANT SELECT ON slotted_counter.lagged TO PUBLIC;

-- The user's views, materialized views and functions, as they were.
DO $recreate$
DECLARE
  saved_path text := pg_catalog.current_setting('search_path');
  step record;
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);
  FOR step IN SELECT statement FROM slotted_counter.update_steps WHERE phase = 'recreate' ORDER BY n
  LOOP
    EXECUTE step.statement;
  END LOOP;
  PERFORM pg_catalog.set_config('search_path', saved_path, true);
END
$recreate$;
-- In a fresh CREATE EXTENSION no other session can have seen the old type: it goes now.
DO $fresh$
DECLARE
  saved text := pg_catalog.current_setting('client_min_messages');
BEGIN
  IF EXISTS (SELECT FROM slotted_counter.update_steps WHERE phase = 'fresh') THEN
    PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);
    DROP TYPE slotted_counter.slotted_counter_03 CASCADE;
    DROP OPERATOR FAMILY slotted_counter.slotted_counter_03_hash_ops USING hash;
    PERFORM pg_catalog.set_config('client_min_messages', saved, true);
  END IF;
END
$fresh$;
DROP TABLE slotted_counter.update_steps, slotted_counter.update_users;

-- Descriptions, for \dT+, \df+, \d+ and \dv+.
COMMENT ON TYPE slotted_counter IS
    'a counter of this database, by name: bound when a call runs';
COMMENT ON FUNCTION slotted_counter_in(cstring) IS 'input of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_out(slotted_counter) IS 'output of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_recv(internal) IS 'binary input of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_send(slotted_counter) IS 'binary output of a counter reference: its name';
COMMENT ON FUNCTION slotted_counter_eq(slotted_counter, slotted_counter) IS 'whether two references name the same counter';
COMMENT ON FUNCTION slotted_counter_ne(slotted_counter, slotted_counter) IS 'whether two references name different counters';
COMMENT ON FUNCTION slotted_counter_lt(slotted_counter, slotted_counter) IS 'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_le(slotted_counter, slotted_counter) IS 'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_gt(slotted_counter, slotted_counter) IS 'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_ge(slotted_counter, slotted_counter) IS 'orders counter names by their bytes';
COMMENT ON FUNCTION slotted_counter_cmp(slotted_counter, slotted_counter) IS 'orders counter names by their bytes (btree)';
COMMENT ON FUNCTION slotted_counter_hash(slotted_counter) IS 'hashes a counter name, for GROUP BY, DISTINCT and hash joins';
COMMENT ON FUNCTION slotted_counter_hash_extended(slotted_counter, bigint) IS 'hashes a counter name with a seed';
COMMENT ON FUNCTION slotted_counter_of_id(integer) IS 'the counter with an id (of slotted_counter.totals): integer::slotted_counter';
COMMENT ON FUNCTION slotted_counter_id(slotted_counter) IS 'the id of a counter, as slotted_counter.totals stores it: slotted_counter::integer';
COMMENT ON FUNCTION sc_create(text, text, interval, boolean) IS
    'creates a counter (transactional or buffered, with a bucket width or none) owned by the current role';
COMMENT ON FUNCTION sc_drop(slotted_counter, boolean) IS
    'drops a counter, its values and its attachments (owner)';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint) IS
    'adds delta to the value of key and returns the new value (UPDATE)';
COMMENT ON FUNCTION sc_incr(slotted_counter, bigint, bigint, timestamptz) IS
    'adds delta to the bucket of a bucketed counter that holds the time at, returns its new value (UPDATE)';
COMMENT ON FUNCTION sc_incr_batch(slotted_counter, bigint[], bigint[]) IS
    'adds deltas[i] to keys[i] for every i, all or nothing, and returns the new values (UPDATE)';
COMMENT ON FUNCTION sc_set(slotted_counter, bigint, bigint, timestamptz) IS
    'sets the value of key (of the bucket that holds at) and returns the old value (UPDATE)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint) IS
    'the exact current value of key, over all its buckets (SELECT)';
COMMENT ON FUNCTION sc_sum(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the exact sum of the buckets of key that start in [since, until) (SELECT)';
COMMENT ON FUNCTION sc_sum_keys(slotted_counter, bigint[]) IS
    'the exact sum of a group of keys, each counted once (SELECT)';
COMMENT ON FUNCTION sc_series(slotted_counter, bigint, timestamptz, timestamptz) IS
    'the non-zero buckets of key that start in [since, until), oldest first (SELECT)';
COMMENT ON FUNCTION sc_top(slotted_counter, integer, timestamptz, timestamptz) IS
    'the n keys with the largest values (over the buckets in [since, until)), largest first (SELECT)';
COMMENT ON FUNCTION sc_drop_buckets(slotted_counter, timestamptz) IS
    'deletes the buckets that start before a time, with this transaction (UPDATE)';
COMMENT ON FUNCTION sc_attach(slotted_counter, regclass, name, name, interval) IS
    'writes the counter''s lagged values into a column of a table the role owns, at most every interval (owner)';
COMMENT ON FUNCTION sc_detach(slotted_counter, regclass) IS
    'stops the writes of sc_attach (owner)';
COMMENT ON FUNCTION sc_grant(slotted_counter, text, text) IS
    'grants SELECT, UPDATE or ALL on a counter to a role or PUBLIC (owner)';
COMMENT ON FUNCTION sc_revoke(slotted_counter, text, text) IS
    'revokes SELECT, UPDATE or ALL on a counter from a role or PUBLIC (owner)';
COMMENT ON FUNCTION sc_alter_owner(slotted_counter, text) IS
    'gives a counter to another role (owner)';
COMMENT ON FUNCTION sc_has_privilege(slotted_counter, text) IS
    'whether the current role holds any of the listed privileges on the counter';
COMMENT ON FUNCTION sc_has_privilege(text, slotted_counter, text) IS
    'whether a role (or PUBLIC) holds any of the listed privileges on the counter';
COMMENT ON VIEW slotted_counter.lagged IS
    'slotted_counter.totals with each counter by name: the values as of their last flush';
