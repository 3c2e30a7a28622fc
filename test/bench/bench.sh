#!/usr/bin/env bash
# bench.sh: throughput of slotted_counter against baselines from the same run on the same server:
# buffered sc_incr against SELECT 1 and a hot-row UPDATE, transactional sc_incr against an
# append-only INSERT and the hot-row UPDATE.
#
# Starts its own throwaway server (data in a temp dir, unix socket only, the library preloaded),
# runs each workload of workloads/ under pgbench at each client count, and prints a Markdown table
# of tps and ratios. Absolute numbers on shared machines drift by 30%, so only the ratios mean
# anything; nothing here asserts a time. The one check is exactness: after the runs, sc_sum must
# equal the number of sc_incr transactions pgbench reports (exit status 1 otherwise).
#
# Usage: test/bench/bench.sh [--install]      (--install: make install first, with sudo if needed)
# Environment: DURATION (10 s per run), CLIENTS ("8 32 64"), JOBS (2),
#              SYNCHRONOUS_COMMIT (on), OUT (test/bench/out: table and raw pgbench output).
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-8 32 64}
JOBS=${JOBS:-2}
SYNCHRONOUS_COMMIT=${SYNCHRONOUS_COMMIT:-on}
PORT=5432            # only names the socket in our private directory; no TCP
DB=bench

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)
OUT=${OUT:-$BENCH/out}

die() { printf 'bench.sh: %s\n' "$*" >&2; exit 1; }

install=0
for arg in "$@"; do
    case $arg in
        --install) install=1 ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument \"$arg\" (try --help)" ;;
    esac
done

# PostgreSQL refuses to run as root: as root, the server and pgbench run as "postgres".
if [[ $(id -u) -eq 0 ]]; then
    SUDO=(); AS_ROOT=1
    as_pg() { runuser -u postgres -- "$@"; }
else
    SUDO=(sudo); AS_ROOT=0
    as_pg() { "$@"; }
fi

if [[ $install -eq 1 ]]; then
    make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG"
    "${SUDO[@]}" make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" install
fi
[[ -f $("$PG_CONFIG" --pkglibdir)/slotted_counter.so ]] ||
    die "slotted_counter is not installed; run: make && sudo make install (or pass --install)"

# name | label in the table | script
WORKLOADS=(
    "select1|SELECT 1|select1.sql"
    "update|hot-row UPDATE|update_hot.sql"
    "incr|buffered sc_incr|sc_incr_buffered.sql"
    "insert|append-only INSERT|insert_append.sql"
    "txincr|transactional sc_incr|sc_incr_transactional.sql"
)

max_clients=0
for c in $CLIENTS; do
    [[ $c =~ ^[1-9][0-9]*$ ]] || die "CLIENTS must be positive integers, not \"$c\""
    (( c > max_clients )) && max_clients=$c
done

# ---- the throwaway server -------------------------------------------------------------------
TMP=$(mktemp -d /tmp/sc-bench.XXXXXX)
DATA=$TMP/data
started=0
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    local status=$?
    if [[ $started -eq 1 ]]; then
        as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
    fi
    if [[ $status -ne 0 && -f $TMP/server.log ]]; then
        echo "--- last lines of the server log ---" >&2
        tail -n 20 "$TMP/server.log" >&2
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$BENCH"/setup.sql "$BENCH"/workloads/*.sql "$TMP"/
chmod -R a+rX "$TMP"
[[ $AS_ROOT -eq 1 ]] && chown -R postgres: "$TMP"
cd "$TMP"   # the server user must be able to stat its working directory

as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$TMP/initdb.log" 2>&1 ||
    { cat "$TMP/initdb.log" >&2; die "initdb failed"; }
cat >>"$DATA/postgresql.conf" <<EOF

# slotted_counter benchmark
port = $PORT
listen_addresses = ''
unix_socket_directories = '$TMP'
shared_preload_libraries = 'slotted_counter'
synchronous_commit = $SYNCHRONOUS_COMMIT
max_connections = $((max_clients + 10))
EOF
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$TMP/server.log" -w -t 60 start >/dev/null || die "the server did not start"
started=1

PSQL=(as_pg env PGOPTIONS="-c statement_timeout=120s" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$TMP" -p "$PORT" -U postgres)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" -f "$TMP/setup.sql" >/dev/null
q() { "${PSQL[@]}" -d "$DB" -At -c "$1"; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
RAW=$OUT/$stamp
mkdir -p "$RAW"

# ---- the runs -------------------------------------------------------------------------------
declare -A TPS
failed=0
incr_tx_total=0
update_tx_total=0
txincr_tx_total=0
for c in $CLIENTS; do
    j=$(( JOBS < c ? JOBS : c ))
    for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r name label script <<<"$w"
        raw=$RAW/$name-c$c.out
        printf 'bench: %-18s %3d clients, %s s ... ' "$label" "$c" "$DURATION" >&2
        q 'CHECKPOINT' >/dev/null
        if as_pg "$PGBIN/pgbench" -n -h "$TMP" -p "$PORT" -U postgres -c "$c" -j "$j" -T "$DURATION" \
                -M prepared -f "$TMP/$script" "$DB" >"$raw" 2>&1; then
            TPS[$name,$c]=$(awk '/^tps = /{ printf "%.0f", $3; exit }' "$raw")
            printf '%s tps\n' "${TPS[$name,$c]}" >&2
        else
            TPS[$name,$c]=error
            failed=1
            printf 'FAILED (%s)\n' "$raw" >&2
            grep -m 3 -E 'ERROR|FATAL|aborted' "$raw" >&2 || true
        fi
        # pgbench reports what it completed even when a client aborted
        tx=$(awk -F': ' '/^number of transactions actually processed/{ print $2 + 0; exit }' "$raw")
        tx=${tx:-0}
        [[ $name == incr ]] && incr_tx_total=$((incr_tx_total + tx))
        [[ $name == update ]] && update_tx_total=$((update_tx_total + tx))
        [[ $name == txincr ]] && txincr_tx_total=$((txincr_tx_total + tx))
    done
done

ratio() {
    [[ $1 =~ ^[0-9]+$ && $2 =~ ^[1-9][0-9]*$ ]] || { echo "-"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

# ---- the table ------------------------------------------------------------------------------
report() {
    echo "### slotted_counter benchmark, $stamp"
    echo
    echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), $(nproc) CPUs," \
         "pgbench -M prepared -j $JOBS -T $DURATION, synchronous_commit = $SYNCHRONOUS_COMMIT, one hot key."
    echo
    echo "| clients | SELECT 1 tps | hot-row UPDATE tps | buffered sc_incr tps | sc_incr / SELECT 1 | sc_incr / UPDATE |"
    echo "|--------:|-------------:|-------------------:|---------------------:|-------------------:|-----------------:|"
    for c in $CLIENTS; do
        printf '| %s | %s | %s | %s | %s | %s |\n' "$c" \
            "${TPS[select1,$c]}" "${TPS[update,$c]}" "${TPS[incr,$c]}" \
            "$(ratio "${TPS[incr,$c]}" "${TPS[select1,$c]}")" "$(ratio "${TPS[incr,$c]}" "${TPS[update,$c]}")"
    done
    echo
    echo "| clients | append-only INSERT tps | hot-row UPDATE tps | transactional sc_incr tps | sc_incr / INSERT | sc_incr / UPDATE |"
    echo "|--------:|-----------------------:|-------------------:|--------------------------:|-----------------:|-----------------:|"
    for c in $CLIENTS; do
        printf '| %s | %s | %s | %s | %s | %s |\n' "$c" \
            "${TPS[insert,$c]}" "${TPS[update,$c]}" "${TPS[txincr,$c]}" \
            "$(ratio "${TPS[txincr,$c]}" "${TPS[insert,$c]}")" "$(ratio "${TPS[txincr,$c]}" "${TPS[update,$c]}")"
    done
}
echo >&2
report | tee "$OUT/bench-$stamp.md"

# ---- exactness ------------------------------------------------------------------------------
sum=$(q "SELECT sc_sum('hot', 0)") || sum=error
txsum=$(q "SELECT sc_sum('hot_tx', 0)") || txsum=error
n=$(q 'SELECT n FROM hot WHERE id = 1') || n=error
echo
echo "sc_sum('hot', 0) = $sum; sc_incr transactions pgbench reports = $incr_tx_total;" \
     "hot row n = $n; UPDATE transactions = $update_tx_total."
echo "raw pgbench output: $RAW"
echo "sc_sum('hot_tx', 0) = $txsum; transactional sc_incr transactions pgbench reports = $txincr_tx_total."
if [[ $sum != "$incr_tx_total" || $n != "$update_tx_total" || $txsum != "$txincr_tx_total" ]]; then
    echo "bench.sh: counts do not match the transactions pgbench reports" >&2
    failed=1
fi
exit "$failed"
