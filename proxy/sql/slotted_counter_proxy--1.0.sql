-- slotted_counter_proxy 1.0: the slotted_counter API on a router node. Every call goes, through
-- PL/Proxy, to the data node (a database running slotted_counter) its key hashes to:
--
--     node = abs(hashint8(key) % number of nodes)          (PL/Proxy's modular_mapping)
--
-- or, for a counter keyed by text (sc_create(..., key_type => 'text')), abs(hashtext(key) % nodes),
-- the key's bytes hashed whatever its collation. Every function with a key has a form whose key is
-- text, as on a node; on a counter keyed by bigint it reads the text as a bigint (22P02, 22003 as
-- a node reports them) and routes that, so an untyped key works on both kinds.
--
-- A counter created with spread => true sends each increment to a node picked at random and is
-- read as the sum over every node. The API (same names and argument order as on a single server,
-- the counter given by name) lands in the schema CREATE EXTENSION installs into; the router's
-- own tables live in the schema "slotted_counter_proxy"; the PL/Proxy cluster is the foreign
-- server "slotted_counter_proxy" that sc_proxy_configure creates.
--
-- A call through the router is a statement on its node, committed there at once (PL/Proxy has
-- no two-phase commit); the router refuses transactional writes inside a transaction block
-- unless slotted_counter_proxy.allow_transaction_block is on (src/slotted_counter_proxy.cpp).
--
-- A role reaches the data nodes as itself only: every PL/Proxy function below takes its cluster
-- from slotted_counter_proxy.cluster() or write_cluster() (or its RUN ON function calls one
-- first), which refuses a user mapping or node string that would connect as another role, a call
-- in a session a router opened (a loop), and a write in a read-only transaction; an event trigger
-- refuses such mappings when they are made. Every connection to a node pins its search_path to
-- pg_catalog, slotted_counter's schema there and pg_temp (the node strings of the foreign server
-- end with the router's settings: src/nodes.cpp), and every statement sent casts the counter to
-- slotted_counter's own type, so that nothing of the calling role's own on a node (its search_path,
-- its schemas, its temporary objects) takes part. The router's catalog
-- (slotted_counter_proxy.counters) is written only by sc_create, sc_drop and sc_alter_owner, in
-- C (src/catalog.cpp), for a role that owns the counter on the nodes.

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

CREATE FUNCTION slotted_counter_proxy.check_autocommit(counter text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_check_autocommit' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---------------------------------------------------------------------------------------------
-- Identity. A role reaches the data nodes as itself only (src/slotted_counter_proxy.cpp).

-- The CLUSTER of every PL/Proxy function below, evaluated before PL/Proxy connects: 42501 unless
-- the caller's user mapping (its own, or PUBLIC's) and the server's options would connect as the
-- caller. The hot calls (sc_incr, sc_incr_once, sc_incr_bounded, sc_sum, sc_series) name the
-- cluster as a constant instead, and their RUN ON functions (write_hash, read_hashes), which
-- PL/Proxy also evaluates before it connects, call cluster() first: that saves a query per call.
-- Before that, 55000 in a session that a router opened (slotted_counter_proxy.hop): the call
-- would be routed again, maybe back to a router, until no connection is left.
CREATE FUNCTION slotted_counter_proxy.cluster() RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_cluster' LANGUAGE C STABLE;

-- cluster() for a routed write, which also raises 25006 in a read-only transaction, naming the
-- user's function ("sc_set()"): the node runs the write in a session of its own, which is not
-- read-only. Every write function below calls it first, and every PL/Proxy function that writes
-- takes its cluster from it (or its RUN ON function calls it).
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
-- Routing. PL/Proxy evaluates the RUN ON function of a call and sends the call to node
-- abs(hash % nodes); a node number 0..nodes-1 is its own hash.

-- The counter's row, or 22004/42704 as a single server reports them.
CREATE FUNCTION slotted_counter_proxy.counter_of(counter text)
    RETURNS slotted_counter_proxy.counters
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters;
BEGIN
    IF counter IS NULL THEN
        RAISE EXCEPTION 'counter must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO c FROM slotted_counter_proxy.counters WHERE name = counter;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'counter "%" does not exist', counter USING ERRCODE = 'undefined_object';
    END IF;
    RETURN c;
END
$$;

-- 42804 for a counter keyed by text given to a function whose keys are bigint, as a node
-- reports it.
CREATE FUNCTION slotted_counter_proxy.keyed_by_text(counter text) RETURNS void
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'counter "%" is keyed by text', counter
        USING ERRCODE = 'datatype_mismatch',
              HINT = 'Give its keys as text (an untyped literal, a text or varchar value), and use sc_top_text, sc_incr_batch_text and sc_sum_keys_text.';
END
$$;

-- 0A000 for a bounded increment of a spread counter: each node would check the bound against
-- its own share only.
CREATE FUNCTION slotted_counter_proxy.check_bound(counter text) RETURNS void
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (slotted_counter_proxy.counter_of(counter)).spread THEN
        RAISE EXCEPTION 'counter "%" is spread over the data nodes: a bound cannot be kept', counter
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Each node would check the bound against its own share only.';
    END IF;
END
$$;

-- 0A000 for a rank of a spread counter's key: every node holds a share of every key, so no node
-- can count the keys above a value (keys_above compares its own shares).
CREATE FUNCTION slotted_counter_proxy.spread_not_ranked(counter text) RETURNS void
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'counter "%" is spread over the data nodes: its keys cannot be ranked', counter
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'Every node holds a share of every key, and counts only its own shares above a value.',
              HINT = 'Count the keys above sc_sum(counter, key) in sc_top(counter, n) with n at least the number of keys: that reads every key from every node.';
END
$$;

CREATE FUNCTION slotted_counter_proxy.node_count() RETURNS integer
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*)::integer FROM slotted_counter_proxy.nodes
$$;

-- The node a write of key goes to: its home node, or, for a spread counter, any node (the node
-- of request_id when one is given, so that a retried sc_incr_once finds the id it left).
-- function: the user's call, for write_cluster's error.
CREATE FUNCTION slotted_counter_proxy.write_hash(function text, counter text, key bigint,
                                                 request_id text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cluster text := slotted_counter_proxy.write_cluster(function);  -- 55000, 42501, 25006
    c record;
BEGIN
    -- One look-up on the path of every write (counter_of's checks, inline).
    SELECT name, durability, spread, key_type INTO c
      FROM slotted_counter_proxy.counters WHERE name = counter;
    IF NOT FOUND THEN
        PERFORM slotted_counter_proxy.counter_of(counter);
    ELSIF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    END IF;
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF NOT c.spread THEN
        RETURN hashint8(key);
    ELSIF request_id IS NOT NULL THEN
        RETURN hashtext(request_id);
    END IF;
    RETURN floor(random() * slotted_counter_proxy.node_count())::integer;
END
$$;

-- write_hash for a key given as text: on a counter keyed by text its home node is that of
-- hashtext(key), the key's bytes hashed (COLLATE "C": a collation that is not deterministic would
-- hash equal texts alike, and send different keys' calls to one node, or one key's to two); on a
-- counter keyed by bigint, the text read as a bigint (as a node reads it) goes where that bigint
-- goes.
CREATE FUNCTION slotted_counter_proxy.write_hash_text(function text, counter text, key text,
                                                      request_id text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cluster text := slotted_counter_proxy.write_cluster(function);  -- 55000, 42501, 25006
    c record;
    hash integer;
BEGIN
    SELECT name, durability, spread, key_type INTO c
      FROM slotted_counter_proxy.counters WHERE name = counter;
    IF NOT FOUND THEN
        PERFORM slotted_counter_proxy.counter_of(counter);
    ELSIF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        hash := hashtext(key COLLATE "C");
    ELSE
        hash := hashint8(key::bigint);                 -- 22P02, 22003 before anything is sent
    END IF;
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF NOT c.spread THEN
        RETURN hash;
    ELSIF request_id IS NOT NULL THEN
        RETURN hashtext(request_id);
    END IF;
    RETURN floor(random() * slotted_counter_proxy.node_count())::integer;
END
$$;

-- The nodes a read of key asks: its home node, or every node for a spread counter.
CREATE FUNCTION slotted_counter_proxy.read_hashes(counter text, key bigint)
    RETURNS SETOF integer
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cluster text := slotted_counter_proxy.cluster();   -- 55000, 42501
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    END IF;
    IF c.spread THEN
        RETURN QUERY SELECT generate_series(0, slotted_counter_proxy.node_count() - 1);
    ELSE
        RETURN NEXT hashint8(key);
    END IF;
END
$$;

-- read_hashes for a key given as text, its home node as write_hash_text picks it.
CREATE FUNCTION slotted_counter_proxy.read_hashes_text(counter text, key text)
    RETURNS SETOF integer
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cluster text := slotted_counter_proxy.cluster();   -- 55000, 42501
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    hash integer;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        hash := hashtext(key COLLATE "C");
    ELSE
        hash := hashint8(key::bigint);
    END IF;
    IF c.spread THEN
        RETURN QUERY SELECT generate_series(0, slotted_counter_proxy.node_count() - 1);
    ELSE
        RETURN NEXT hash;
    END IF;
END
$$;

-- One hash per element of keys (as write_hash picks them), for a call split by node.
CREATE FUNCTION slotted_counter_proxy.write_hashes(counter text, keys bigint[])
    RETURNS integer[]
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    nodes integer := slotted_counter_proxy.node_count();
BEGIN
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF c.spread THEN
        RETURN ARRAY(SELECT floor(random() * nodes)::integer FROM unnest(keys));
    END IF;
    RETURN ARRAY(SELECT hashint8(k) FROM unnest(keys) WITH ORDINALITY AS u(k, i) ORDER BY i);
END
$$;

-- write_hashes for the keys of a counter keyed by text.
CREATE FUNCTION slotted_counter_proxy.write_hashes_text(counter text, keys text[])
    RETURNS integer[]
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    nodes integer := slotted_counter_proxy.node_count();
BEGIN
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF c.spread THEN
        RETURN ARRAY(SELECT floor(random() * nodes)::integer FROM unnest(keys));
    END IF;
    RETURN ARRAY(SELECT hashtext(k COLLATE "C")
                   FROM unnest(keys) WITH ORDINALITY AS u(k, i) ORDER BY i);
END
$$;

-- An array argument (bigint[] or text[]) as a single server checks it: not NULL, one dimension,
-- no NULL element.
CREATE FUNCTION slotted_counter_proxy.check_elements(name text, elements anyarray)
    RETURNS void
    LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF elements IS NULL THEN
        RAISE EXCEPTION '% must not be null', name USING ERRCODE = 'null_value_not_allowed';
    ELSIF array_ndims(elements) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', name
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF array_position(elements, NULL) IS NOT NULL THEN
        RAISE EXCEPTION '% must not contain nulls', name
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = format('Element %s is null.', array_position(elements, NULL));
    END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- What the router sends to the nodes. Each function is one round: to one node, to every node
-- (RUN ON ALL) or to each node with its own part of the arrays (SPLIT).

CREATE FUNCTION slotted_counter_proxy.node_incr_bounded(counter text, key bigint, delta bigint,
                                                        lower bigint, upper bigint,
                                                        at timestamptz)
    RETURNS bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_incr_bounded()', counter, key);
    SELECT sc_incr_bounded(counter::slotted_counter, key, delta, lower, upper, at);
$$ LANGUAGE plproxy;

-- Each node gets the elements hashed to it and answers each with its position in the batch.
CREATE FUNCTION slotted_counter_proxy.node_incr_batch(counter text, hashes integer[],
                                                      positions integer[], keys bigint[],
                                                      deltas bigint[])
    RETURNS TABLE(pos integer, value bigint) AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_incr_batch()');
    SPLIT hashes, positions, keys, deltas;
    RUN ON hashes;
    SELECT p AS pos, v AS value
      FROM unnest(positions, sc_incr_batch(counter::slotted_counter, keys, deltas)) AS r(p, v);
$$ LANGUAGE plproxy;

-- Each node named in hashes sets its own element of vals; returns the old values.
CREATE FUNCTION slotted_counter_proxy.node_set(counter text, key bigint, hashes integer[],
                                               vals bigint[], at timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_set()');
    SPLIT hashes, vals;
    RUN ON hashes;
    SELECT sc_set(counter::slotted_counter, key, v, at) FROM unnest(vals) AS v;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_sum_range(counter text, key bigint,
                                                     since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes(counter, key);
    SELECT sc_sum(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_series(counter text, key bigint, since timestamptz,
                                                  until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint) AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes(counter, key);
    SELECT bucket, value FROM sc_series(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

-- The keys of a group, each to its home node.
CREATE FUNCTION slotted_counter_proxy.node_sum_keys(counter text, hashes integer[],
                                                    keys bigint[])
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    SPLIT hashes, keys;
    RUN ON hashes;
    SELECT sc_sum_keys(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

-- Every key of a group to every node (a spread counter).
CREATE FUNCTION slotted_counter_proxy.node_sum_keys_all(counter text, keys bigint[])
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT sc_sum_keys(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_top(counter text, n bigint, since timestamptz,
                                               until timestamptz)
    RETURNS TABLE(key bigint, value bigint) AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT key, value FROM sc_top(counter::slotted_counter, n, since, until);
$$ LANGUAGE plproxy;

-- Every node's count of the keys other than key above value, as of its last flush (sc_rank).
CREATE FUNCTION slotted_counter_proxy.node_keys_above(counter text, key bigint, value bigint,
                                                      since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT slotted_counter.keys_above(counter::slotted_counter, key, value, since, until);
$$ LANGUAGE plproxy;

-- The same for keys given as text: each node takes its text form (sc_incr(counter, key text, ...),
-- sc_incr_batch_text, ...), which reads the text as a bigint on a counter keyed by bigint.

CREATE FUNCTION slotted_counter_proxy.node_incr_bounded_text(counter text, key text,
                                                             delta bigint, lower bigint,
                                                             upper bigint, at timestamptz)
    RETURNS bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash_text('sc_incr_bounded()', counter, key);
    SELECT sc_incr_bounded(counter::slotted_counter, key, delta, lower, upper, at);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_incr_batch_text(counter text, hashes integer[],
                                                           positions integer[], keys text[],
                                                           deltas bigint[])
    RETURNS TABLE(pos integer, value bigint) AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_incr_batch_text()');
    SPLIT hashes, positions, keys, deltas;
    RUN ON hashes;
    SELECT p AS pos, v AS value
      FROM unnest(positions, sc_incr_batch_text(counter::slotted_counter, keys, deltas))
           AS r(p, v);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_set_text(counter text, key text, hashes integer[],
                                                    vals bigint[], at timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_set()');
    SPLIT hashes, vals;
    RUN ON hashes;
    SELECT sc_set(counter::slotted_counter, key, v, at) FROM unnest(vals) AS v;
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_sum_range_text(counter text, key text,
                                                          since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes_text(counter, key);
    SELECT sc_sum(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_series_text(counter text, key text,
                                                       since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint) AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.read_hashes_text(counter, key);
    SELECT bucket, value FROM sc_series(counter::slotted_counter, key, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_sum_keys_text(counter text, hashes integer[],
                                                         keys text[])
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    SPLIT hashes, keys;
    RUN ON hashes;
    SELECT sc_sum_keys_text(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_sum_keys_all_text(counter text, keys text[])
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT sc_sum_keys_text(counter::slotted_counter, keys);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_top_text(counter text, n bigint, since timestamptz,
                                                    until timestamptz)
    RETURNS TABLE(key text, value bigint) AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT key, value FROM sc_top_text(counter::slotted_counter, n, since, until);
$$ LANGUAGE plproxy;

CREATE FUNCTION slotted_counter_proxy.node_keys_above_text(counter text, key text, value bigint,
                                                           since timestamptz, until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT slotted_counter.keys_above(counter::slotted_counter, key, value, since, until);
$$ LANGUAGE plproxy;

-- Every node's total of every key (sc_total) and per bucket (sc_total_series).
CREATE FUNCTION slotted_counter_proxy.node_total(counter text, since timestamptz,
                                                 until timestamptz)
    RETURNS SETOF bigint AS $$
    CLUSTER slotted_counter_proxy.cluster();
    RUN ON ALL;
    SELECT sc_total(counter::slotted_counter, since, until);
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

CREATE FUNCTION slotted_counter_proxy.node_create(name text, durability text, bucket interval,
                                                  retain interval, key_kind text)
    RETURNS SETOF text AS $$
    CLUSTER slotted_counter_proxy.write_cluster('sc_create()');
    RUN ON ALL;
    SELECT sc_create(name, durability, bucket, retain, if_not_exists => true,
                     key_type => key_kind)::text;
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
-- key_type comes after spread, which came first: a call that gives spread by position keeps
-- working. Name it: sc_create('c', key_type => 'text').
CREATE FUNCTION sc_create(name text, durability text DEFAULT 'transactional',
                          bucket interval DEFAULT NULL, retain interval DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, spread boolean DEFAULT false,
                          key_type text DEFAULT 'bigint')
    RETURNS text
    AS 'MODULE_PATHNAME', 'sc_proxy_create' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The row goes first, in the caller's transaction, then the nodes' counter: a drop cut short by a
-- node that is down keeps the row, and can be repeated.
CREATE FUNCTION sc_drop(counter text, if_exists boolean DEFAULT false) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_drop' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_alter_retention(counter text, retain interval) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.write_cluster('sc_alter_retention()');
    SELECT FROM slotted_counter_proxy.counter_of(counter);
    SELECT FROM slotted_counter_proxy.node_alter_retention(counter, retain);
$$;

-- As on a data node (slotted_counter--1.0.sql): the same with every interval as text, what a
-- driver sends for a string and what an untyped literal resolves to; the first interval has no
-- default, so that a call that gives none has one candidate.
CREATE FUNCTION sc_create(name text, durability text, bucket text, retain text DEFAULT NULL,
                          if_not_exists boolean DEFAULT false, spread boolean DEFAULT false,
                          key_type text DEFAULT 'bigint')
    RETURNS text
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_create(name, durability, bucket::interval, retain::interval,
                                 if_not_exists, spread, key_type)
$$;
CREATE FUNCTION sc_alter_retention(counter text, retain text) RETURNS void
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT @extschema@.sc_alter_retention(counter, retain::interval)
$$;

CREATE FUNCTION sc_grant(counter text, privileges text, role text) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.write_cluster('sc_grant()');
    SELECT FROM slotted_counter_proxy.counter_of(counter);
    SELECT FROM slotted_counter_proxy.node_grant(counter, privileges, role, false);
$$;

CREATE FUNCTION sc_revoke(counter text, privileges text, role text) RETURNS void
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.write_cluster('sc_revoke()');
    SELECT FROM slotted_counter_proxy.counter_of(counter);
    SELECT FROM slotted_counter_proxy.node_grant(counter, privileges, role, true);
$$;

-- The nodes first (they check the giver may give it, and to whom); then the router records the
-- owner they name. If the recording fails, calling again records it.
CREATE FUNCTION sc_alter_owner(counter text, role text) RETURNS void
    AS 'MODULE_PATHNAME', 'sc_proxy_alter_owner' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---------------------------------------------------------------------------------------------
-- Writes: each returns what its node returns (a spread counter: that node's share).

-- sc_incr and sc_sum, the calls an application makes most, are routed by the router's own C
-- (src/routed.cpp): prepared statements on connections it keeps, no PL/Proxy. They route and check
-- exactly as write_hash and read_hashes do for PL/Proxy's functions.
CREATE FUNCTION sc_incr(counter text, key bigint DEFAULT 0, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr(counter text, key bigint, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr_bounded(counter text, key bigint, delta bigint, lower bigint,
                                upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_incr_bounded()');
    PERFORM slotted_counter_proxy.check_bound(counter);
    RETURN slotted_counter_proxy.node_incr_bounded(counter, key, delta, lower, upper, at);
END
$$;

CREATE FUNCTION sc_incr_once(counter text, key bigint, delta bigint, request_id text,
                             at timestamptz DEFAULT NULL)
    RETURNS bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash('sc_incr_once()', counter, key, request_id);
    SELECT sc_incr_once(counter::slotted_counter, key, delta, request_id, at);
$$ LANGUAGE plproxy;

-- One round per node: each gets its keys, in the batch's order.
CREATE FUNCTION sc_incr_batch(counter text, keys bigint[], deltas bigint[]) RETURNS bigint[]
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    result bigint[];
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_incr_batch()');
    PERFORM slotted_counter_proxy.check_elements('keys', keys);
    PERFORM slotted_counter_proxy.check_elements('deltas', deltas);
    IF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    ELSIF cardinality(keys) <> cardinality(deltas) THEN
        RAISE EXCEPTION 'keys and deltas must have the same length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('There are %s keys and %s deltas.',
                                  cardinality(keys), cardinality(deltas));
    END IF;
    IF cardinality(keys) = 0 THEN
        RETURN '{}';
    END IF;
    keys := ARRAY(SELECT k FROM unnest(keys) AS k);      -- subscripts from 1
    deltas := ARRAY(SELECT d FROM unnest(deltas) AS d);
    SELECT array_agg(b.value ORDER BY b.pos) INTO result
      FROM slotted_counter_proxy.node_incr_batch(
               counter, slotted_counter_proxy.write_hashes(counter, keys),
               ARRAY(SELECT generate_subscripts(keys, 1)), keys, deltas) AS b;
    RETURN result;
END
$$;

-- Sets the key's value; returns the old one. A spread counter: the first node takes the value,
-- every other node's share becomes 0, in one round.
CREATE FUNCTION sc_set(counter text, key bigint, value bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    nodes integer := slotted_counter_proxy.node_count();
    hashes integer[];
    vals bigint[];
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_set()');
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    END IF;
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF c.spread AND value IS NOT NULL THEN
        hashes := ARRAY(SELECT generate_series(0, nodes - 1));
        vals := ARRAY[value] || array_fill(0::bigint, ARRAY[nodes - 1]);
    ELSE
        hashes := ARRAY[hashint8(key)];   -- a NULL value: the node reports it
        vals := ARRAY[value];
    END IF;
    RETURN (SELECT sum(o)::bigint
              FROM slotted_counter_proxy.node_set(counter, key, hashes, vals, at) AS o);
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Reads: the home node's answer, or the sum over every node for a spread counter. A sum over
-- nodes is exact at some moment on each node, not at one moment for all.

CREATE FUNCTION sc_sum(counter text, key bigint DEFAULT 0) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_sum' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_sum(counter text, key bigint, since timestamptz, until timestamptz)
    RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT sum(v)::bigint FROM slotted_counter_proxy.node_sum_range(counter, key, since, until) AS v
$$;

CREATE FUNCTION sc_series(counter text, key bigint, since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    LANGUAGE sql VOLATILE ROWS 24 AS $$
    SELECT s.bucket, sum(s.value)::bigint
      FROM slotted_counter_proxy.node_series(counter, key, since, until) AS s
     GROUP BY s.bucket ORDER BY s.bucket
$$;

-- The sum over every node's keys: each node's total is exact at some moment during the call.
CREATE FUNCTION sc_total(counter text, since timestamptz DEFAULT NULL,
                         until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM slotted_counter_proxy.counter_of(counter);
    RETURN (SELECT COALESCE(sum(v), 0)::bigint
              FROM slotted_counter_proxy.node_total(counter, since, until) AS v);
END
$$;

CREATE FUNCTION sc_total_series(counter text, since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    LANGUAGE sql VOLATILE ROWS 24 AS $$
    SELECT s.bucket, sum(s.value)::bigint
      FROM slotted_counter_proxy.node_total_series(counter, since, until) AS s
     GROUP BY s.bucket HAVING sum(s.value) <> 0 ORDER BY s.bucket
$$;

-- A group: one round per node, each with the keys that live there (every key to every node for
-- a spread counter). A repeated key goes to one node, which counts it once, as a single server.
CREATE FUNCTION sc_sum_keys(counter text, keys bigint[]) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
BEGIN
    PERFORM slotted_counter_proxy.check_elements('keys', keys);
    IF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    ELSIF cardinality(keys) = 0 THEN
        RETURN 0;
    ELSIF c.spread THEN
        RETURN (SELECT sum(v)::bigint FROM slotted_counter_proxy.node_sum_keys_all(counter, keys) v);
    END IF;
    RETURN (SELECT sum(v)::bigint
              FROM slotted_counter_proxy.node_sum_keys(
                       counter, ARRAY(SELECT hashint8(k) FROM unnest(keys) AS k), keys) AS v);
END
$$;

-- Merged from every node's top n: a key lives on one node, so the n largest overall are among
-- the nodes' n largest. A spread counter's key has a share on every node: every node sends all
-- its keys, and the router adds them up.
CREATE FUNCTION sc_top(counter text, n bigint, since timestamptz DEFAULT NULL,
                       until timestamptz DEFAULT NULL)
    RETURNS TABLE(key bigint, value bigint)
    LANGUAGE plpgsql VOLATILE ROWS 10 SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
BEGIN
    IF n IS NULL THEN
        RAISE EXCEPTION 'n must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF n < 0 THEN
        RAISE EXCEPTION 'n must not be negative' USING ERRCODE = 'invalid_parameter_value';
    ELSIF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    END IF;
    RETURN QUERY
        SELECT t.key, sum(t.value)::bigint
          FROM slotted_counter_proxy.node_top(counter,
                                              CASE WHEN c.spread THEN 9223372036854775807 ELSE n END,
                                              since, until) AS t
         GROUP BY t.key
         ORDER BY 2 DESC, 1
         LIMIT n;
END
$$;

-- As on a single server: 1 + the number of other keys with a larger value, the key's own value
-- now, the others' as of the last flush. Two rounds: the key's value from its home node (as the
-- range form of sc_sum reads it, which is what a node's sc_rank ranks), then every node's count of
-- its keys above that value, added up (a key lives on one node, so no key is counted twice).
CREATE FUNCTION sc_rank(counter text, key bigint, since timestamptz DEFAULT NULL,
                        until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    own bigint;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'text' THEN
        PERFORM slotted_counter_proxy.keyed_by_text(c.name);
    ELSIF c.spread THEN
        PERFORM slotted_counter_proxy.spread_not_ranked(c.name);
    END IF;
    SELECT v INTO own FROM slotted_counter_proxy.node_sum_range(counter, key, since, until) AS v;
    RETURN 1 + (SELECT sum(a)::bigint
                  FROM slotted_counter_proxy.node_keys_above(counter, key, own, since, until) AS a);
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Keys as text: the same functions for a key given as text, as on a node. On a counter keyed by
-- text each goes to the node of hashtext(key) (every node, for a read of a spread counter) and
-- calls that node's text form; on a counter keyed by bigint the text is read as a bigint and goes
-- where the bigint form sends it. An untyped key (a literal, a driver's placeholder, NULL)
-- resolves to these forms on every counter, as PostgreSQL prefers the string type for it; a
-- typed integer key resolves to the bigint forms. The key has no default here, so that a call
-- with no key has one candidate. The array forms and sc_top have names of their own, as on a
-- node.

CREATE FUNCTION sc_incr(counter text, key text, delta bigint DEFAULT 1)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr(counter text, key text, delta bigint, at timestamptz)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_incr_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_incr_bounded(counter text, key text, delta bigint, lower bigint,
                                upper bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_incr_bounded()');
    PERFORM slotted_counter_proxy.check_bound(counter);
    RETURN slotted_counter_proxy.node_incr_bounded_text(counter, key, delta, lower, upper, at);
END
$$;

CREATE FUNCTION sc_incr_once(counter text, key text, delta bigint, request_id text,
                             at timestamptz DEFAULT NULL)
    RETURNS bigint AS $$
    CLUSTER 'slotted_counter_proxy';
    RUN ON slotted_counter_proxy.write_hash_text('sc_incr_once()', counter, key, request_id);
    SELECT sc_incr_once(counter::slotted_counter, key, delta, request_id, at);
$$ LANGUAGE plproxy;

-- As sc_incr_batch: one round per node, the new values in the batch's order. A key longer than a
-- node takes (2,048 bytes: slotted_counter's kMaxTextKey) fails the batch here, as it fails it on
-- a single server, before any node has counted its part.
CREATE FUNCTION sc_incr_batch_text(counter text, keys text[], deltas bigint[]) RETURNS bigint[]
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    too_long integer;
    result bigint[];
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_incr_batch_text()');
    PERFORM slotted_counter_proxy.check_elements('keys', keys);
    PERFORM slotted_counter_proxy.check_elements('deltas', deltas);
    IF c.key_type = 'bigint' THEN
        RETURN @extschema@.sc_incr_batch(counter, keys::bigint[], deltas);
    ELSIF cardinality(keys) <> cardinality(deltas) THEN
        RAISE EXCEPTION 'keys and deltas must have the same length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('There are %s keys and %s deltas.',
                                  cardinality(keys), cardinality(deltas));
    ELSIF cardinality(keys) = 0 THEN
        RETURN '{}';
    END IF;
    SELECT octet_length(k) INTO too_long FROM unnest(keys) AS k WHERE octet_length(k) > 2048 LIMIT 1;
    IF too_long IS NOT NULL THEN
        RAISE EXCEPTION 'key of counter "%" is too long', c.name
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('A key is at most 2048 bytes; this one has %s.', too_long);
    END IF;
    keys := ARRAY(SELECT k FROM unnest(keys) AS k);      -- subscripts from 1
    deltas := ARRAY(SELECT d FROM unnest(deltas) AS d);
    SELECT array_agg(b.value ORDER BY b.pos) INTO result
      FROM slotted_counter_proxy.node_incr_batch_text(
               counter, slotted_counter_proxy.write_hashes_text(counter, keys),
               ARRAY(SELECT generate_subscripts(keys, 1)), keys, deltas) AS b;
    RETURN result;
END
$$;

CREATE FUNCTION sc_set(counter text, key text, value bigint, at timestamptz DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    nodes integer := slotted_counter_proxy.node_count();
    hashes integer[];
    vals bigint[];
BEGIN
    PERFORM slotted_counter_proxy.write_cluster('sc_set()');
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.key_type = 'bigint' THEN
        RETURN @extschema@.sc_set(counter, key::bigint, value, at);
    END IF;
    IF c.durability = 'transactional' THEN
        PERFORM slotted_counter_proxy.check_autocommit(c.name);
    END IF;
    IF c.spread AND value IS NOT NULL THEN
        hashes := ARRAY(SELECT generate_series(0, nodes - 1));
        vals := ARRAY[value] || array_fill(0::bigint, ARRAY[nodes - 1]);
    ELSE
        hashes := ARRAY[hashtext(key COLLATE "C")];
        vals := ARRAY[value];
    END IF;
    RETURN (SELECT sum(o)::bigint
              FROM slotted_counter_proxy.node_set_text(counter, key, hashes, vals, at) AS o);
END
$$;

CREATE FUNCTION sc_sum(counter text, key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'sc_proxy_sum_text' LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION sc_sum(counter text, key text, since timestamptz, until timestamptz)
    RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT sum(v)::bigint
      FROM slotted_counter_proxy.node_sum_range_text(counter, key, since, until) AS v
$$;

CREATE FUNCTION sc_series(counter text, key text, since timestamptz, until timestamptz)
    RETURNS TABLE(bucket timestamptz, value bigint)
    LANGUAGE sql VOLATILE ROWS 24 AS $$
    SELECT s.bucket, sum(s.value)::bigint
      FROM slotted_counter_proxy.node_series_text(counter, key, since, until) AS s
     GROUP BY s.bucket ORDER BY s.bucket
$$;

-- As sc_sum_keys: one round per node with its keys, every key to every node for a spread counter.
CREATE FUNCTION sc_sum_keys_text(counter text, keys text[]) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
BEGIN
    PERFORM slotted_counter_proxy.check_elements('keys', keys);
    IF c.key_type = 'bigint' THEN
        RETURN @extschema@.sc_sum_keys(counter, keys::bigint[]);
    ELSIF cardinality(keys) = 0 THEN
        RETURN 0;
    ELSIF c.spread THEN
        RETURN (SELECT sum(v)::bigint
                  FROM slotted_counter_proxy.node_sum_keys_all_text(counter, keys) AS v);
    END IF;
    RETURN (SELECT sum(v)::bigint
              FROM slotted_counter_proxy.node_sum_keys_text(
                       counter, ARRAY(SELECT hashtext(k COLLATE "C") FROM unnest(keys) AS k),
                       keys) AS v);
END
$$;

-- sc_top with the keys as text, for a counter of either kind, merged as sc_top merges: a key
-- lives on one node (every node's share of it is sent for a spread counter). Ties go to the
-- smaller key (by number for a counter keyed by bigint, by bytes for one keyed by text) among
-- the rows the nodes sent.
CREATE FUNCTION sc_top_text(counter text, n bigint, since timestamptz DEFAULT NULL,
                            until timestamptz DEFAULT NULL)
    RETURNS TABLE(key text, value bigint)
    LANGUAGE plpgsql VOLATILE ROWS 10 SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
BEGIN
    IF n IS NULL THEN
        RAISE EXCEPTION 'n must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF n < 0 THEN
        RAISE EXCEPTION 'n must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT t.key, sum(t.value)::bigint
          FROM slotted_counter_proxy.node_top_text(counter,
                                                   CASE WHEN c.spread THEN 9223372036854775807
                                                        ELSE n END,
                                                   since, until) AS t
         GROUP BY t.key
         ORDER BY 2 DESC, CASE WHEN c.key_type = 'bigint' THEN t.key::bigint END,
                  t.key COLLATE "C"
         LIMIT n;
END
$$;

-- sc_rank with the key as text, in the same two rounds: the value from the key's home node, as the
-- text form of sc_sum finds it, then every node's count of its keys above it.
CREATE FUNCTION sc_rank(counter text, key text, since timestamptz DEFAULT NULL,
                        until timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c slotted_counter_proxy.counters := slotted_counter_proxy.counter_of(counter);
    own bigint;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF c.spread THEN
        PERFORM slotted_counter_proxy.spread_not_ranked(c.name);
    END IF;
    SELECT v INTO own
      FROM slotted_counter_proxy.node_sum_range_text(counter, key, since, until) AS v;
    RETURN 1 + (SELECT sum(a)::bigint
                  FROM slotted_counter_proxy.node_keys_above_text(counter, key, own, since, until)
                       AS a);
END
$$;

CREATE FUNCTION sc_drop_buckets(counter text, before timestamptz) RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT slotted_counter_proxy.write_cluster('sc_drop_buckets()');
    SELECT FROM slotted_counter_proxy.counter_of(counter);
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
