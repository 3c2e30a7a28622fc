#!/usr/bin/env bash
# Runs slotted_counter through the client stacks applications reach it with: psycopg 3,
# node-postgres, PgJDBC, asyncpg, pgx, psycopg2, SQLAlchemy (on psycopg2 and on asyncpg), Django,
# postgres.js, ruby-pg and ActiveRecord, each called as docs/guides/drivers.md shows it, and
# psycopg behind pgbouncer in transaction pooling mode; and Prometheus' postgres_exporter with
# contrib/prometheus/queries.yaml. Each against a database of its own on a throwaway PostgreSQL
# 15 server with the library preloaded.
# Every check prints "ok STACK: WHAT" or "not ok STACK: WHAT: WHY"; the last line is
# "clients: N passed, M failed", and the exit status is non-zero if any check failed.
# Needs the packages test/run.sh installs, and the npm registry until node-postgres is installed
# in node/node_modules. Run as root (the server then runs as postgres) or as any other user.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# Debian's python3-psycopg serves the system interpreter, which need not be the first on PATH.
python=/usr/bin/python3
jdbc_jar=/usr/share/java/postgresql.jar
export PATH=$PGBIN:$PATH

# PostgreSQL refuses to run as root, and pgbouncer runs as the server's user beside it (as_pg).
# shellcheck source=scripts/pg_server.sh
. "$here/../../scripts/pg_server.sh"

tmp=$(mktemp -d /tmp/slotted_counter_clients.XXXXXX)
cleanup() {
  if [ -f "$tmp/pgbouncer.pid" ]; then kill "$(cat "$tmp/pgbouncer.pid")" 2>/dev/null || true; fi
  server_stop "$tmp" immediate
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- the server: unix socket in $tmp for the administration and pgbouncer, loopback TCP for the
# drivers that speak only TCP. Four stacks with 20 connections each, pgbouncer's two pools of 20,
# and the flushers of five databases must fit.
pg_port=$(free_port)
server_init "$tmp" "listen_addresses = '127.0.0.1'" "port = $pg_port" "max_connections = 150" \
  "max_worker_processes = 16" "fsync = off"
server_start "$tmp"
admin() { as_pg psql -h "$tmp" -p "$pg_port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
for db in psycopg node_postgres pgjdbc pgbouncer_simple pgbouncer_extended asyncpg pgx orms \
          postgresjs ruby pgbouncer_asyncpg pgbouncer_pgx exporter; do
  admin -d postgres -c "CREATE DATABASE $db"
  admin -d "$db" -c "CREATE EXTENSION slotted_counter"
done
# The router and its two data nodes, for the router behind pgbouncer: the router reaches its nodes
# on the server's socket directly (its own statements are prepared per connection, which
# pgbouncer's transaction pooling would not keep), its clients come through pgbouncer.
for db in bouncer_node1 bouncer_node2; do
  admin -d postgres -c "CREATE DATABASE $db"
  admin -d "$db" -c "CREATE EXTENSION slotted_counter"
done
admin -d postgres -c "CREATE DATABASE bouncer_router"
admin -d bouncer_router -c "CREATE EXTENSION slotted_counter_proxy CASCADE" \
  -c "SELECT sc_proxy_configure(ARRAY['host=$tmp port=$pg_port dbname=bouncer_node1',
                                      'host=$tmp port=$pg_port dbname=bouncer_node2'])"

# --- pgbouncer in transaction pooling mode, in front of the server's unix socket.
bouncer_port=$(free_port)
echo '"postgres" ""' >"$tmp/userlist.txt"
cat >"$tmp/pgbouncer.ini" <<EOF
[databases]
* = host=$tmp port=$pg_port
; Fewer server sessions than clients: consecutive transactions of a client change sessions.
bouncer_router = host=$tmp port=$pg_port pool_size=4
bouncer_node1 = host=$tmp port=$pg_port pool_size=4
pgbouncer_asyncpg = host=$tmp port=$pg_port pool_size=4
pgbouncer_pgx = host=$tmp port=$pg_port pool_size=4
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $tmp/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 100
logfile = $tmp/pgbouncer.log
pidfile = $tmp/pgbouncer.pid
EOF
[ "$(id -u)" -eq 0 ] && chown postgres "$tmp/pgbouncer.ini" "$tmp/userlist.txt"
as_pg pgbouncer -d -q "$tmp/pgbouncer.ini"
bouncer_up=no
for _ in $(seq 50); do
  if psql -h 127.0.0.1 -p "$bouncer_port" -U postgres -d pgbouncer_simple -X -Atqc 'SELECT 1' \
       >/dev/null 2>&1; then bouncer_up=yes; break; fi
  sleep 0.2
done

export PGUSER=postgres
# The tree may belong to another user than the one running the suite.
export PYTHONDONTWRITEBYTECODE=1

passed=0
failed=0
# stack NAME COMMAND...: runs one client program (bounded in time) and counts its checks. A
# program that dies, or ends without a check, counts as a failure too.
stack() {
  local name=$1; shift
  echo "=== $name"
  local rc=0
  timeout 180 "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  cat "$tmp/$name.out"
  local ok bad
  ok=$(grep -c '^ok ' "$tmp/$name.out" || true)
  bad=$(grep -c '^not ok ' "$tmp/$name.out" || true)
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    echo "not ok $name: exited with status $rc"; bad=1
  elif [ "$ok" -eq 0 ] && [ "$bad" -eq 0 ]; then
    echo "not ok $name: ran no check"; bad=1
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
}
setup_failed() { echo "not ok $1: $2"; failed=$((failed + 1)); }

PGHOST=$tmp PGPORT=$pg_port PGDATABASE=psycopg \
  stack psycopg "$python" -u "$here/python/psycopg_test.py"

PGHOST=$tmp PGPORT=$pg_port PGDATABASE=asyncpg stack asyncpg "$python" -u "$here/python/asyncpg_test.py"
PGHOST=$tmp PGPORT=$pg_port PGDATABASE=orms stack orms "$python" -u "$here/python/orm_test.py"

if (cd "$here/node" && { { [ -d node_modules/pg ] && [ -d node_modules/postgres ]; } ||
                         npm install --no-audit --no-fund --loglevel=error; }) \
     >"$tmp/npm.log" 2>&1; then
  PGHOST=127.0.0.1 PGPORT=$pg_port PGDATABASE=node_postgres \
    stack node-postgres node "$here/node/test.js"
  PGHOST=127.0.0.1 PGPORT=$pg_port PGDATABASE=postgresjs \
    stack postgres.js node "$here/node/postgresjs.js"
else
  cat "$tmp/npm.log"; setup_failed node-postgres "npm install failed"
fi

# pgx from Debian's Go sources (golang-github-jackc-pgx-v4-dev), built in GOPATH mode, so that
# nothing is downloaded (about 10 s on 2 cores).
if (cd "$here/go" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$tmp/go-build \
      go build -o "$tmp/pgx_test" .) >"$tmp/go.log" 2>&1; then
  PGHOST=$tmp PGPORT=$pg_port PGDATABASE=pgx stack pgx "$tmp/pgx_test"
else
  cat "$tmp/go.log"; setup_failed pgx "go build failed"
fi

PGHOST=$tmp PGPORT=$pg_port PGDATABASE=ruby stack ruby ruby "$here/ruby/test.rb"

# Debian's prometheus-postgres-exporter with contrib/prometheus/queries.yaml, on a loopback port.
PGHOST=$tmp PGPORT=$pg_port PGDATABASE=exporter \
  stack postgres_exporter "$python" -u "$here/python/exporter_test.py" \
  /usr/bin/prometheus-postgres-exporter

mkdir "$tmp/classes"
if javac -d "$tmp/classes" -cp "$jdbc_jar" "$here/java/ClientTest.java" >"$tmp/javac.log" 2>&1; then
  PGHOST=127.0.0.1 PGPORT=$pg_port PGDATABASE=pgjdbc \
    stack pgjdbc java -cp "$tmp/classes:$jdbc_jar" ClientTest
else
  cat "$tmp/javac.log"; setup_failed pgjdbc "javac failed"
fi

if [ "$bouncer_up" = yes ]; then
  PGHOST=127.0.0.1 PGPORT=$bouncer_port \
    stack pgbouncer "$python" -u "$here/python/pgbouncer_test.py"
  PGHOST=127.0.0.1 PGPORT=$bouncer_port \
    stack pgbouncer-router "$python" -u "$here/python/pgbouncer_router_test.py"
  PGHOST=127.0.0.1 PGPORT=$bouncer_port PGDATABASE=pgbouncer_asyncpg \
    stack pgbouncer-asyncpg "$python" -u "$here/python/asyncpg_test.py" --pgbouncer
  if [ -x "$tmp/pgx_test" ]; then
    PGHOST=127.0.0.1 PGPORT=$bouncer_port PGDATABASE=pgbouncer_pgx \
      stack pgbouncer-pgx "$tmp/pgx_test" --pgbouncer
  fi
else
  cat "$tmp/pgbouncer.log" 2>/dev/null || true; setup_failed pgbouncer "pgbouncer did not start"
fi

echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
