-- slotted_counter_proxy 1.0: the slotted_counter API on a router node. Every call goes to the data
-- node (a database running slotted_counter) its key hashes to:
--
--     node = abs(hashint8(key) % number of nodes)          (PL/Proxy's modular_mapping)
--
-- or, for a counter keyed by text (sc_create(..., key_type => 'text')), abs(hashtext(key) % nodes),
-- the key's bytes hashed whatever its collation. Every function with a key has a form whose key is
-- text, as on a node; on a counter keyed by bigint it reads the text as a bigint (22P02, 22003 as
-- a node reports them), so an untyped key works on both kinds. A counter created with
-- spread => true sends each increment to a node picked at random and is read as the sum over
-- every node.
--
-- The checks of a call and the node it goes to are the library's, written once (src/route.cpp):
-- sc_incr and sc_sum are routed by the library itself (src/routed.cpp); every other call is a
-- PL/Proxy function whose CLUSTER or RUN ON is a function of the library, evaluated before
-- PL/Proxy connects, and the forms of a function for a bigint and a text key are made by one
-- definition each (the DO blocks below). The API (same names and argument order as on a single
-- server, the counter given by name) lands in the schema CREATE EXTENSION installs into; the
-- router's own tables live in the schema "slotted_counter_proxy"; the PL/Proxy cluster is the
-- foreign server "slotted_counter_proxy" that sc_proxy_configure creates.
--
-- A call through the router is a statement on its node, committed there at once (no two-phase
-- commit: transactional writes inside a transaction block are refused unless
-- slotted_counter_proxy.allow_transaction_block is on). A role reaches the data nodes as itself
-- only, never from a session a router opened, and writes nothing in a read-only transaction
-- (src/slotted_counter_proxy.cpp). Every connection to a node pins its search_path (src/nodes.cpp)
-- and every statement casts the counter to slotted_counter's type: nothing of the calling role's
-- own on a node takes part. The router's catalog (slotted_counter_proxy.counters) is written only
-- by sc_create, sc_drop and sc_alter_owner (src/catalog.cpp), for a role that owns the counter.

\echo Use "CREATE EXTENSION slotted_counter_proxy" to load this file. \quit

-- A router may live in a data node's database (routed.cpp then calls that node's keys
-- in-process), but not in slotted_counter's schema: both define sc_incr and the rest.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension
                WHERE extname = 'slotted_counter'
                  AND extnamespace = pg_catalog.to_regnamespace('@extschema@')) THEN
        RAISE EXCEPTION 'slotted_counter_proxy cannot share schema "%" with slotted_counter', '@extschema@'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Install the router in a schema of its own (CREATE EXTENSION slotted_counter_proxy SCHEMA router), or in a database of its own: both define sc_incr and the rest.';
    END IF;
END
$$;

CREATE SCHEMA slotted_counter_proxy;

-- The data nodes, in routing order, as sc_proxy_configure was given them (the foreign server holds
-- them followed by the router's settings). Written only by sc_proxy_configure.
CREATE TABLE slotted_counter_proxy.nodes (
    node    integer PRIMARY KEY CHECK (node >= 0),
    connstr text    NOT NULL
);

-- The counters the router routes: what a call needs to know before it picks a node. The
-- definition itself (bucket, retention, values, privileges) lives on every data node. Written only
-- by sc_create, sc_drop and sc_alter_owner (src/catalog.cpp), for a role that owns the counter on
-- the data nodes (as on the nodes, a role with the owner's privileges acts as the owner): nobody
-- can squat a name or flip another's counter between spread and not.
CREATE TABLE slotted_counter_proxy.counters (
    name       text        PRIMARY KEY,
    durability text        NOT NULL CHECK (durability IN ('transactional', 'buffered')),
    spread     boolean     NOT NULL,
    owner      regrole     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    key_type   text        NOT NULL DEFAULT 'bigint' CHECK (key_type IN ('bigint', 'text'))
);
GRANT USAGE ON SCHEMA slotted_counter_proxy TO PUBLIC;
GRANT SELECT ON slotted_counter_proxy.nodes, slotted_counter_proxy.counters TO PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('slotted_counter_proxy.nodes', '');
SELECT pg_catalog.pg_extension_config_dump('slotted_counter_proxy.counters', '');

-- ---------------------------------------------------------------------------------------------
-- Identity. A role reaches the data nodes as itself only (src/slotted_counter_proxy.cpp).

-- The CLUSTER of every PL/Proxy function below, evaluated before PL/Proxy connects: 42501 unless
-- the caller's user mapping (its own, or PUBLIC's) and the server's options would connect as the
-- caller; before that, 55000 in a session that a router opened (slotted_counter_proxy.hop): the
-- call would be routed again, maybe back to a router, until no connection is left. A function
-- routed by key names the cluster as a constant instead, and its RUN ON function (write_hash,
-- read_hashes), which PL/Proxy also evaluates before it connects, makes the same checks first.
CREATE FUNCTION slotted_counter_proxy.cluster() RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_cluster' LANGUAGE C STABLE;

-- cluster() for a routed write, which also raises 25006 in a read-only transaction, naming the
-- user's function ("sc_set()"): the node runs the write in a session of its own, which is not
-- read-only. Every PL/Proxy function that writes takes its cluster from it, or from a function of
-- src/route.cpp that makes the same checks.
CREATE FUNCTION slotted_counter_proxy.write_cluster(function text) RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_write_cluster' LANGUAGE C STABLE;

-- A node string as the foreign server holds it: connstr with the router's settings last in its
-- options (search_path pinned to pg_catalog, schema and pg_temp; slotted_counter_proxy.hop).
-- 22023 for a string libpq cannot read, or one with a password (every role reads the strings).
CREATE FUNCTION slotted_counter_proxy.node_string(node integer, connstr text, schema text)
    RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_node_string' LANGUAGE C CALLED ON NULL INPUT IMMUTABLE;
REVOKE EXECUTE ON FUNCTION slotted_counter_proxy.node_string(integer, text, text) FROM PUBLIC;

-- 42501 if the server's options or any user mapping on it would let a role reach the nodes as
-- another; sc_proxy_configure runs it.
CREATE FUNCTION slotted_counter_proxy.check_configuration() RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_check_configuration' LANGUAGE C STABLE;
REVOKE EXECUTE ON FUNCTION slotted_counter_proxy.check_configuration() FROM PUBLIC;

-- A user mapping on the router's server may name its own role (PUBLIC's: none) and a password.
CREATE FUNCTION slotted_counter_proxy.check_user_mapping() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'sc_proxy_check_user_mapping' LANGUAGE C;
CREATE EVENT TRIGGER slotted_counter_proxy_user_mapping ON ddl_command_end
    WHEN TAG IN ('CREATE USER MAPPING', 'ALTER USER MAPPING')
    EXECUTE FUNCTION slotted_counter_proxy.check_user_mapping();

-- ---------------------------------------------------------------------------------------------
-- Routing (src/route.cpp), evaluated by PL/Proxy before it connects; the call goes to node
-- abs(hash % nodes). Each takes the key as the user gave it (anyelement, anyarray).

-- The CLUSTER of a call on a whole counter, after cluster()'s or write_cluster(function)'s checks:
-- 22004 or 42704 for a counter the router does not route.
CREATE FUNCTION slotted_counter_proxy.counter_cluster(counter text, function text DEFAULT NULL)
    RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_counter_cluster' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The node a write of key goes to: its home node, or for a spread counter the node of request_id
-- when one is given (a retried sc_incr_once finds the id it left), else any node; bounded: 0A000
-- for a spread counter. function: the user's call, for the errors.
CREATE FUNCTION slotted_counter_proxy.write_hash(function text, counter text, key anyelement,
                                                 request_id text DEFAULT NULL,
                                                 bounded boolean DEFAULT false)
    RETURNS integer
    AS 'MODULE_PATHNAME', 'sc_proxy_write_hash' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The nodes a read of key asks: its home node, or every node for a spread counter; ranked: 0A000
-- for a spread counter, whose keys no node can rank.
CREATE FUNCTION slotted_counter_proxy.read_hashes(counter text, key anyelement,
                                                  ranked boolean DEFAULT false)
    RETURNS SETOF integer
    AS 'MODULE_PATHNAME', 'sc_proxy_read_hashes' LANGUAGE C CALLED ON NULL INPUT STABLE ROWS 1;

-- A group of keys split by node (a write when function is given, else a read): each key's hash,
-- its position from 1, and the keys and deltas with subscripts from 1.
CREATE FUNCTION slotted_counter_proxy.split_keys(function text, counter text, keys anyarray,
                                                 deltas bigint[], OUT hashes integer[],
                                                 OUT positions integer[], OUT keys anyarray,
                                                 OUT deltas bigint[])
    AS 'MODULE_PATHNAME', 'sc_proxy_split_keys' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- sc_set split by node: the key's home node, or every node of a spread counter (the first takes
-- the value, the others 0).
CREATE FUNCTION slotted_counter_proxy.set_route(counter text, key anyelement, value bigint,
                                                OUT hashes integer[], OUT vals bigint[])
    AS 'MODULE_PATHNAME', 'sc_proxy_set_route' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- How many keys sc_top asks of each node (every key of a spread counter), and whether the keys
-- are bigints (ties go to the smaller key: by number, else by bytes).
CREATE FUNCTION slotted_counter_proxy.top_n(counter text, n bigint, text_form boolean,
                                            OUT n_each bigint, OUT bigint_keys boolean)
    AS 'MODULE_PATHNAME', 'sc_proxy_top_n' LANGUAGE C CALLED ON NULL INPUT STABLE;

-- The union of the nodes' sketches of a distinct counter (src/sketches.cpp: the data node's
-- reading and union, shared), and its estimate, rounded.
CREATE FUNCTION slotted_counter_proxy.sketch_union(a bytea, b bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'sc_proxy_sketch_union' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE slotted_counter_proxy.sketch_union_agg(bytea) (
    SFUNC = slotted_counter_proxy.sketch_union, STYPE = bytea,
    COMBINEFUNC = slotted_counter_proxy.sketch_union, PARALLEL = SAFE);
CREATE FUNCTION slotted_counter_proxy.sketch_count(sketch bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_sketch_count' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

-- ---------------------------------------------------------------------------------------------
-- Every function with a key, once for both key types: %1$s is the key's type, %2$s the suffix of
-- the functions whose forms have names of their own (the array forms and sc_top, as on a node),
-- %3$s whether the key is text. On a counter keyed by text each goes to the node of hashtext(key)
-- and calls that node's text form; a text key of a counter keyed by bigint goes where that bigint
-- goes, to the node's text form, which reads it alike. An untyped key (a literal, a driver's
-- placeholder, NULL) resolves to the text forms on every counter, as PostgreSQL prefers the string
-- type for it; a typed integer key resolves to the bigint forms.
DO $generate$
DECLARE
    form record;
BEGIN
    FOR form IN SELECT * FROM (VALUES ('bigint', '', 'false'), ('text', '_text', 'true'))
                             AS f(key_type, suffix, text_form) LOOP
        EXECUTE format($sql$

-- What the router sends to the nodes. Each function is one round: to the key's node(s), to every
-- node (RUN ON ALL) or to each node with its own part of the arrays (SPLIT).
CREATE FUNCTION slotted_counter_proxy.node_sum_range%2$s(counter text, key %1$s,
                                                         since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes(counter, key);
    SELECT sc_sum(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_series%2$s(counter text, key %1$s, since timestamptz,
                                                      until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint) AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes(counter, key);
    SELECT bucket, value FROM sc_series(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

-- Each node gets the elements hashed to it and answers each with its position in the batch.
CREATE FUNCTION slotted_counter_proxy.node_incr_batch%2$s(counter text, hashes integer[],
                                                          positions integer[], keys %1$s[],
                                                          deltas bigint[])
    RETURNS TABLE(pos integer, value bigint) AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_incr_batch%2$s()');
    SPLIT hashes, positions, keys, deltas;
    RUN ON hashes;
    SELECT p AS pos, v AS value
      FROM unnest(positions, sc_incr_batch%2$s(counter::slotted_counter, keys, deltas)) AS r(p, v);
$$ LANGUAGE plproxy;

-- Each node named in hashes sets its own element of vals; returns the old values.
CREATE FUNCTION slotted_counter_proxy.node_set%2$s(counter text, key %1$s, hashes integer[],
                                                   vals bigint[], at timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_set()');
    SPLIT hashes, vals;
    RUN ON hashes;
    SELECT sc_set(counter::slotted_counter, key, v, at) FROM unnest(vals) AS v;
$$ LANGUAGE plproxy;

-- The keys of a group, each to its node (every key to every node for a spread counter).
CREATE FUNCTION slotted_counter_proxy.node_sum_keys%2$s(counter text, hashes integer[],
                                                        keys %1$s[])
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    SPLIT hashes, keys;
    RUN ON hashes;
    SELECT sc_sum_keys%2$s(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_top%2$s(counter text, n bigint, since timestamptz,
                                                   until timestamptz)
    RETURNS TABLE(key %1$s, value bigint) AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT key, value FROM sc_top%2$s(counter::slotted_counter, n, since, until);
$$ LANGUAGE plproxy;

-- Every node's count of the keys other than key above value, as of its last flush (sc_rank).
CREATE FUNCTION slotted_counter_proxy.node_keys_above%2$s(counter text, key %1$s, value bigint,
                                                          since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT slotted_counter.keys_above(counter::slotted_counter, key, value, since, until);
$$ LANGUAGE plproxy;

-- The API. Writes return what their node returns (a spread counter: that node's share).
CREATE FUNCTION @extschema@.sc_incr_bounded(counter text, key %1$s, delta bigint, lower bigint,
                                            upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint SET search_path = pg_catalog, pg_temp AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_incr_bounded()', counter, key, NULL, true);
    SELECT sc_incr_bounded(counter::slotted_counter, key, delta, lower, upper, at);
$$ LANGUAGE plproxy;

-- A rate limiter's call, on the key's home node, which keeps the key's limit: a limiter is never
-- spread (sc_create), and a spread counter is refused (0A000) as for a bound.
CREATE FUNCTION @extschema@.sc_throttle(counter text, key %1$s, cost bigint DEFAULT 1,
                                        OUT allowed boolean, OUT remaining bigint,
                                        OUT retry_after interval, OUT reset_after interval)
    RETURNS record SET search_path = pg_catalog, pg_temp AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_throttle()', counter, key, NULL, true);
    SELECT allowed, remaining, retry_after, reset_after
      FROM sc_throttle(counter::slotted_counter, key, cost);
$$ LANGUAGE plproxy;

-- A distinct counter's add, on the key's home node, which keeps the key's sketch: a distinct
-- counter is never spread (sc_create). An element of either type.
CREATE FUNCTION @extschema@.sc_add(counter text, key %1$s, element bigint,
                                   at timestamptz DEFAULT NULL) RETURNS boolean AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_add()', counter, key, NULL, true);
    SELECT sc_add(counter::slotted_counter, key, element, at);
$$ LANGUAGE plproxy;

CREATE FUNCTION @extschema@.sc_add(counter text, key %1$s, element text,
                                   at timestamptz DEFAULT NULL) RETURNS boolean AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_add()', counter, key, NULL, true);
    SELECT sc_add(counter::slotted_counter, key, element, at);
$$ LANGUAGE plproxy;

-- A key's sketch, from its home node: the key's count is the node's, its sketch the node's.
CREATE FUNCTION slotted_counter_proxy.node_sketch%2$s(counter text, key %1$s, since timestamptz,
                                                      until timestamptz)
    RETURNS SETOF bytea AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes(counter, key);
    SELECT CASE WHEN since IS NULL AND until IS NULL THEN sc_sketch(counter::slotted_counter, key)
                ELSE sc_sketch(counter::slotted_counter, key, since, until) END;
$$ LANGUAGE plproxy;

-- The union of a group's sketches on each node, with the keys that live there.
CREATE FUNCTION slotted_counter_proxy.node_sketch_keys%2$s(counter text, hashes integer[],
                                                           keys %1$s[])
    RETURNS SETOF bytea AS $$
    CLUSTER slotted_counter_proxy.cluster();
    SPLIT hashes, keys;
    RUN ON hashes;
    SELECT slotted_counter.sketch_keys%2$s(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

CREATE FUNCTION @extschema@.sc_sketch(counter text, key %1$s) RETURNS bytea
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.sketch_union_agg(s)
      FROM slotted_counter_proxy.node_sketch%2$s(counter, key, NULL, NULL) AS s
$$;

CREATE FUNCTION @extschema@.sc_sketch(counter text, key %1$s, since timestamptz,
                                      until timestamptz) RETURNS bytea
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.sketch_union_agg(s)
      FROM slotted_counter_proxy.node_sketch%2$s(counter, key, since, until) AS s
$$;

CREATE FUNCTION @extschema@.sc_count(counter text, key %1$s) RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.sketch_count(@extschema@.sc_sketch(counter, key))
$$;

CREATE FUNCTION @extschema@.sc_count(counter text, key %1$s, since timestamptz,
                                     until timestamptz) RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.sketch_count(@extschema@.sc_sketch(counter, key, since, until))
$$;

-- A group: one round per node, each with the keys that live there; the union of the nodes'.
CREATE FUNCTION @extschema@.sc_count_keys%2$s(counter text, keys %1$s[]) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN cardinality(s.hashes) = 0 THEN 0 ELSE
           (SELECT slotted_counter_proxy.sketch_count(slotted_counter_proxy.sketch_union_agg(v))
              FROM slotted_counter_proxy.node_sketch_keys%2$s(counter, s.hashes, s.keys) AS v)
           END
      FROM slotted_counter_proxy.split_keys(NULL, counter, keys, NULL) AS s
$$;

CREATE FUNCTION @extschema@.sc_incr_once(counter text, key %1$s, delta bigint, request_id text,
                                         at timestamptz DEFAULT NULL)
    RETURNS bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_incr_once()', counter, key, request_id);
    SELECT sc_incr_once(counter::slotted_counter, key, delta, request_id, at);
$$ LANGUAGE plproxy;

-- One round per node, each with its keys; the new values in the batch's order.
CREATE FUNCTION @extschema@.sc_incr_batch%2$s(counter text, keys %1$s[], deltas bigint[])
    RETURNS bigint[]
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN cardinality(s.hashes) = 0 THEN '{}'::bigint[] ELSE
           (SELECT array_agg(b.value ORDER BY b.pos)
              FROM slotted_counter_proxy.node_incr_batch%2$s(counter, s.hashes, s.positions,
                                                             s.keys, s.deltas) AS b) END
      FROM slotted_counter_proxy.split_keys('sc_incr_batch%2$s()', counter, keys, deltas) AS s
$$;

-- Sets the key's value; returns the old one. A spread counter: the first node takes the value,
-- every other node's share becomes 0, in one round.
CREATE FUNCTION @extschema@.sc_set(counter text, key %1$s, value bigint,
                                   at timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT sum(o)::bigint
      FROM slotted_counter_proxy.set_route(counter, key, value) AS r,
           slotted_counter_proxy.node_set%2$s(counter, key, r.hashes, r.vals, at) AS o
$$;

-- Reads: the home node's answer, or the sum over every node for a spread counter. A sum over
-- nodes is exact at some moment on each node, not at one moment for all.
CREATE FUNCTION @extschema@.sc_sum(counter text, key %1$s, since timestamptz, until timestamptz)
    RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT sum(v)::bigint
      FROM slotted_counter_proxy.node_sum_range%2$s(counter, key, since, until) AS v
$$;

CREATE FUNCTION @extschema@.sc_series(counter text, key %1$s, since timestamptz,
                                      until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint) LANGUAGE sql VOLATILE ROWS 24 AS $$
    SELECT s.bucket, sum(s.value)::bigint
      FROM slotted_counter_proxy.node_series%2$s(counter, key, since, until) AS s
     GROUP BY s.bucket ORDER BY s.bucket
$$;

-- A group: one round per node, each with the keys that live there. A repeated key goes to one
-- node, which counts it once, as a single server.
CREATE FUNCTION @extschema@.sc_sum_keys%2$s(counter text, keys %1$s[]) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN cardinality(s.hashes) = 0 THEN 0 ELSE
           (SELECT sum(v)::bigint
              FROM slotted_counter_proxy.node_sum_keys%2$s(counter, s.hashes, s.keys) AS v) END
      FROM slotted_counter_proxy.split_keys(NULL, counter, keys, NULL) AS s
$$;

-- Merged from every node's top n: a key lives on one node, so the n largest overall are among
-- the nodes' n largest. A spread counter's key has a share on every node: every node sends all
-- its keys, and the router adds them up.
CREATE FUNCTION @extschema@.sc_top%2$s(counter text, n bigint, since timestamptz DEFAULT NULL,
                                       until timestamptz DEFAULT NULL)
    RETURNS TABLE(key %1$s, value bigint)
    LANGUAGE sql VOLATILE ROWS 10 SET search_path = pg_catalog, pg_temp AS $$
    SELECT FROM slotted_counter_proxy.top_n(counter, n, %3$s);      -- before LIMIT n is read
    SELECT t.key, sum(t.value)::bigint
      FROM slotted_counter_proxy.top_n(counter, n, %3$s) AS r,
           slotted_counter_proxy.node_top%2$s(counter, r.n_each, since, until) AS t
     GROUP BY t.key, r.bigint_keys
     ORDER BY 2 DESC, CASE WHEN r.bigint_keys THEN t.key::text::bigint END,
              t.key::text COLLATE "C"
     LIMIT n
$$;

-- As on a single server: 1 + the number of other keys with a larger value, the key's own value
-- now, the others' as of the last flush. Two rounds: the key's value from its home node (as the
-- range form of sc_sum reads it, which is what a node's sc_rank ranks), then every node's count of
-- its keys above that value, added up (a key lives on one node, so no key is counted twice).
CREATE FUNCTION @extschema@.sc_rank(counter text, key %1$s, since timestamptz DEFAULT NULL,
                                    until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT FROM slotted_counter_proxy.read_hashes(counter, key, ranked => true);
    SELECT 1 + (SELECT sum(a)::bigint
                  FROM slotted_counter_proxy.node_keys_above%2$s(counter, key, own.v, since,
                                                                 until) AS a)
      FROM slotted_counter_proxy.node_sum_range%2$s(counter, key, since, until) AS own(v)
$$;
$sql$, form.key_type, form.suffix, form.text_form);
    END LOOP;
END
$generate$;

-- ---------------------------------------------------------------------------------------------
-- Calls on a whole counter: every node's total (sc_total) and per bucket (sc_total_series).
CREATE FUNCTION slotted_counter_proxy.node_total(counter text, since timestamptz,
                                                 until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT sc_total(counter::slotted_counter, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_sketch_total(counter text, since timestamptz,
                                                        until timestamptz)
    RETURNS SETOF bytea AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT slotted_counter.sketch_total(counter::slotted_counter, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_total_series(counter text, since timestamptz,
                                                        until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint) AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT bucket, value FROM sc_total_series(counter::slotted_counter, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_rollup() RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT sc_rollup();
$$ LANGUAGE plproxy;

-- The arguments a node's sc_create names are named otherwise here: PL/Proxy would take a name
-- of an argument for the argument's value.
CREATE FUNCTION slotted_counter_proxy.node_create(name text, durability text, bucket interval,
                                                  retain interval, key_kind text,
                                                  limit_rate bigint, limit_per interval,
                                                  limit_burst bigint, counter_kind text,
                                                  sketch_log2m integer)
    RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_create()');
    RUN ON ALL;
    SELECT sc_create(name, durability, bucket, retain, if_not_exists => true,
                     key_type => key_kind, rate => limit_rate, per => limit_per,
                     burst => limit_burst, kind => counter_kind, log2m => sketch_log2m)::text;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_drop(name text) RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_drop()');
    RUN ON ALL;
    SELECT sc_drop(name::slotted_counter, if_exists => true)::text;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_drop_buckets(counter text, before timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_drop_buckets()');
    RUN ON ALL;
    SELECT sc_drop_buckets(counter::slotted_counter, before);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_alter_retention(counter text, retain interval)
    RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_alter_retention()');
    RUN ON ALL;
    SELECT sc_alter_retention(counter::slotted_counter, retain)::text;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_grant(counter text, privileges text, role text,
                                                 is_revoke boolean)
    RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster(CASE WHEN is_revoke THEN 'sc_revoke()'
                                                     ELSE 'sc_grant()' END);
    RUN ON ALL;
    SELECT CASE WHEN is_revoke THEN sc_revoke(counter::slotted_counter, privileges, role)::text
                ELSE sc_grant(counter::slotted_counter, privileges, role)::text END;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_alter_owner(counter text, role text)
    RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_alter_owner()');
    RUN ON ALL;
    SELECT sc_alter_owner(counter::slotted_counter, role)::text;
$$ LANGUAGE plproxy;

-- What sc_proxy_configure asks every node, each with its own number in nodes (so that its
-- answer says which node it is): its slotted_counter version and schema (NULL without the
-- extension), how many of the given counters it defines, and whether the router's own functions
-- are in a schema the router's connections search (pg_catalog or slotted_counter's): a router
-- installed there would answer the statements the router sends instead of slotted_counter, and
-- route each back to the nodes. Every role's connections search the same schemas, whatever its
-- own search_path, since the router pins it. The counters are counted by their guards, the
-- sequences slotted_counters.<name>, in the catalog: the table slotted_counter.counters, named in
-- this statement, would be looked up when the node parses it, and a node without the extension
-- would answer 42P01.
CREATE FUNCTION slotted_counter_proxy.node_check(nodes integer[], wanted text[])
    RETURNS TABLE(node_number integer, node text, version text, schema text, defined bigint,
                  loops boolean) AS $$
    CLUSTER slotted_counter_proxy.cluster();
    SPLIT nodes;
    RUN ON nodes;
    SELECT n AS node_number,
           pg_catalog.format('database %s on port %s', pg_catalog.current_database(),
                             pg_catalog.current_setting('port')) AS node,
           e.extversion::pg_catalog.text AS version, s.nspname::pg_catalog.text AS schema,
           (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c
              JOIN pg_catalog.pg_namespace g ON g.oid OPERATOR(pg_catalog.=) c.relnamespace
             WHERE g.nspname OPERATOR(pg_catalog.=) 'slotted_counters'
               AND c.relkind OPERATOR(pg_catalog.=) 'S'
               AND c.relname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (wanted)) AS defined,
           EXISTS (SELECT FROM pg_catalog.pg_depend d
                     JOIN pg_catalog.pg_extension r ON r.oid OPERATOR(pg_catalog.=) d.refobjid
                     JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'
                      AND r.extname OPERATOR(pg_catalog.=) 'slotted_counter_proxy'
                      AND (p.pronamespace OPERATOR(pg_catalog.=) e.extnamespace
                           OR p.pronamespace OPERATOR(pg_catalog.=)
                              'pg_catalog'::pg_catalog.regnamespace)) AS loops
      FROM pg_catalog.unnest(nodes) AS n
      LEFT JOIN pg_catalog.pg_extension e ON e.extname OPERATOR(pg_catalog.=) 'slotted_counter'
      LEFT JOIN pg_catalog.pg_namespace s ON s.oid OPERATOR(pg_catalog.=) e.extnamespace;
$$ LANGUAGE plproxy;

-- Sets the router's foreign server to the node strings `strings` (in routing order, each already
-- with the router's settings: node_string), in one statement: PL/Proxy reloads the cluster when
-- it changes. The first call creates the server, with a user mapping for PUBLIC.
CREATE FUNCTION slotted_counter_proxy.set_node_strings(strings text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    opts text := '';
    present text[];
    r record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_foreign_server WHERE srvname = 'slotted_counter_proxy') THEN
        FOR i IN 1 .. cardinality(strings) LOOP
            opts := opts || format(', p%s %L', i - 1, strings[i]);
        END LOOP;
        EXECUTE format('CREATE SERVER slotted_counter_proxy FOREIGN DATA WRAPPER plproxy '
                       'OPTIONS (modular_mapping %L%s)', '1', opts);
        CREATE USER MAPPING FOR PUBLIC SERVER slotted_counter_proxy;
        GRANT USAGE ON FOREIGN SERVER slotted_counter_proxy TO PUBLIC;
        RETURN;
    END IF;
    -- Set, add and drop partitions in one ALTER.
    SELECT array_agg(split_part(o, '=', 1)) INTO present
      FROM pg_foreign_server, unnest(srvoptions) AS o
     WHERE srvname = 'slotted_counter_proxy';
    present := coalesce(present, '{}');
    opts := format(', %s modular_mapping %L',
                   CASE WHEN 'modular_mapping' = ANY (present) THEN 'SET' ELSE 'ADD' END, '1');
    FOR i IN 1 .. cardinality(strings) LOOP
        opts := opts || format(', %s p%s %L',
                               CASE WHEN format('p%s', i - 1) = ANY (present) THEN 'SET'
                                    ELSE 'ADD' END,
                               i - 1, strings[i]);
    END LOOP;
    FOR r IN SELECT p FROM unnest(present) AS p
              WHERE p ~ '^p[0-9]+$' AND substr(p, 2)::integer >= cardinality(strings) LOOP
        opts := opts || format(', DROP %I', r.p);
    END LOOP;
    EXECUTE format('ALTER SERVER slotted_counter_proxy OPTIONS (%s)', substr(opts, 3));
END
$$;
REVOKE EXECUTE ON FUNCTION slotted_counter_proxy.set_node_strings(text[]) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Configuration

CREATE FUNCTION sc_proxy_configure(nodes text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old_count integer;
    routed text[];
    schemas text[];
    r record;
BEGIN
    IF nodes IS NULL OR array_position(nodes, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'nodes must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF cardinality(nodes) = 0 THEN
        RAISE EXCEPTION 'nodes must name at least one data node'
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF array_ndims(nodes) > 1 THEN
        RAISE EXCEPTION 'nodes must be a one-dimensional array'
            USING ERRCODE = 'array_subscript_error';
    END IF;
    nodes := ARRAY(SELECT n FROM unnest(nodes) AS n);  -- subscripts from 1
    -- One configuration at a time; calls keep routing with the committed one meanwhile.
    LOCK TABLE slotted_counter_proxy.nodes IN EXCLUSIVE MODE;
    SELECT count(*) INTO old_count FROM slotted_counter_proxy.nodes;
    routed := ARRAY(SELECT name FROM slotted_counter_proxy.counters ORDER BY name);
    IF old_count > 0 AND old_count <> cardinality(nodes) AND cardinality(routed) > 0 THEN
        RAISE EXCEPTION 'the router already routes % counters over % data nodes',
                        cardinality(routed), old_count
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('A key lives on node abs(hashint8(key) %% nodes): %s nodes would send existing keys to other nodes.',
                                  cardinality(nodes)),
                  HINT = 'Keep the number of nodes and move whole nodes (docs/router.md: "Changing the data nodes"), or drop every counter first.';
    END IF;

    DELETE FROM slotted_counter_proxy.nodes;
    INSERT INTO slotted_counter_proxy.nodes
        SELECT g.s - 1, nodes[g.s] FROM generate_subscripts(nodes, 1) AS g(s);

    -- The server holds the strings with the router's settings (node_string: 22023 for a string
    -- libpq cannot read or one with a password), first with a search_path of pg_catalog and
    -- pg_temp only, for node_check, which qualifies every name: slotted_counter's schema on each
    -- node is what it finds out.
    PERFORM slotted_counter_proxy.set_node_strings(ARRAY(
        SELECT slotted_counter_proxy.node_string(g.s - 1, nodes[g.s], NULL)
          FROM generate_subscripts(nodes, 1) AS g(s) ORDER BY g.s));
    -- Neither a node string nor a user mapping may make a role reach the nodes as another.
    PERFORM slotted_counter_proxy.check_configuration();

    -- Every node must run slotted_counter and define every counter the router routes: a node
    -- string that now reaches another database (an empty one, say) would lose its keys.
    schemas := array_fill(NULL::text, ARRAY[cardinality(nodes)]);
    FOR r IN SELECT * FROM slotted_counter_proxy.node_check(
                 ARRAY(SELECT generate_series(0, cardinality(nodes) - 1)), routed) LOOP
        IF r.version IS NULL THEN
            RAISE EXCEPTION 'data node (%) has no slotted_counter', r.node
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Run CREATE EXTENSION slotted_counter in every database the nodes name.';
        ELSIF r.loops THEN
            RAISE EXCEPTION 'data node (%) resolves sc_incr and the rest to the router itself', r.node
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The router''s functions are in pg_catalog or in schema %s there, which every connection of the router searches: every routed statement would come back to a router.', r.schema),
                      HINT = 'Install the router in a schema of its own.';
        ELSIF r.defined <> cardinality(routed) THEN
            RAISE EXCEPTION 'data node (%) defines % of the % counters the router routes',
                            r.node, r.defined, cardinality(routed)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A node string must reach the node''s database, or a restored copy of it.';
        END IF;
        schemas[r.node_number + 1] := r.schema;
    END LOOP;
    -- Then with each node's slotted_counter schema on the path, where every routed statement finds
    -- slotted_counter's functions and type. The schema it had now: a node whose extension moves
    -- to another schema is configured again.
    PERFORM slotted_counter_proxy.set_node_strings(ARRAY(
        SELECT slotted_counter_proxy.node_string(g.s - 1, nodes[g.s], schemas[g.s])
          FROM generate_subscripts(nodes, 1) AS g(s) ORDER BY g.s));
END
$$;
REVOKE EXECUTE ON FUNCTION sc_proxy_configure(text[]) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Counters

-- sc_create, sc_drop and sc_alter_owner change the nodes through PL/Proxy as the caller, and the
-- router's catalog once every node answered that the caller owns the counter there
-- (src/catalog.cpp): no SQL function writes the catalog. Each refuses a transaction block (25001).
--
-- key_type comes after spread, which came first, and a rate limiter's rate, per and burst after
-- key_type: a call that gives the earlier ones by position keeps working. Name them:
-- sc_create('c', key_type => 'text'), sc_create('c', rate => 10, per => '1 minute'),
-- sc_create('c', kind => 'distinct'). A rate limiter or a distinct counter cannot be spread
-- (0A000).
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL, retain interval DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, spread boolean DEFAULT false,
                          key_type text DEFAULT 'bigint', rate bigint DEFAULT NULL,
                          per interval DEFAULT NULL, burst bigint DEFAULT NULL,
                          kind text DEFAULT NULL, log2m integer DEFAULT NULL)
    RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_create' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The row goes first, in the caller's transaction, then the nodes' counter: a drop cut short by a
-- node that is down keeps the row, and can be repeated.
CREATE FUNCTION sc_drop(counter text, if_exists boolean DEFAULT false) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_drop' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_alter_retention(counter text, retain interval) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter, 'sc_alter_retention()');
    SELECT FROM slotted_counter_proxy.node_alter_retention(counter, retain);
$$;

-- As on a data node (slotted_counter--1.0.sql): the same with every interval as text, what a
-- driver sends for a string and what an untyped literal resolves to; the first interval has no
-- default, so that a call that gives none has one candidate.
CREATE FUNCTION sc_create(name text, durability text, bucket text, retain text DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, spread boolean DEFAULT false,
                          key_type text DEFAULT 'bigint', rate bigint DEFAULT NULL,
                          per text DEFAULT NULL, burst bigint DEFAULT NULL,
                          kind text DEFAULT NULL, log2m integer DEFAULT NULL)
    RETURNS text
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_create(name, durability, bucket::interval, retain::interval,
                                 if_not_exists, spread, key_type, rate, per::interval, burst,
                                 kind, log2m)
$$;
CREATE FUNCTION sc_alter_retention(counter text, retain text) RETURNS void
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_alter_retention(counter, retain::interval)
$$;

CREATE FUNCTION sc_grant(counter text, privileges text, role text) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter, 'sc_grant()');
    SELECT FROM slotted_counter_proxy.node_grant(counter, privileges, role, false);
$$;

CREATE FUNCTION sc_revoke(counter text, privileges text, role text) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter, 'sc_revoke()');
    SELECT FROM slotted_counter_proxy.node_grant(counter, privileges, role, true);
$$;

-- The nodes first (they check the giver may give it, and to whom); then the router records the
-- owner they name. If the recording fails, calling again records it.
CREATE FUNCTION sc_alter_owner(counter text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_alter_owner' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---------------------------------------------------------------------------------------------
-- The calls an application makes most, sc_incr and sc_sum, are routed by the router's own C
-- (src/routed.cpp): prepared statements on connections it keeps, no PL/Proxy.

CREATE FUNCTION sc_incr(counter text, key bigint DEFAULT 0, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr(counter text, key bigint, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The key has no default here, so that a call with no key has one candidate.
CREATE FUNCTION sc_incr(counter text, key text, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr(counter text, key text, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_sum(counter text, key bigint DEFAULT 0) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_sum' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_sum(counter text, key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_sum_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The sum over every node's keys: each node's total is exact at some moment during the call.
CREATE FUNCTION sc_total(counter text, since timestamptz DEFAULT NULL,
                         until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter);
    SELECT COALESCE(sum(v), 0)::bigint
      FROM slotted_counter_proxy.node_total(counter, since, until) AS v;
$$;

-- The union of every node's keys: each node's union holds its keys at some moment during the
-- call.
CREATE FUNCTION sc_count_total(counter text, since timestamptz DEFAULT NULL,
                               until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter);
    SELECT COALESCE(slotted_counter_proxy.sketch_count(slotted_counter_proxy.sketch_union_agg(v)),
                    0)
      FROM slotted_counter_proxy.node_sketch_total(counter, since, until) AS v;
$$;

CREATE FUNCTION sc_total_series(counter text, since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    LANGUAGE sql VOLATILE ROWS 24 AS $$
    SELECT s.bucket, sum(s.value)::bigint
      FROM slotted_counter_proxy.node_total_series(counter, since, until) AS s
     GROUP BY s.bucket HAVING sum(s.value) <> 0 ORDER BY s.bucket
$$;

CREATE FUNCTION sc_drop_buckets(counter text, before timestamptz) RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.counter_cluster(counter, 'sc_drop_buckets()');
    SELECT sum(v)::bigint FROM slotted_counter_proxy.node_drop_buckets(counter, before) AS v;
$$;

-- Flushes every node's buffered counters of its database; returns the rows written on all.
CREATE FUNCTION sc_rollup() RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(sum(v), 0)::bigint FROM slotted_counter_proxy.node_rollup() AS v
$$;

-- ---------------------------------------------------------------------------------------------
-- The key's node, for an application that calls the data nodes directly (docs/router.md,
-- "Skipping the router"): the node a call of the router would reach, and its string (no user: the
-- application connects as its own role). 0A000 for a spread counter, whose keys have no home.

CREATE FUNCTION sc_proxy_node_of(counter text, key bigint, OUT node integer, OUT connstr text)
    AS 'MODULE_PATHNAME', 'sc_proxy_node_of' LANGUAGE C CALLED ON NULL INPUT STABLE;

CREATE FUNCTION sc_proxy_node_of(counter text, key text, OUT node integer, OUT connstr text)
    AS 'MODULE_PATHNAME', 'sc_proxy_node_of_text' LANGUAGE C CALLED ON NULL INPUT STABLE;
