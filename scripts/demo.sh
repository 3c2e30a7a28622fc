#!/usr/bin/env bash
# demo.sh: the README's first command. On a fresh Debian 12 machine, as root or as a sudo user:
# installs the build dependencies and PostgreSQL (apt) when they are missing, builds
# slotted_counter, and installs it into a private copy of the PostgreSQL installation under
# ./demo (nothing is installed anywhere else), starts a throwaway server from that copy with the
# library preloaded, and runs one concurrent pgbench load twice, side by side: a hot-row UPDATE and
# a buffered sc_incr on one key. It prints the throughput of each and the final counts next to the
# transactions pgbench reports, then how to connect and how to stop. Running it again stops the
# previous demo server and starts afresh.
#
# Knobs (environment): PG_CONFIG (the PostgreSQL to use: /usr/lib/postgresql/15/bin/pg_config by
# default; one under /usr/lib/postgresql/NN is installed from apt when missing, any other must
# exist), CLIENTS (32), JOBS (2), DURATION (10 seconds), PORT (5433, or the next free one).
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
CLIENTS=${CLIENTS:-32}
JOBS=${JOBS:-2}
DURATION=${DURATION:-10}
DB=demo

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEMO=$ROOT/demo

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
    AS_ROOT=1
    RUN_AS=postgres
else
    command -v sudo >/dev/null || die "run as root, or as a user who may use sudo"
    SUDO=(sudo)
    AS_ROOT=0
    RUN_AS=$(id -un)
fi

# ---- 1. packages ---------------------------------------------------------------------------
# Only what is missing is asked of apt, so a second run does not need the network. A PG_CONFIG
# under /usr/lib/postgresql/NN is Debian's PostgreSQL NN (server, client with pgbench, headers).
packages=(build-essential)
if [[ $PG_CONFIG =~ ^/usr/lib/postgresql/([0-9]+)/bin/pg_config$ ]]; then
    packages+=("postgresql-${BASH_REMATCH[1]}" "postgresql-server-dev-${BASH_REMATCH[1]}")
elif [[ ! -x $PG_CONFIG ]]; then
    die "PG_CONFIG=$PG_CONFIG does not exist"
fi
missing=()
for pkg in "${packages[@]}"; do
    if [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
    say "installing ${missing[*]} (apt)"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
else
    say "PostgreSQL and the build tools are installed"
fi
[[ -x $PG_CONFIG ]] || die "no pg_config at $PG_CONFIG"

# ---- 2. where the demo lives ---------------------------------------------------------------
# The server user must be able to reach ./demo (a checkout under /root is not reachable by
# "postgres"), and a unix socket path is limited to 107 bytes: otherwise the demo lives in /tmp.
mkdir -p "$DEMO"
[[ $AS_ROOT -eq 1 ]] && chown postgres: "$DEMO"
RUN=$DEMO
if [[ $AS_ROOT -eq 1 ]] && ! runuser -u postgres -- test -w "$DEMO" -a -x "$DEMO" ||
        (( ${#DEMO} > 80 )); then
    RUN=/tmp/slotted_counter-demo-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
    mkdir -p "$RUN"
    [[ $AS_ROOT -eq 1 ]] && chown postgres: "$RUN"
    printf 'note: %s is not usable by the server user "%s" (or its path is too long for a socket);\n' \
        "$DEMO" "$RUN_AS"
    printf '      the demo lives in %s instead\n' "$RUN"
fi
# PostgreSQL refuses to run as root: as root, the server and its clients run as "postgres"
# (as_pg and the server's setup: scripts/pg_server.sh; PGBIN is set below, to the private copy's).
# shellcheck source=scripts/pg_server.sh
. "$ROOT/scripts/pg_server.sh"
if [[ -f $RUN/data/postmaster.pid ]]; then
    say "stopping the previous demo server"
    previous=$("$PG_CONFIG" --bindir)
    [[ -f $RUN/pgbin ]] && previous=$(cat "$RUN/pgbin")
    PGBIN=$previous server_stop "$RUN"
fi

# ---- 3. build, and install into a private copy of PostgreSQL --------------------------------
# PostgreSQL finds its share and library folders relative to its programs, so a copy of its
# programs, libraries and share folder, at the same paths under $PRIVATE, runs as a server of its
# own; the extension is installed into that copy (make install DESTDIR=...), not into the system.
say "building slotted_counter for $("$PG_CONFIG" --version)"
make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG"
PRIVATE=$RUN/pg
rm -rf "$PRIVATE"
for dir in bindir pkglibdir sharedir; do
    src=$("$PG_CONFIG" --$dir)
    mkdir -p "$PRIVATE$src"
    cp -a "$src/." "$PRIVATE$src/"
done
say "installing slotted_counter into the copy of PostgreSQL under $PRIVATE"
make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" DESTDIR="$PRIVATE" install
[[ $AS_ROOT -eq 1 ]] && chown -R postgres: "$RUN"
PGBIN=$PRIVATE$("$PG_CONFIG" --bindir)
[[ -x $PGBIN/postgres && -x $PGBIN/pgbench ]] || die "no postgres and pgbench under $PGBIN"
echo "$PGBIN" >"$RUN/pgbin"

# ---- 4. a throwaway server -------------------------------------------------------------------
DATA=$RUN/data
cd "$RUN"   # the server user must be able to stat its working directory

rm -rf "$DATA" "$RUN/server.log" "$RUN/pgbench"

port_in_use() {
    [[ -e $RUN/.s.PGSQL.$1.lock ]] && return 0
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
PORT=${PORT:-5433}
while port_in_use "$PORT"; do PORT=$((PORT + 1)); done

say "starting a throwaway server: data in $DATA, port $PORT, socket in $RUN"
server_init "$RUN" "port = $PORT" "listen_addresses = 'localhost'" \
    "max_connections = $((CLIENTS + 20))" || die "initdb failed"
server_start "$RUN" || die "the server did not start; its log is $RUN/server.log"

# No psql step of the demo should take long; a bounded wait turns a hang into an error.
PSQL=(as_pg env PGOPTIONS="-c statement_timeout=120s" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$RUN" -p "$PORT" -U postgres)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" >/dev/null <<'SQL'
CREATE EXTENSION slotted_counter;
CREATE TABLE hot (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO hot VALUES (1, 0);
SELECT sc_create('hits', 'buffered');
SQL
q() { "${PSQL[@]}" -d "$DB" -At -c "$1"; }

# ---- 5. the same load, twice ---------------------------------------------------------------
mkdir -p "$RUN/pgbench"
echo 'UPDATE hot SET n = n + 1 WHERE id = 1;' >"$RUN/pgbench/update.sql"
echo "SELECT sc_incr('hits', 0, 1);" >"$RUN/pgbench/sc_incr.sql"
chmod -R a+rX "$RUN/pgbench"

# run_load NAME: pgbench with one script; leaves its output in $RUN/pgbench/NAME.out
run_load() {
    local out=$RUN/pgbench/$1.out
    if ! as_pg "$PGBIN/pgbench" -n -h "$RUN" -p "$PORT" -U postgres -c "$CLIENTS" -j "$JOBS" \
            -T "$DURATION" -M prepared -f "$RUN/pgbench/$1.sql" "$DB" >"$out" 2>&1; then
        cat "$out" >&2
        die "pgbench $1 failed"
    fi
}
field() { sed -n "s/^$2//p" "$RUN/pgbench/$1.out" | awk '{print $1}' | head -n 1; }
group() { awk '{ n = sprintf("%.0f", $1); s = ""
                 while (length(n) > 3) { s = "," substr(n, length(n) - 2) s; n = substr(n, 1, length(n) - 3) }
                 print n s }' <<<"$1"; }

LOAD="pgbench -c $CLIENTS -j $JOBS -T $DURATION -M prepared"
say "hot-row UPDATE hot SET n = n + 1 WHERE id = 1   ($LOAD)"
run_load update
say "SELECT sc_incr('hits', 0, 1)                    ($LOAD)"
run_load sc_incr

upd_tps=$(field update 'tps = ')
upd_tx=$(field update 'number of transactions actually processed: ')
upd_failed=$(field update 'number of failed transactions: ')
inc_tps=$(field sc_incr 'tps = ')
inc_tx=$(field sc_incr 'number of transactions actually processed: ')
inc_failed=$(field sc_incr 'number of failed transactions: ')
row_n=$(q 'SELECT n FROM hot WHERE id = 1')
sc_sum=$(q "SELECT sc_sum('hits', 0)")
verdict() { [[ $1 == "$2" ]] && echo "yes, exactly" || echo "NO"; }
speedup=$(awk -v a="$inc_tps" -v b="$upd_tps" 'BEGIN { printf "%.1f", a / b }')

say "results ($CLIENTS clients, $DURATION s each, same server)"
printf '\n  %-34s %22s %22s\n' "" "hot-row UPDATE" "sc_incr (buffered)"
printf '  %-34s %22s %22s\n' "throughput (transactions/s)" "$(group "$upd_tps")" "$(group "$inc_tps")"
printf '  %-34s %22s %22s\n' "transactions pgbench reports" "$(group "$upd_tx")" "$(group "$inc_tx")"
printf '  %-34s %22s %22s\n' "failed transactions" "${upd_failed:-0}" "${inc_failed:-0}"
printf '  %-34s %22s %22s\n' "final count (row's n / sc_sum)" "$(group "$row_n")" "$(group "$sc_sum")"
printf '  %-34s %22s %22s\n' "count = transactions?" "$(verdict "$row_n" "$upd_tx")" "$(verdict "$sc_sum" "$inc_tx")"
printf '\n  sc_incr ran %s times the UPDATE throughput, without a row lock.\n' "$speedup"

# The lagged values: sc_rollup() flushes the buffer to slotted_counter.key_values now (the
# background worker does the same every slotted_counter.flush_interval).
say "SELECT sc_rollup(); then the lagged value in slotted_counter.key_values and the buffer's stats"
"${PSQL[@]}" -d "$DB" <<'SQL'
SELECT sc_rollup() AS rows_written;
SELECT c.name, t.key, t.value, t.updated_at
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name = 'hits';
\x on
SELECT * FROM slotted_counter.stats WHERE datname = current_database();
SQL

# ---- 6. what next --------------------------------------------------------------------------
if [[ $AS_ROOT -eq 1 ]]; then STOP_AS="runuser -u postgres -- "; else STOP_AS=""; fi
rm_target=$DEMO
[[ $RUN != "$DEMO" ]] && rm_target="$DEMO $RUN"
cat <<EOF

==> the demo server is still running
  connect:  $PGBIN/psql -h $RUN -p $PORT -U postgres $DB
            (try: SELECT sc_incr('hits'); SELECT sc_sum('hits'); SELECT * FROM slotted_counter.stats;)
  stop:     ${STOP_AS}$PGBIN/pg_ctl -D $DATA stop && rm -rf $rm_target
  log:      $RUN/server.log
EOF
