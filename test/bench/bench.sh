#!/usr/bin/env bash
# bench.sh: throughput of slotted_counter against baselines run in the same invocation on the same
# server (SPEC section 6), plus single-backend cost, flush time and shared memory per value.
#
# Starts its own throwaway server (data in a temp dir, unix socket only, the library preloaded)
# and, when redis-server is installed, a private Redis (unix socket, no persistence). Runs every
# workload of workloads/ under pgbench (-M prepared) at each client count, Redis INCR under
# redis-benchmark, then the single-backend and flush measurements. Prints Markdown tables of
# throughput and ratios, draws a chart with gnuplot when it is installed, and writes everything
# (tables, chart, raw output, machine description, server log) to OUT. Absolute numbers on shared
# machines drift by 30%, so only the ratios mean much; nothing here asserts a time. The checks are
# exactness: every counter must equal the increments pgbench (or redis-benchmark) reports as
# committed, else the exit status is 1 (also when a run fails). See test/bench/README.md.
#
# Usage: test/bench/bench.sh [--install] [--quick]
#   --install  make and make install first (with sudo when not root)
#   --quick    smoke test: CLIENTS=8 DURATION=2 FLUSH_KEYS=100000 BIGTXN_KEYS=100000
#              INPROC_N=200000 INPROC_REPS=3
#              (each still overridable from the environment)
# Environment: PGBIN (/usr/lib/postgresql/15/bin: the server to measure), DURATION (10 s per
#   point), CLIENTS ("1 8 32 64"), JOBS (2), SYNCHRONOUS_COMMIT (on),
#   ONLY (names of workloads and sections to run, default all; see --list), MAX_ENTRIES (2000000),
#   BATCH (1000 keys per batch call), FLUSH_KEYS (1000000), BIGTXN_KEYS (1000000: the keys of the
#   bigtxn section), INPROC_N (1000000), INPROC_REPS (5),
#   REDIS (auto | no), FLUSH_INTERVAL (1000 ms: slotted_counter.flush_interval of the throughput
#   runs), HUGE_PAGES (try: the server's huge_pages; the machine's huge pages are reported, since
#   without them every new backend faults in each page of shared memory it touches, which the short
#   runs of many-key workloads pay again and again), STORED_KEYS_FILTER (16MB: the setting
#   slotted_counter.stored_keys_filter; the run's tables hold millions of keys; 0 for none),
#   OUT (test/bench/out/<UTC timestamp>).
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PG_CONFIG=$PGBIN/pg_config
PORT=5432            # only names the socket in our private directory; no TCP
DB=bench

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)

die() { printf 'bench.sh: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench: %s\n' "$*" >&2; }

# The TPC-B-like runs change balances by random deltas: what must hold is that the balances (rows,
# or counters) moved by exactly the deltas of the history rows of the same run, so these return
# the difference, which must be 0 (0 increments per transaction).
TPCB_CHECK_STOCK="SELECT abs((SELECT sum(bbalance) FROM pgbench_branches) - h.s) + abs((SELECT sum(tbalance) FROM pgbench_tellers) - h.s) FROM (SELECT coalesce(sum(delta), 0) AS s FROM pgbench_history WHERE filler = 's') h"
TPCB_CHECK_COUNTERS="SELECT abs(sc_sum('tpcb_branches', 1) - h.s) + abs(sc_sum_keys('tpcb_tellers', ARRAY(SELECT generate_series(1, 10)::bigint)) - h.s) FROM (SELECT coalesce(sum(delta), 0) AS s FROM pgbench_history WHERE filler = 'c') h"

# name | label | pgbench script or "redis" | PGOPTIONS | increments per transaction | SQL that must
# return the sum of those increments (workloads with the same check SQL add up)
ALL_WORKLOADS=(
    "select1|SELECT 1|select1.sql|||"
    "select_uniform|SELECT of a random key of 10,000 (uniform)|select_uniform.sql|||"
    "select_zipf|SELECT of a random key of 1,000,000 (zipfian 1.1)|select_zipf.sql|||"
    "update|hot-row UPDATE, synchronous_commit on|update_hot.sql|-c synchronous_commit=on|1|SELECT n FROM hot WHERE id = 1"
    "update_async|hot-row UPDATE, synchronous_commit off|update_hot.sql|-c synchronous_commit=off|1|SELECT n FROM hot WHERE id = 1"
    "slots|100-slot upsert (seed pattern)|slots_upsert.sql||1|SELECT coalesce(sum(n), 0) FROM slots"
    "insert|append-only INSERT|insert_append.sql||1|SELECT count(*) FROM events"
    "redis|Redis INCR (redis-benchmark)|redis|||"
    "incr|buffered sc_incr, one hot key|sc_incr_buffered.sql||1|SELECT sc_sum('hot', 0)"
    "txincr|transactional sc_incr, one hot key|sc_incr_transactional.sql||1|SELECT sc_sum('hot_tx', 0)"
    "incr_uniform|buffered sc_incr, 10,000 keys uniform|sc_incr_buffered_uniform.sql||1|SELECT sc_sum_keys('uniform', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "txincr_uniform|transactional sc_incr, 10,000 keys uniform|sc_incr_transactional_uniform.sql||1|SELECT sc_sum_keys('uniform_tx', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "incr_uniform_text|buffered sc_incr, 10,000 text keys uniform (/p/1 .. /p/10000)|sc_incr_buffered_uniform_text.sql||1|SELECT sc_sum_keys_text('uniform_text', ARRAY(SELECT concat('/p/', generate_series(1, 10000))))"
    "txincr_uniform_text|transactional sc_incr, 10,000 text keys uniform (/p/1 .. /p/10000)|sc_incr_transactional_uniform_text.sql||1|SELECT sc_sum_keys_text('uniform_text_tx', ARRAY(SELECT concat('/p/', generate_series(1, 10000))))"
    "incr_uniform_untyped|buffered sc_incr, 10,000 keys uniform, the key an untyped placeholder|sc_incr_buffered_uniform_untyped.sql||1|SELECT sc_sum_keys('uniform_untyped', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "incr_zipf|buffered sc_incr, 1,000,000 keys zipfian 1.1|sc_incr_buffered_zipf.sql||1|SELECT sc_sum_keys('zipf', ARRAY(SELECT generate_series(1, 1000000)::bigint))"
    "txincr_zipf|transactional sc_incr, 1,000,000 keys zipfian 1.1|sc_incr_transactional_zipf.sql||1|SELECT (SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values WHERE counter = 'zipf_tx'::slotted_counter::integer) + (SELECT coalesce(sum(delta), 0) FROM slotted_counter.deltas WHERE counter = 'zipf_tx'::slotted_counter::integer)"
    "incr_bounded|buffered sc_incr_bounded, 10,000 keys uniform, bound not reached|sc_incr_bounded_uniform.sql||1|SELECT sc_sum_keys('bounded', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "txincr_bounded|transactional sc_incr_bounded, 10,000 keys uniform, bound not reached|sc_incr_bounded_transactional_uniform.sql||1|SELECT sc_sum_keys('bounded_tx', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "incr_once|buffered sc_incr_once, 10,000 keys uniform, a new request id per call|sc_incr_once_uniform.sql||1|SELECT sc_sum_keys('once', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "txincr_once|transactional sc_incr_once, 10,000 keys uniform, a new request id per call|sc_incr_once_transactional_uniform.sql||1|SELECT sc_sum_keys('once_tx', ARRAY(SELECT generate_series(1, 10000)::bigint))"
    "incr_fresh|buffered sc_incr, a new key per call (random of 1e9)|sc_incr_fresh.sql|||"
    "throttle|buffered sc_throttle, one hot key, every call admitted (in the select list)|sc_throttle_buffered.sql|||"
    "throttle_from|buffered sc_throttle, one hot key, every call admitted (in FROM, every column)|sc_throttle_buffered_from.sql|||"
    "txthrottle|transactional sc_throttle, one hot key, every call admitted|sc_throttle_transactional.sql|||"
    "add|buffered sc_add, one hot key, a random element of 1e9 per call|sc_add_buffered.sql|||"
    "txadd|transactional sc_add, one hot key, a random element of 1e9 per call|sc_add_transactional.sql|||"
    "incr_fresh_retained|buffered sc_incr, a new key per call, retain 2 seconds|sc_incr_fresh_retained.sql|||"
    "incr_fresh_text|buffered sc_incr, a new text key per call (its id given by the session)|sc_incr_fresh_text.sql|||"
    "tpcb|pgbench tpcb-like (stock, scale 1)|tpcb.sql||0|$TPCB_CHECK_STOCK"
    "tpcb_counters|tpcb-like, teller and branch as transactional counters|tpcb_counters.sql||0|$TPCB_CHECK_COUNTERS"
    "tpcb_counters_one|tpcb-like, the two counters incremented by one statement|tpcb_counters_one.sql||0|$TPCB_CHECK_COUNTERS"
    "tpcb_without|tpcb-like without the teller and branch writes|tpcb_without.sql|||"
    "tpcb_statements|tpcb-like with two empty statements in place of those writes|tpcb_statements.sql|||"
    "sum_mix|buffered hot key, sc_incr and sc_sum alternating (calls/s)|sum_mix.sql||1|SELECT sc_sum('mix', 0)"
    "sum_1m|sc_sum of a random key of 1,000,000 (buffered, flushed)|sc_sum_1m.sql|||"
    "rank_1m|sc_rank of a random key of 1,000,000 (buffered, flushed)|sc_rank_1m.sql|||"
    "total_1m|sc_total of a counter of 1,000,000 keys (buffered, flushed)|sc_total_1m.sql|||"
    "batch|batch sc_incr, buffered, BATCH keys per call|batch_buffered.sql||BATCH|SELECT sc_sum_keys('batch', ARRAY(SELECT generate_series(1, BATCH)::bigint))"
    "txbatch|batch sc_incr, transactional, BATCH keys per call|batch_transactional.sql||BATCH|SELECT sc_sum_keys('batch_tx', ARRAY(SELECT generate_series(1, BATCH)::bigint))"
)
SECTIONS=(inproc flush bigtxn shmem)

install=0 quick=0
for arg in "$@"; do
    case $arg in
        --install) install=1 ;;
        --quick) quick=1 ;;
        --list)
            for w in "${ALL_WORKLOADS[@]}"; do IFS='|' read -r n l _ <<<"$w"; printf '%-18s %s\n' "$n" "$l"; done
            printf '%-18s %s\n' inproc "one backend: ns per sc_incr / sc_sum" flush "time of sc_rollup() by dirty and resident keys" \
                bigtxn "one transaction of 1,000,000 keys against an INSERT of as many rows" \
                shmem "shared memory per counter value"
            exit 0 ;;
        -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; echo "  --list     the workload and section names ONLY accepts"; exit 0 ;;
        *) die "unknown argument \"$arg\" (try --help)" ;;
    esac
done

if [[ $quick -eq 1 ]]; then
    DURATION=${DURATION:-2} CLIENTS=${CLIENTS:-8} FLUSH_KEYS=${FLUSH_KEYS:-100000}
    BIGTXN_KEYS=${BIGTXN_KEYS:-100000}
    INPROC_N=${INPROC_N:-200000} INPROC_REPS=${INPROC_REPS:-3}
fi
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-1 8 32 64}
JOBS=${JOBS:-2}
SYNCHRONOUS_COMMIT=${SYNCHRONOUS_COMMIT:-on}
ONLY=${ONLY:-}
MAX_ENTRIES=${MAX_ENTRIES:-2000000}
BATCH=${BATCH:-1000}
FLUSH_KEYS=${FLUSH_KEYS:-1000000}
BIGTXN_KEYS=${BIGTXN_KEYS:-1000000}
INPROC_N=${INPROC_N:-1000000}
INPROC_REPS=${INPROC_REPS:-5}
REDIS=${REDIS:-auto}
FLUSH_INTERVAL=${FLUSH_INTERVAL:-1000}
HUGE_PAGES=${HUGE_PAGES:-try}
STORED_KEYS_FILTER=${STORED_KEYS_FILTER:-16MB}

isint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
for v in DURATION JOBS MAX_ENTRIES BATCH FLUSH_KEYS INPROC_N INPROC_REPS FLUSH_INTERVAL; do
    isint "${!v}" || die "$v must be a positive integer, not \"${!v}\""
done
max_clients=0
for c in $CLIENTS; do
    isint "$c" || die "CLIENTS must be positive integers, not \"$c\""
    (( c > max_clients )) && max_clients=$c
done
(( max_clients > 0 )) || die "CLIENTS is empty"
(( FLUSH_KEYS >= 10 )) || die "FLUSH_KEYS must be at least 10"
(( FLUSH_KEYS + FLUSH_KEYS / 10 <= MAX_ENTRIES )) || die "MAX_ENTRIES must hold FLUSH_KEYS * 1.1 entries"

# ONLY: names of workloads and sections; unknown names are an error
declare -A WANT=()
if [[ -n $ONLY ]]; then
    known=" ${SECTIONS[*]} "
    for w in "${ALL_WORKLOADS[@]}"; do known+="${w%%|*} "; done
    for n in $ONLY; do
        [[ $known == *" $n "* ]] || die "ONLY: unknown name \"$n\" (try --list)"
        WANT[$n]=1
    done
fi
wanted() { [[ -z $ONLY || -n ${WANT[$1]:-} ]]; }

# PostgreSQL refuses to run as root: as root, the server and pgbench run as "postgres" (as_pg).
# shellcheck source=scripts/pg_server.sh
. "$ROOT/scripts/pg_server.sh"
if [[ $(id -u) -eq 0 ]]; then SUDO=(); AS_ROOT=1; else SUDO=(sudo); AS_ROOT=0; fi

if [[ $install -eq 1 ]]; then
    make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG"
    "${SUDO[@]}" make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" install
fi
[[ -f $("$PG_CONFIG" --pkglibdir)/slotted_counter.so ]] ||
    die "slotted_counter is not installed; run: make && sudo make install (or pass --install)"

have_redis=0
if [[ $REDIS != no ]] && wanted redis && command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null &&
        command -v redis-cli >/dev/null; then
    have_redis=1
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$BENCH/out/$stamp}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)

# ---- the machine ----------------------------------------------------------------------------
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "cpus: $(nproc)"
    echo "cpu model: $(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
    echo "hypervisor: $(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -n 1)"
    echo "memory: $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -srm)"
    # shellcheck disable=SC1091
    echo "os: $( (. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}") || echo unknown)"
    echo "postgresql: $("$PGBIN/postgres" --version | awk '{ print $3 }')"
    echo "redis: $( ((have_redis)) && redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p' || echo "not run")"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: DURATION=$DURATION CLIENTS=\"$CLIENTS\" JOBS=$JOBS SYNCHRONOUS_COMMIT=$SYNCHRONOUS_COMMIT" \
         "MAX_ENTRIES=$MAX_ENTRIES BATCH=$BATCH FLUSH_KEYS=$FLUSH_KEYS INPROC_N=$INPROC_N INPROC_REPS=$INPROC_REPS" \
         "ONLY=\"$ONLY\""
    echo "commit: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
} >"$OUT/machine.txt"

# ---- the throwaway server (and Redis) -------------------------------------------------------
TMP=$(mktemp -d /tmp/sc-bench.XXXXXX)
DATA=$TMP/data
started=0
redis_pid=
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    local status=$? tail_log=
    trap '' PIPE    # stdout may be a pipe whose reader is gone: finish the cleanup anyway
    if [[ -n $redis_pid ]]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    if [[ $started -eq 1 ]]; then
        server_stop "$TMP"
    fi
    if [[ -f $TMP/server.log ]]; then
        cp "$TMP/server.log" "$OUT/raw/server.log" 2>/dev/null || true
        [[ $status -ne 0 ]] && tail_log=$(tail -n 20 "$TMP/server.log")
    fi
    if [[ -f $TMP/redis.log ]]; then cp "$TMP/redis.log" "$OUT/raw/redis.log" 2>/dev/null || true; fi
    rm -rf "$TMP"
    if [[ -n $tail_log ]]; then
        printf -- '--- last lines of the server log ---\n%s\n' "$tail_log" >&2 || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$BENCH"/setup.sql "$BENCH"/workloads/*.sql "$TMP"/
# the batch scripts: literal arrays, parsed once under -M prepared; cardinality() keeps the
# 1,000 returned values from being sent to the client
keys=$(seq -s, 1 "$BATCH")
ones=$(printf '1,%.0s' $(seq "$BATCH")); ones=${ones%,}
printf "SELECT cardinality(sc_incr_batch('batch', '{%s}'::bigint[], '{%s}'::bigint[]));\n" "$keys" "$ones" >"$TMP/batch_buffered.sql"
printf "SELECT cardinality(sc_incr_batch('batch_tx', '{%s}'::bigint[], '{%s}'::bigint[]));\n" "$keys" "$ones" >"$TMP/batch_transactional.sql"
chmod -R a+rX "$TMP"
[[ $AS_ROOT -eq 1 ]] && chown -R postgres: "$TMP"
cd "$TMP"   # the server user must be able to stat its working directory

server_init "$TMP" "port = $PORT" "synchronous_commit = $SYNCHRONOUS_COMMIT" \
    "max_connections = $((max_clients + 10))" "slotted_counter.max_entries = $MAX_ENTRIES" \
    "slotted_counter.flush_interval = $FLUSH_INTERVAL" "huge_pages = $HUGE_PAGES" \
    "slotted_counter.stored_keys_filter = '$STORED_KEYS_FILTER'" ||
    die "initdb failed"
server_start "$TMP" || die "the server did not start"
started=1
# Huge pages in use on the machine once the server started (PostgreSQL 15 does not say whether
# its own shared memory got them): total - free + reserved.
HUGE_IN_USE=$(awk '/^HugePages_Total:/ { t = $2 } /^HugePages_Free:/ { f = $2 }
                   /^HugePages_Rsvd:/ { r = $2 } END { print t - f + r }' /proc/meminfo)
echo "huge pages: huge_pages = $HUGE_PAGES, $HUGE_IN_USE in use after the server started" >>"$OUT/machine.txt"

PSQL=(as_pg env PGOPTIONS="-c statement_timeout=600s -c jit=off" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$TMP" -p "$PORT" -U postgres)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" -f "$TMP/setup.sql" >/dev/null
q() { "${PSQL[@]}" -d "$DB" -At -c "$1"; }
# which build this run measures (make install may replace it between runs)
ext_version=$(q "SELECT extversion FROM pg_extension WHERE extname = 'slotted_counter'")
echo "slotted_counter: $ext_version, library installed $(date -u -r "$("$PG_CONFIG" --pkglibdir)/slotted_counter.so" '+%Y-%m-%d %H:%M:%S UTC')" \
    >>"$OUT/machine.txt"

if [[ $have_redis -eq 1 ]]; then
    redis-server --port 0 --unixsocket "$TMP/redis.sock" --unixsocketperm 700 --save '' --appendonly no \
        --daemonize no --logfile "$TMP/redis.log" &
    redis_pid=$!
    for _ in $(seq 50); do
        redis-cli -s "$TMP/redis.sock" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -s "$TMP/redis.sock" ping >/dev/null 2>&1 || die "redis-server did not start"
elif wanted redis; then
    log "redis-server/redis-benchmark not installed (or REDIS=no): no Redis rows"
fi

# ---- the throughput runs --------------------------------------------------------------------
declare -A TPS=() EXPECT=() RAN=()
failed=0
CHECKS=()        # distinct check SQL, in order

# a redis-benchmark run of n INCRs of one key by c clients; prints requests/s
redis_run() {
    local c=$1 n=$2 raw=$3
    redis-benchmark -s "$TMP/redis.sock" -c "$c" -n "$n" -t incr --csv >"$raw" 2>&1 || return 1
    awk -F'","' '$1 == "\"INCR" { printf "%.0f", $2; found = 1 } END { exit !found }' "$raw"
}
redis_total=0
# pgbench: clients, threads, PGOPTIONS, script, output file
pgb() {
    as_pg env PGOPTIONS="$3" "$PGBIN/pgbench" -n -h "$TMP" -p "$PORT" -U postgres -c "$1" -j "$2" \
        -T "$DURATION" -M prepared -f "$TMP/$4" "$DB" >"$5" 2>&1
}
tps_of() { awk '/^tps = /{ printf "%.0f", $3; found = 1; exit } END { if (!found) printf "error" }' "$1"; }

# The 10,000-key workloads are measured in their steady state, every key resident, as an
# application's keys are after their first seconds: an increment by 0 of each key loads it first
# (otherwise a third of a 5-second run at 8 clients is first loads, and only the first client
# count pays them). The 1,000,000-key zipfian ones keep their first loads: their tail is what
# a buffer of hot keys meets.
for pair in "incr_uniform uniform" "txincr_uniform uniform_tx" "incr_bounded bounded" "txincr_bounded bounded_tx" \
            "incr_once once" "txincr_once once_tx" "incr_uniform_untyped uniform_untyped"; do
    read -r name counter <<<"$pair"
    wanted "$name" || continue
    q "SELECT cardinality(sc_incr_batch('$counter', ARRAY(SELECT generate_series(1, 10000)::bigint),
                                        array_fill(0::bigint, ARRAY[10000])))" >/dev/null
done
# The text keys are given their ids the same way, before the run: a key's first write asks the
# flusher for its id once, as an application's keys do in their first seconds.
for pair in "incr_uniform_text uniform_text" "txincr_uniform_text uniform_text_tx"; do
    read -r name counter <<<"$pair"
    wanted "$name" || continue
    q "SELECT cardinality(sc_incr_batch_text('$counter', ARRAY(SELECT '/p/' || generate_series(1, 10000)),
                                             array_fill(0::bigint, ARRAY[10000])))" >/dev/null
done

# sc_rank and sc_total over 1,000,000 keys, each holding 1 + (k * 7919) % 100003, all in the
# buffer and flushed: a leaderboard between two flushes.
if wanted sum_1m || wanted rank_1m || wanted total_1m; then
    q "SELECT cardinality(sc_incr_batch('ranked', ARRAY(SELECT generate_series(1, 1000000)::bigint),
                                        ARRAY(SELECT 1 + (k::bigint * 7919) % 100003
                                                FROM generate_series(1, 1000000) k)))" >/dev/null
    q "SELECT sc_rollup()" >/dev/null
fi

# A warm-up of 3 s, not measured: the first point after the set-up above ran 10 to 50% slower
# than the same point later (SELECT 1 at 8 clients: 116,000 tps first, against 130,000 for the
# SELECT of a key right after it).
as_pg "$PGBIN/pgbench" -n -h "$TMP" -p "$PORT" -U postgres -c 8 -j "$JOBS" -T 3 -M prepared \
    -f "$TMP/select1.sql" "$DB" >"$OUT/raw/warm-up.out" 2>&1 || true

for c in $CLIENTS; do
    j=$(( JOBS < c ? JOBS : c ))
    for w in "${ALL_WORKLOADS[@]}"; do
        IFS='|' read -r name label scripts pgoptions per_tx check <<<"$w"
        wanted "$name" || continue
        [[ $name == redis && $have_redis -eq 0 ]] && continue
        label=${label//BATCH/$BATCH} per_tx=${per_tx//BATCH/$BATCH} check=${check//BATCH/$BATCH}
        raw=$OUT/raw/$name-c$c.out
        RAN[$name]=1
        printf 'bench: %-52s %3d clients, %s s ... ' "$label" "$c" "$DURATION" >&2
        if [[ $name == redis ]]; then
            # redis-benchmark counts requests, not seconds: a short run to size one of DURATION s
            if rps=$(redis_run "$c" 20000 "$raw.calibration") &&
                    n=$(( rps * DURATION > 20000 ? rps * DURATION : 20000 )) &&
                    rps=$(redis_run "$c" "$n" "$raw"); then
                redis_total=$(( redis_total + 20000 + n ))
                TPS[$name,$c]=$rps
                printf '%s requests/s\n' "$rps" >&2
            else
                TPS[$name,$c]=error failed=1
                printf 'FAILED (%s)\n' "$raw" >&2
            fi
            continue
        fi
        # every point starts from the same state: no dead rows left by the previous workload
        # (the transactional ones leave many in slotted_counter.deltas), no WAL to write back
        q 'VACUUM' >/dev/null
        q 'CHECKPOINT' >/dev/null
        if pgb "$c" "$j" "$pgoptions" "$scripts" "$raw"; then
            TPS[$name,$c]=$(tps_of "$raw")
            printf '%s tps\n' "${TPS[$name,$c]}" >&2
        else
            TPS[$name,$c]=error failed=1
            printf 'FAILED (%s)\n' "$raw" >&2
            grep -m 3 -E 'ERROR|FATAL|aborted' "$raw" >&2 || true
        fi
        # pgbench reports what it completed even when a client aborted
        tx=$(awk -F': ' '/^number of transactions actually processed/{ print $2 + 0; exit }' "$raw")
        if [[ -n $check ]]; then
            [[ -n ${EXPECT[$check]+x} ]] || { CHECKS+=("$check"); EXPECT[$check]=0; }
            EXPECT[$check]=$(( ${EXPECT[$check]} + ${tx:-0} * per_tx ))
        fi
    done
done

# ---- exactness of the throughput runs -------------------------------------------------------
CHECK_LINES=()
verify() {    # label, expected, SQL
    local got
    local t0=$SECONDS
    got=$(q "$3" 2>&1) || got="error: $got"
    echo "$(( SECONDS - t0 )) s: $3 = $got (expected $2)" >>"$OUT/raw/checks.out"
    if [[ $got == "$2" ]]; then
        CHECK_LINES+=("- ok: $1 = $got")
    else
        CHECK_LINES+=("- **MISMATCH**: $1 = $got, expected $2")
        failed=1
    fi
}
if (( ${#CHECKS[@]} > 0 )); then
    # the tables are read after one sc_rollup(); sc_sum reads the buffer and the tables
    log "checking that every count equals the committed increments (after sc_rollup())"
    q "SELECT sc_rollup()" >/dev/null
fi
for sql in "${CHECKS[@]}"; do verify "\`$sql\`" "${EXPECT[$sql]}" "$sql"; done
if (( ${#RAN[@]} > 0 )); then    # for the curious: the buffer and the tables after the runs
    {
        "${PSQL[@]}" -d "$DB" -c "SELECT * FROM slotted_counter.stats" -x
        "${PSQL[@]}" -d "$DB" -c "SELECT schemaname, relname, n_live_tup, n_dead_tup, n_tup_ins, n_tup_del,
            pg_size_pretty(pg_total_relation_size(relid)) AS size, autovacuum_count
            FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC"
    } >"$OUT/raw/after-runs.out" 2>&1 || true
fi
if [[ -n ${RAN[redis]:-} ]]; then
    got=$(redis-cli -s "$TMP/redis.sock" get 'counter:__rand_int__' 2>&1) || got="error: $got"
    if [[ $got == "$redis_total" ]]; then
        CHECK_LINES+=("- ok: Redis \`GET counter:__rand_int__\` = $got")
    else
        CHECK_LINES+=("- **MISMATCH**: Redis \`GET counter:__rand_int__\` = $got, expected $redis_total")
        failed=1
    fi
fi

# ---- one backend: ns per call ---------------------------------------------------------------
# Each query runs INPROC_REPS times, each time between two runs of the harness (generate_series,
# count, one trivial function call per row), all three in one statement; its cost is the time per
# row minus the mean of the two harness runs beside it. The median of those differences counts:
# the speed of a shared machine changes from one second to the next, and a difference between
# adjacent runs suffers less from it than one between the fastest runs of each.
declare -A NS=() NET=() NETRANGE=()
HARNESS="SELECT count(abs(g)) FROM generate_series(1, $INPROC_N) g"
INPROC=(
    "incr|sc_incr, buffered, resident key|SELECT count(sc_incr('inproc', 1)) FROM generate_series(1, $INPROC_N)"
    "txincr|sc_incr, transactional, resident key|SELECT count(sc_incr('inproc_tx', 1)) FROM generate_series(1, $INPROC_N)"
    "sum|sc_sum, buffered, resident key|SELECT count(sc_sum('inproc', 1)) FROM generate_series(1, $INPROC_N)"
    "txsum|sc_sum, transactional, resident key|SELECT count(sc_sum('inproc_tx', 1)) FROM generate_series(1, $INPROC_N)"
)
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) printf "%.1f", a[(NR + 1) / 2]; else printf "%.1f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
if wanted inproc; then
    log "one backend: $INPROC_REPS x $INPROC_N calls of each, between two harness runs"
    q "SELECT sc_incr('inproc', 1), sc_incr('inproc_tx', 1)" >/dev/null    # make the keys resident
    declare -A series=()
    harness_all=
    for ((r = 1; r <= INPROC_REPS; r++)); do
        for e in "${INPROC[@]}"; do
            IFS='|' read -r name label sql <<<"$e"
            res=$(q "SELECT round(bench_ns(\$q\$$HARNESS\$q\$, $INPROC_N)::numeric, 1) || ' ' ||
                            round(bench_ns(\$q\$$sql\$q\$, $INPROC_N)::numeric, 1) || ' ' ||
                            round(bench_ns(\$q\$$HARNESS\$q\$, $INPROC_N)::numeric, 1)")
            read -r h1 ns h2 <<<"$res"
            net=$(awk -v s="$ns" -v a="$h1" -v b="$h2" 'BEGIN { printf "%.1f", s - (a + b) / 2 }')
            echo "$name run $r: harness $h1, $name $ns, harness $h2 ns per row: $net ns per call" >>"$OUT/raw/inproc.out"
            series[$name]+="$ns $net"$'\n'
            harness_all+="$h1"$'\n'"$h2"$'\n'
        done
    done
    NS[harness]=$(printf '%s' "$harness_all" | median)
    NETRANGE[harness]=$(printf '%s' "$harness_all" | sort -g | sed -n '1p;$p' | paste -sd' ' | sed 's/ / … /')
    for e in "${INPROC[@]}"; do
        name=${e%%|*}
        NS[$name]=$(printf '%s' "${series[$name]}" | awk '{ print $1 }' | median)
        NET[$name]=$(printf '%s' "${series[$name]}" | awk '{ print $2 }' | median)
        NETRANGE[$name]=$(printf '%s' "${series[$name]}" | awk '{ print $2 }' | sort -g | sed -n '1p;$p' | paste -sd' ' | sed 's/ / … /')
    done
    verify "\`sc_sum('inproc', 1)\` after the single-backend runs" $(( 1 + INPROC_REPS * INPROC_N )) "SELECT sc_sum('inproc', 1)"
    verify "\`sc_sum('inproc_tx', 1)\` after the single-backend runs" $(( 1 + INPROC_REPS * INPROC_N )) "SELECT sc_sum('inproc_tx', 1)"
fi

# ---- shared memory --------------------------------------------------------------------------
SHMEM_LINES=()
if wanted shmem; then
    while IFS='|' read -r sname bytes; do
        [[ -n $sname ]] || continue
        # The filters of stored keys are memory per database (stored_keys_filter each), not per value.
        if [[ $sname == *"stored keys"* ]]; then
            SHMEM_LINES+=("| \`$sname\` | $bytes | (per database: $STORED_KEYS_FILTER each) | - |")
            continue
        fi
        per=$(awk -v b="$bytes" -v n="$MAX_ENTRIES" 'BEGIN { printf "%.1f", b / n }')
        SHMEM_LINES+=("| \`$sname\` | $bytes | $MAX_ENTRIES | $per |")
    done < <(q "SELECT name, allocated_size FROM pg_shmem_allocations WHERE name ILIKE '%slotted%' ORDER BY name")
    q "SELECT * FROM pg_shmem_allocations ORDER BY allocated_size DESC" >"$OUT/raw/shmem.out"
fi

# ---- the flusher ----------------------------------------------------------------------------
# On a restarted server (an empty buffer) with flush_interval = 0, so that only sc_rollup()
# flushes: dirty keys with batch calls, then time sc_rollup(). New keys insert rows into
# slotted_counter.key_values, keys flushed before update their row, so both are measured on their own.
FLUSH_ROWS=()
if wanted flush; then
    small=$(( FLUSH_KEYS / 10 ))
    log "the flusher: restarting the server with slotted_counter.flush_interval = 0"
    q "ALTER SYSTEM SET slotted_counter.flush_interval = 0" >/dev/null
    as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$TMP/server.log" -m fast -w -t 300 restart >/dev/null ||
        die "the server did not restart"
    q "SELECT sc_create('flush_small', 'buffered'), sc_create('flush_big', 'buffered')" >/dev/null
    # The baseline: INSERT of as many rows into a table of key_values' shape (its indexes and
    # fillfactor: setup.sql), in one statement, on the same server. It first holds a copy of
    # key_values' rows (a full run's other workloads leave millions there), so that both insert
    # into indexes of the same size; its new rows are counter 0's, which no counter has.
    KV_ROWS=$(q "SELECT count(*) FROM slotted_counter.key_values")
    declare -A INSERT_MS=()
    for n in "$small" "$FLUSH_KEYS"; do
        q "TRUNCATE flush_baseline" >/dev/null
        q "INSERT INTO flush_baseline SELECT * FROM slotted_counter.key_values" >/dev/null
        q "CHECKPOINT" >/dev/null
        INSERT_MS[$n]=$(q "SELECT round(bench_exec_ms('INSERT INTO flush_baseline (counter, key, value)
                                SELECT 0, g, 1 FROM generate_series(1, $n) g')::numeric, 1)")
        echo "baseline: INSERT of $n rows into flush_baseline: ${INSERT_MS[$n]} ms" >>"$OUT/raw/flush.out"
        printf 'bench: flush baseline, INSERT of %s rows: %s ms\n' "$n" "${INSERT_MS[$n]}" >&2
    done
    q "TRUNCATE flush_baseline" >/dev/null
    dirty() {    # counter, first key, last key: one batch call per 100,000 keys
        local a
        for ((a = $2; a <= $3; a += 100000)); do
            local b=$(( a + 99999 < $3 ? a + 99999 : $3 ))
            q "SELECT cardinality(sc_incr_batch('$1', ARRAY(SELECT generate_series($a, $b)::bigint),
                                          array_fill(1::bigint, ARRAY[$b - $a + 1])))" >/dev/null
        done
    }
    rollup() {   # label, keys dirtied
        local before res ms rows last
        q "CHECKPOINT" >/dev/null
        before=$(q "SELECT dirty_entries || '|' || entries_used FROM slotted_counter.stats WHERE datname = current_database()")
        res=$(q "SELECT round(ms::numeric, 1) || '|' || result FROM bench_ms('SELECT sc_rollup()')")
        ms=${res%%|*} rows=${res#*|}
        last=$(q "SELECT round(last_flush_ms::numeric, 1) FROM slotted_counter.stats WHERE datname = current_database()")
        FLUSH_ROWS+=("| $1 | $2 | ${before%%|*} | ${before#*|} | $rows | $ms | $last | $(awk -v ms="$ms" -v n="$2" 'BEGIN { printf "%.2f", ms * 1000 / n }') | $(awk -v ms="$ms" -v b="${INSERT_MS[$2]:-}" 'BEGIN { if (b > 0) printf "%.2f", ms / b; else printf "-" }') |")
        echo "$1: dirty|resident before = $before, sc_rollup() = $rows rows in $ms ms, last_flush_ms = $last" >>"$OUT/raw/flush.out"
        printf 'bench: flush, %s: %s ms\n' "$1" "$ms" >&2
    }
    dirty flush_small 1 "$small"
    rollup "new keys (inserts), small buffer" "$small"
    dirty flush_small 1 "$small"
    rollup "flushed keys (updates), small buffer" "$small"
    dirty flush_big 1 "$FLUSH_KEYS"
    rollup "new keys (inserts), big buffer" "$FLUSH_KEYS"
    dirty flush_big 1 "$small"
    rollup "flushed keys (updates), big buffer" "$small"
    dirty flush_big 1 "$FLUSH_KEYS"
    rollup "flushed keys (updates), big buffer" "$FLUSH_KEYS"
    verify "\`sc_sum('flush_small', keys 1..$small)\`" $(( 2 * small )) \
        "SELECT sc_sum_keys('flush_small', ARRAY(SELECT generate_series(1, $small)::bigint))"
    verify "\`sc_sum('flush_big', keys 1..$FLUSH_KEYS)\`" $(( 2 * FLUSH_KEYS + small )) \
        "SELECT sc_sum_keys('flush_big', ARRAY(SELECT generate_series(1, $FLUSH_KEYS)::bigint))"
    verify "\`sum(value)\` of both flush counters in \`slotted_counter.key_values\`" $(( 3 * small + 2 * FLUSH_KEYS )) \
        "SELECT sum(value) FROM slotted_counter.key_values WHERE counter IN ('flush_small'::slotted_counter::integer, 'flush_big'::slotted_counter::integer)"
    # The sections after this one run with the flusher of the throughput runs again (a buffered
    # statement of new keys beyond the buffer's free entries would otherwise write through).
    q "ALTER SYSTEM RESET slotted_counter.flush_interval" >/dev/null
    q "SELECT pg_reload_conf()" >/dev/null
fi

# ---- a transaction of 1,000,000 keys ---------------------------------------------------------
# A table of counters moved into a counter in one statement (its own transaction, the COMMIT
# timed with it), new keys and then the same keys again, against an INSERT of as many rows into a
# table with a primary key, on the same server. Timed from the client: psql's round trip is in
# each, a few milliseconds of seconds.
BIGTXN_ROWS=()
if wanted bigtxn; then
    log "a transaction of $(thousands "$BIGTXN_KEYS") keys"
    # After the flush section's restart the filter of stored keys is rebuilt from the tables
    # (seconds, for the millions of rows a full run leaves): until then every new key probes
    # key_values. Waited for, up to a minute, as a server that has run a while has it.
    for _ in $(seq 600); do
        [[ $(q "SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database()") =~ ^(valid|off)$ ]] && break
        sleep 0.1
    done
    q "DROP TABLE IF EXISTS bigtxn_source, bigtxn_baseline" >/dev/null
    q "CREATE TABLE bigtxn_source AS SELECT g::bigint AS id, (g % 1000 + 1)::bigint AS n
         FROM generate_series(1, $BIGTXN_KEYS) g" >/dev/null
    q "CREATE TABLE bigtxn_baseline (id bigint PRIMARY KEY, n bigint NOT NULL)" >/dev/null
    q "SELECT sc_create('bigtxn_t', 'transactional'), sc_create('bigtxn_b', 'buffered')" >/dev/null
    timed_ms() {    # SQL, in a transaction of its own: milliseconds, the commit included
        q "CHECKPOINT" >/dev/null
        local start end
        start=$(date +%s%N)
        q "$1" >/dev/null || die "failed: $1"
        end=$(date +%s%N)
        echo $(( (end - start) / 1000000 ))
    }
    base=$(timed_ms "INSERT INTO bigtxn_baseline SELECT id, n FROM bigtxn_source")
    bigtxn_row() {    # label, SQL
        local ms
        ms=$(timed_ms "$2")
        BIGTXN_ROWS+=("| $1 | $ms | $(awk -v a="$base" -v b="$ms" 'BEGIN { printf "%.2f", a / b }') |")
        echo "$1: $ms ms (INSERT: $base ms)" >>"$OUT/raw/bigtxn.out"
        printf 'bench: %s: %s ms\n' "$1" "$ms" >&2
    }
    bigtxn_row "transactional \`sc_set\`, new keys" "SELECT count(sc_set('bigtxn_t', id, n)) FROM bigtxn_source"
    bigtxn_row "transactional \`sc_incr\`, the same keys" "SELECT count(sc_incr('bigtxn_t', id, 1)) FROM bigtxn_source"
    bigtxn_row "buffered \`sc_set\`, new keys" "SELECT count(sc_set('bigtxn_b', id, n)) FROM bigtxn_source"
    verify "\`sc_sum('bigtxn_t')\` of every key" "$(q "SELECT sum(n) + count(*) FROM bigtxn_source")" \
        "SELECT sum(sc_sum('bigtxn_t', id)) FROM bigtxn_source"
    q "DROP TABLE bigtxn_source, bigtxn_baseline" >/dev/null
fi

# ---- the tables -----------------------------------------------------------------------------
ratio() {    # a / b with two decimals, "-" when either is missing
    [[ ${1:-} =~ ^[0-9]+$ && ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "-"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}
thousands() { [[ ${1:-} =~ ^[0-9]+$ ]] && sed ':a; s/\B[0-9]\{3\}\>/,&/; ta' <<<"$1" || echo "${1:--}"; }
times_batch() { [[ ${1:-} =~ ^[0-9]+$ ]] && echo $(( $1 * BATCH )) || echo "${1:--}"; }
# the value in the throughput table: increments/s for batch workloads, else tps
value() {
    case $1 in
        batch|txbatch) times_batch "${TPS[$1,$2]:-}" ;;
        sum_mix) [[ ${TPS[$1,$2]:-} =~ ^[0-9]+$ ]] && echo $(( TPS[$1,$2] * 2 )) || echo "${TPS[$1,$2]:--}" ;;
        sum_mix_reads) echo "${TPS[sum_mix,$2]:-}" ;;
        *) echo "${TPS[$1,$2]:-}" ;;
    esac
}

header() {   # first columns..., then one per client count
    local line="|" sep="|" h
    for h in "$@"; do line+=" $h |"; sep+="---|"; done
    for c in $CLIENTS; do line+=" $c |"; sep+="---:|"; done
    echo "$line"; echo "$sep"
}

report() {
    local c w name label line
    echo "### slotted_counter benchmark, $stamp"
    echo
    echo "$(nproc) CPUs ($(sed -n 's/^cpu model: //p' "$OUT/machine.txt")), $(sed -n 's/^memory: //p' "$OUT/machine.txt")," \
         "PostgreSQL $(sed -n 's/^postgresql: //p' "$OUT/machine.txt"), slotted_counter $ext_version; pgbench -M prepared -j $JOBS -T $DURATION;" \
         "synchronous_commit = $SYNCHRONOUS_COMMIT unless a row says otherwise; slotted_counter.max_entries = $MAX_ENTRIES" \
         "(every key of every workload stays resident: this measures the hot path, not eviction), flush_interval = $FLUSH_INTERVAL ms;" \
         "huge_pages = $HUGE_PAGES, $HUGE_IN_USE huge pages in use after the server started;" \
         "slotted_counter.stored_keys_filter = $STORED_KEYS_FILTER."
    if (( ${#RAN[@]} > 0 )); then
        echo
        echo "#### Throughput: transactions/s by clients (batch rows: increments/s = calls/s × $BATCH; sc_incr + sc_sum: calls/s = 2 × transactions/s; Redis: requests/s)"
        echo
        header workload
        for w in "${ALL_WORKLOADS[@]}"; do
            IFS='|' read -r name label _ <<<"$w"
            [[ -n ${RAN[$name]:-} ]] || continue
            label=${label//BATCH/$(thousands "$BATCH")}
            line="| $label |"
            for c in $CLIENTS; do line+=" $(value "$name" "$c") |"; done
            echo "$line"
            if [[ $name == sum_mix ]]; then
                line="| … of which sc_sum/s |"
                for c in $CLIENTS; do line+=" $(value sum_mix_reads "$c") |"; done
                echo "$line"
            fi
        done
        echo
        echo "#### Ratios (targets from SPEC section 6; the others for information)"
        echo
        header ratio target
        ratio_row() {   # label, target, numerator name, denominator name
            local c line="| $1 | $2 |"
            [[ -n ${RAN[$3]:-} && -n ${RAN[$4]:-} ]] || return 0
            for c in $CLIENTS; do line+=" $(ratio "$(value "$3" "$c")" "$(value "$4" "$c")") |"; done
            echo "$line"
        }
        ratio_row "buffered sc_incr / SELECT 1" "≥ 0.85 at 8/32/64" incr select1
        ratio_row "transactional sc_incr / append-only INSERT" "≥ 1.0 at 32/64" txincr insert
        ratio_row "transactional sc_incr / hot-row UPDATE (sync on)" "≥ 10 at 32/64" txincr update
        ratio_row "tpcb-like with counters / without those writes" "≥ 0.9 at 32" tpcb_counters tpcb_without
        ratio_row "tpcb-like with counters / stock tpcb-like" "≥ 3 at 32" tpcb_counters tpcb
        ratio_row "tpcb-like with counters / with two empty statements in their place" "" tpcb_counters tpcb_statements
        ratio_row "tpcb-like, both counters in one statement / without those writes" "" tpcb_counters_one tpcb_without
        ratio_row "tpcb-like with two empty statements / without those writes" "" tpcb_statements tpcb_without
        ratio_row "buffered sc_incr, 10,000 keys / SELECT of the same random key" "≥ 0.9 at 8/32" incr_uniform select_uniform
        ratio_row "buffered sc_incr, 1M keys zipfian / SELECT of the same random key" "≥ 0.9 at 8/32" incr_zipf select_zipf
        ratio_row "buffered sc_incr, 10,000 text keys / bigint keys" "≥ 0.8 at 8" incr_uniform_text incr_uniform
        ratio_row "transactional sc_incr, 10,000 text keys / bigint keys" "≥ 0.8 at 8" txincr_uniform_text txincr_uniform
        ratio_row "buffered sc_incr, 10,000 keys: untyped placeholder / bigint" "" incr_uniform_untyped incr_uniform
        ratio_row "transactional sc_incr, 10,000 keys / append-only INSERT" "≥ 0.95 at 8/32" txincr_uniform insert
        if [[ -n ${RAN[batch]:-} ]]; then
            line="| batch sc_incr (buffered), increments/s | ≥ 1,000,000 |"
            for c in $CLIENTS; do line+=" $(thousands "$(value batch "$c")") |"; done
            echo "$line"
        fi
        ratio_row "buffered sc_throttle / buffered sc_incr, one hot key" "≥ 0.9 at 32" throttle incr
        ratio_row "buffered sc_throttle in FROM / buffered sc_incr, one hot key" "" throttle_from incr
        ratio_row "transactional sc_throttle / transactional sc_incr, one hot key" "" txthrottle txincr
        ratio_row "buffered sc_add / buffered sc_incr, one hot key" "≥ 0.8 at 32" add incr
        ratio_row "transactional sc_add / transactional sc_incr, one hot key" "" txadd txincr
        ratio_row "buffered sc_incr_bounded / sc_incr, 10,000 keys" "" incr_bounded incr_uniform
        ratio_row "transactional sc_incr_bounded / sc_incr, 10,000 keys" "" txincr_bounded txincr_uniform
        ratio_row "buffered sc_incr_once / sc_incr, 10,000 keys" "" incr_once incr_uniform
        ratio_row "transactional sc_incr_once / sc_incr, 10,000 keys" "" txincr_once txincr_uniform
        ratio_row "buffered sc_incr, new keys: retain 2 seconds / no retention" "" incr_fresh_retained incr_fresh
        ratio_row "buffered sc_incr, new keys: text / bigint" "" incr_fresh_text incr_fresh
        ratio_row "buffered sc_incr / hot-row UPDATE (sync off)" "" incr update_async
        ratio_row "buffered sc_incr / Redis INCR" "" incr redis
        ratio_row "buffered sc_incr, 10,000 keys / SELECT 1" "" incr_uniform select1
        ratio_row "buffered sc_incr, 1M keys zipfian / SELECT 1" "" incr_zipf select1
        ratio_row "sc_incr + sc_sum alternating, calls/s / SELECT 1" "" sum_mix select1
        ratio_row "sc_rank, 1,000,000 keys / sc_sum of the same random key" "" rank_1m sum_1m
        ratio_row "sc_total, 1,000,000 keys / sc_sum of a random key" "" total_1m sum_1m
        ratio_row "transactional sc_incr / 100-slot upsert" "" txincr slots
        ratio_row "transactional sc_incr, 1M keys zipfian / append-only INSERT" "" txincr_zipf insert
        ratio_row "100-slot upsert / hot-row UPDATE (sync on)" "" slots update
        ratio_row "transactional batch / buffered batch (increments/s)" "" txbatch batch
    fi
    if wanted inproc; then
        echo
        echo "#### One backend: \`SELECT count(f(...)) FROM generate_series(1, $INPROC_N)\`, $INPROC_REPS runs, each between two runs of the harness"
        echo
        echo "Harness: \`$HARNESS\`, median ${NS[harness]} ns per row (${NETRANGE[harness]})."
        echo
        echo "| call | ns per row (median) | ns per call minus the harness beside it: median | min … max | target |"
        echo "|---|---:|---:|---:|---|"
        for e in "${INPROC[@]}"; do
            IFS='|' read -r name label _ <<<"$e"
            local target=""
            case $name in incr|txincr) target="≤ 100 ns" ;; sum|txsum) target="O(1), no table" ;; esac
            echo "| $label | ${NS[$name]} | ${NET[$name]} | ${NETRANGE[$name]} | $target |"
        done
    fi
    if wanted flush; then
        echo
        echo "#### Flush: \`sc_rollup()\` after dirtying keys with batch calls, flush_interval = 0, freshly restarted server"
        echo
        echo "\"small buffer\": only the $(thousands "$small") keys of one counter are resident;" \
             "\"big buffer\": $(thousands "$(( FLUSH_KEYS + small ))") resident. Target: $(thousands "$FLUSH_KEYS") dirty keys in ≤ 10 s," \
             "linear in dirty keys, not in resident keys; ≤ 1.5 × an INSERT of as many rows into a table of key_values' shape, its" \
             "indexes and fillfactor, holding as many rows as key_values did ($(thousands "$KV_ROWS"))" \
             "(baseline: $(thousands "$small") rows ${INSERT_MS[$small]} ms, $(thousands "$FLUSH_KEYS") rows ${INSERT_MS[$FLUSH_KEYS]} ms)."
        echo
        echo "| dirty keys are | dirty keys | dirty_entries | entries_used | rows written | sc_rollup() ms | stats.last_flush_ms | µs per dirty key | × INSERT of as many rows |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        printf '%s\n' "${FLUSH_ROWS[@]}"
    fi
    if wanted bigtxn; then
        echo
        echo "#### A transaction of $(thousands "$BIGTXN_KEYS") keys: one statement and its COMMIT, against an INSERT of as many rows into a table with a primary key ($base ms)"
        echo
        echo "| statement | ms | speed × the INSERT's (target ≥ 0.5) |"
        echo "|---|---:|---:|"
        printf '%s\n' "${BIGTXN_ROWS[@]}"
    fi
    if (( ${#SHMEM_LINES[@]} > 0 )); then
        echo
        echo "#### Shared memory (\`pg_shmem_allocations\`; target ≤ 128 bytes per counter value)"
        echo
        echo "| allocation | bytes | max_entries | bytes per value |"
        echo "|---|---:|---:|---:|"
        printf '%s\n' "${SHMEM_LINES[@]}"
    fi
    if (( ${#CHECK_LINES[@]} > 0 )); then
        echo
        echo "#### Exactness (every count equals the increments reported as committed)"
        echo
        printf '%s\n' "${CHECK_LINES[@]}"
    fi
}
echo >&2
report | tee "$OUT/table.md"

# ---- the chart ------------------------------------------------------------------------------
if (( ${#RAN[@]} > 0 )); then
    {
        printf 'clients'
        for w in "${ALL_WORKLOADS[@]}"; do
            IFS='|' read -r name label _ <<<"$w"
            [[ -n ${RAN[$name]:-} ]] || continue
            label=${label//BATCH/$(thousands "$BATCH")}
            [[ $name == batch || $name == txbatch ]] && label+=" (increments/s)"
            printf '\t"%s"' "${label//\"/}"
        done
        printf '\n'
        for c in $CLIENTS; do
            printf '%s' "$c"
            for w in "${ALL_WORKLOADS[@]}"; do
                name=${w%%|*}
                [[ -n ${RAN[$name]:-} ]] || continue
                v=$(value "$name" "$c")
                [[ $v =~ ^[0-9]+$ && $v -gt 0 ]] || v=NaN
                printf '\t%s' "$v"
            done
            printf '\n'
        done
    } >"$OUT/chart.dat"
    if command -v gnuplot >/dev/null; then
        term=png
        gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
        ncol=$(( $(head -n 1 "$OUT/chart.dat" | awk -F'\t' '{ print NF }') ))
        if gnuplot >"$OUT/raw/gnuplot.out" 2>&1 <<EOF
set terminal $term noenhanced size 1600,900 $( [[ $term == pngcairo ]] && echo "font ',10'")
set output '$OUT/chart.png'
set datafile separator "\t"
set title "slotted_counter benchmark $stamp: throughput by clients (pgbench -M prepared -j $JOBS -T $DURATION, $(nproc) CPUs)"
set xlabel 'clients'
set ylabel 'transactions/s (batch: increments/s), log scale'
set logscale x 2
set logscale y 10
set format y '%.0s%c'
set xtics ($(echo "$CLIENTS" | tr -s ' ' '\n' | sed '/^$/d' | paste -sd,))
set xrange [0.8:$(( max_clients * 5 / 4 + 1 ))]
set grid xtics ytics mytics
set key outside right top
set linetype 5 linecolor rgb '#b8860b'    # no pale yellow
plot for [i=2:$ncol] '$OUT/chart.dat' using 1:i with linespoints linewidth 2 pointsize 1.2 \
    linecolor 1 + (i - 2) % 8 dashtype 1 + (i - 2) / 8 pointtype 1 + (i - 2) % 13 title columnheader(i)
EOF
        then
            log "chart: $OUT/chart.png"
        else
            log "gnuplot failed (see $OUT/raw/gnuplot.out); no chart"
        fi
    else
        log "gnuplot is not installed (apt-get install gnuplot-nox): no chart; the data is in $OUT/chart.dat"
    fi
fi

echo
echo "output: $OUT"
[[ $failed -eq 0 ]] || echo "bench.sh: a run failed or a count does not match (see above)" >&2
exit "$failed"
