#!/usr/bin/env bash
# soak.sh: a long mixed load at many connections, then a clean restart; checks that no process
# died of a signal and that nothing was lost. CLIENTS sessions (pgbench) for DURATION seconds run
# a mix of every write and read: buffered and transactional sc_incr over many keys, batches, a
# bucketed counter, sc_sum, sc_sum_keys, sc_series, and sc_top at 2% of the calls, in a buffer
# smaller than the keys (MAX_ENTRIES), so that entries are evicted and written through all along.
# Each write script counts into a counter of its own and records each call in a table of its own
# in the same statement (pgbench's own count per script is not exact when several scripts run),
# so that every counter must equal its table: after the load, and again after a clean restart.
# Prints the calls per script, the restarts and signals seen in the log, and the checks; exits 1
# if any check fails.
#
# Environment: CLIENTS (110), DURATION (600 s), MAX_ENTRIES (20000), KEYS (50000)
set -euo pipefail
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/pg_server.sh
. "$BENCH/../../scripts/pg_server.sh"

CLIENTS=${CLIENTS:-110}
DURATION=${DURATION:-600}
MAX_ENTRIES=${MAX_ENTRIES:-20000}
KEYS=${KEYS:-50000}

throwaway_init sc-soak "slotted_counter.max_entries = $MAX_ENTRIES" \
    "max_connections = $((CLIENTS + 20))" "slotted_counter.flush_interval = 200"
server_start "$WORK"
psql_ -c "CREATE EXTENSION slotted_counter" \
    -c "SELECT sc_create('b', 'buffered'), sc_create('t'), sc_create('bb', 'buffered'),
               sc_create('h', 'buffered', '1 hour')" \
    -c "CREATE TABLE calls_b (n bigint); CREATE TABLE calls_t (n bigint);
        CREATE TABLE calls_bb (n bigint); CREATE TABLE calls_h (n bigint)" >/dev/null

# name weight script
scripts=(
    "incr_buffered 35 \\set k random(1, $KEYS)
INSERT INTO calls_b SELECT sc_incr('b', :k);"
    "incr_transactional 20 \\set k random(1, $KEYS)
INSERT INTO calls_t SELECT sc_incr('t', :k);"
    "batch 3 INSERT INTO calls_bb SELECT cardinality(sc_incr_batch('bb', ARRAY(SELECT (random() * $((KEYS - 1)))::bigint + 1 FROM generate_series(1, 100)), array_fill(1::bigint, ARRAY[100])));"
    "incr_bucketed 5 \\set k random(1, 1000)
INSERT INTO calls_h SELECT sc_incr('h', :k);"
    "sum 25 \\set k random(1, $KEYS)
SELECT sc_sum('b', :k);"
    "sum_keys 5 \\set k random(1, $KEYS)
SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(:k, :k + 49))::bigint[]);"
    "series 5 \\set k random(1, 1000)
SELECT count(*) FROM sc_series('h', :k, now() - interval '1 day', NULL);"
    "top 2 SELECT count(*) FROM sc_top('b', 10);"
)
args=()
for entry in "${scripts[@]}"; do
    name=${entry%% *}
    rest=${entry#* }
    weight=${rest%% *}
    body=${rest#* }
    printf '%s\n' "$body" >"$WORK/$name.sql"
    args+=(-f "$WORK/$name.sql@$weight")
done
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql

# A short run measures the rate; the long one makes as many calls per client as take DURATION.
declare -A processed
total=0
failed=0
run() {
    local out line current=
    out=$(as_pg "$PGBIN/pgbench" -h "$WORK" -n -M prepared -c "$CLIENTS" -j 2 -t "$1" \
        "${args[@]}" postgres 2>&1) || { echo "$out" >&2; exit 1; }
    # Per script: "SQL script N: WORK/name.sql" then " - N transactions (...)".
    while IFS= read -r line; do
        if [[ $line =~ ^SQL\ script\ [0-9]+:\ .*/([a-z_]+)\.sql ]]; then current=${BASH_REMATCH[1]}; fi
        if [[ -n $current && $line =~ ^\ -\ ([0-9]+)\ transactions ]]; then
            processed[$current]=$((${processed[$current]:-0} + BASH_REMATCH[1]))
            current=
        fi
    done <<<"$out"
    total=$((total + $(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")))
    failed=$((failed + $(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")))
    rate=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | head -n 1)
}
run 20
run "$(awk -v r="$rate" -v d="$DURATION" -v c="$CLIENTS" 'BEGIN { n = int(r * d / c); print (n < 1 ? 1 : n) }')"

expected=$(psql_ -c "SELECT (SELECT count(*) FROM calls_b) || '|' || (SELECT count(*) FROM calls_t)
  || '|' || (SELECT sum(n) FROM calls_bb) || '|' || (SELECT count(*) FROM calls_h)")
sums="SELECT (SELECT sum(sc_sum('b', k)) FROM generate_series(1, $KEYS) k) || '|' ||
  (SELECT sum(sc_sum('t', k)) FROM generate_series(1, $KEYS) k) || '|' ||
  (SELECT sum(sc_sum('bb', k)) FROM generate_series(1, $KEYS) k) || '|' ||
  (SELECT sum(sc_sum('h', k)) FROM generate_series(1, 1000) k)"
stats=$(psql_ -c "SELECT evictions || ' evictions, ' || write_throughs || ' write-throughs' FROM slotted_counter.stats")
after_load=$(psql_ -c "$sums")
server_stop "$WORK"
server_start "$WORK"
after_restart=$(psql_ -c "$sums")
stored=$(psql_ -c "SELECT sc_rollup() >= 0" -c "SELECT
  (SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 'b'::slotted_counter::integer) || '|' ||
  (SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 't'::slotted_counter::integer) || '|' ||
  (SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 'bb'::slotted_counter::integer) || '|' ||
  (SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 'h'::slotted_counter::integer)" | tail -n 1)
signals=$(grep -c 'terminated by signal' "$WORK/server.log" || true)
restarts=$(grep -c 'all server processes terminated; reinitializing' "$WORK/server.log" || true)

echo "| script (weight) | committed calls |"
echo "|---|---:|"
for entry in "${scripts[@]}"; do
    name=${entry%% *}
    rest=${entry#* }
    echo "| $name (${rest%% *}) | ${processed[$name]:-0} |"
done
echo
echo "$CLIENTS clients, about $DURATION s: $total calls (last rate $rate/s), $failed failed; $stats"
echo "sc_top: ${processed[top]:-0} calls, $(awk -v t="${processed[top]:-0}" -v a="$total" 'BEGIN { printf "%.2f", 100 * t / a }')% of all"
echo "server log: $signals processes terminated by a signal, $restarts crash restarts"
echo "expected (b|t|bb|h):        $expected"
echo "after the load:             $after_load"
echo "after a clean restart:      $after_restart"
echo "in key_values after a rollup:   $stored"
ok=1
[[ $signals -eq 0 && $restarts -eq 0 ]] || ok=0
[[ ${failed:-0} -eq 0 ]] || ok=0
[[ $after_load == "$expected" && $after_restart == "$expected" && $stored == "$expected" ]] || ok=0
if [[ $ok -eq 1 ]]; then echo "soak: every check passed"; else echo "soak: FAILED" >&2; exit 1; fi
