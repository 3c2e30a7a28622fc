#!/usr/bin/env bash
# pools.sh: how much one database's flood of the shared pools slows another database's calls.
# Database "flood" runs FLOOD_CLIENTS sessions of sc_incr_once with a new request id per call and
# BATCH_CLIENTS sessions of new keys (sc_incr_batch of BATCH random keys), in a buffer of
# MAX_ENTRIES entries and a request-id table of MAX_REQUEST_IDS. Database "quiet" runs
# three fixed workloads of CALLS calls from 2 clients (pgbench -t): sc_incr_once with a new
# request id per call, sc_incr of a new key per call, and sc_incr of one resident key, which
# shares the machine with the flood but no pool (the baseline of what the machine costs). Each
# runs alone, then during the flood, REPS times in turn; prints each workload's median latency
# alone and during the flood, their ratio, and that ratio over the resident key's (the target: a
# workload during the flood within 2 x of alone, against the machine's baseline). Exits 1 if a
# counter of quiet is not exact.
#
# Environment: MAX_ENTRIES (20000), MAX_REQUEST_IDS (2048), FLOOD_CLIENTS (4), BATCH_CLIENTS (1),
#   BATCH (1000), CALLS (1000), REPS (3)
set -euo pipefail
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/pg_server.sh
. "$BENCH/../../scripts/pg_server.sh"

MAX_ENTRIES=${MAX_ENTRIES:-20000}
MAX_REQUEST_IDS=${MAX_REQUEST_IDS:-2048}
FLOOD_CLIENTS=${FLOOD_CLIENTS:-4}
BATCH_CLIENTS=${BATCH_CLIENTS:-1}
BATCH=${BATCH:-1000}
CALLS=${CALLS:-1000}
REPS=${REPS:-3}

throwaway_init sc-pools "slotted_counter.max_entries = $MAX_ENTRIES" \
    "slotted_counter.max_request_ids = $MAX_REQUEST_IDS" "max_connections = 40"
server_start "$WORK"
psql_ -c "CREATE DATABASE flood" -c "CREATE DATABASE quiet" >/dev/null
in_db() {
    local db=$1
    shift
    as_pg "$PGBIN/psql" -h "$WORK" -d "$db" -Atq -v ON_ERROR_STOP=1 "$@"
}
in_db flood -c "CREATE EXTENSION slotted_counter" \
    -c "SELECT sc_create('f', 'buffered'), sc_create('fo', 'buffered')" >/dev/null
in_db quiet -c "CREATE EXTENSION slotted_counter" \
    -c "SELECT sc_create('new', 'buffered'), sc_create('once', 'buffered'), sc_create('resident', 'buffered')" \
    -c "SELECT sc_incr('resident', 1, 0)" >/dev/null

printf "SELECT cardinality(sc_incr_batch('f', ARRAY(SELECT (random() * 1e15)::bigint FROM generate_series(1, %d)), array_fill(1::bigint, ARRAY[%d])));\n" \
    "$BATCH" "$BATCH" >"$WORK/flood_batch.sql"
echo "SELECT sc_incr_once('fo', (random() * 1e15)::bigint, 1, gen_random_uuid()::text);" >"$WORK/flood_once.sql"
echo "SELECT sc_incr_once('once', (random() * 1e15)::bigint, 1, gen_random_uuid()::text);" >"$WORK/once.sql"
echo "SELECT sc_incr('new', (random() * 1e15)::bigint);" >"$WORK/new.sql"
echo "SELECT sc_incr('resident', 1);" >"$WORK/resident.sql"
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql

workloads="once new resident"
declare -A done_calls=([once]=0 [new]=0 [resident]=0)
# Runs workload $1 in quiet; appends "<phase> <workload> <latency ms>" to $WORK/runs.
quiet_run() {
    local out
    out=$(as_pg "$PGBIN/pgbench" -h "$WORK" -n -c 2 -j 2 -t "$CALLS" -f "$WORK/$1.sql" quiet 2>&1)
    local processed
    processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    done_calls[$1]=$((done_calls[$1] + processed))
    echo "$2 $1 $(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")" >>"$WORK/runs"
}

for _ in $(seq 1 "$REPS"); do
    for w in $workloads; do quiet_run "$w" alone; done
    as_pg "$PGBIN/pgbench" -h "$WORK" -n -c "$FLOOD_CLIENTS" -j 1 -T 600 \
        -f "$WORK/flood_once.sql" flood >"$WORK/flood_once.log" 2>&1 &
    once_pid=$!
    as_pg "$PGBIN/pgbench" -h "$WORK" -n -c "$BATCH_CLIENTS" -j 1 -T 600 \
        -f "$WORK/flood_batch.sql" flood >"$WORK/flood_batch.log" 2>&1 &
    batch_pid=$!
    # Until the flood keeps a quarter of the buffer dirty (its flush cleans it every second).
    for _ in $(seq 1 300); do
        dirty=$(psql_ -c "SELECT coalesce(sum(dirty_entries), 0) FROM slotted_counter.stats WHERE datname = 'flood'" 2>/dev/null || echo 0)
        [[ $dirty -ge $((MAX_ENTRIES / 4)) ]] && break
        sleep 0.1
    done
    for w in $workloads; do quiet_run "$w" flood; done
    kill "$once_pid" "$batch_pid" 2>/dev/null || true
    wait "$once_pid" "$batch_pid" 2>/dev/null || true
    in_db flood -c "SELECT sc_rollup()" >/dev/null
done

exact=$(in_db quiet -c "SELECT sc_total('once') = ${done_calls[once]} AND sc_total('new') = ${done_calls[new]} AND sc_sum('resident', 1) = ${done_calls[resident]}")
python3 - "$WORK/runs" "$CALLS" "$MAX_ENTRIES" "$MAX_REQUEST_IDS" "$FLOOD_CLIENTS" "$BATCH_CLIENTS" "$REPS" <<'PY'
import statistics, sys
runs, calls, entries, ids, clients, batch_clients, reps = sys.argv[1:]
lat = {}
for line in open(runs):
    phase, w, ms = line.split()
    lat.setdefault((phase, w), []).append(float(ms))
med = {k: statistics.median(v) for k, v in lat.items()}
base = med[("flood", "resident")] / med[("alone", "resident")]
print(f"| quiet: {calls} calls from 2 clients, median of {reps} (max_entries = {entries}, "
      f"max_request_ids = {ids}; flood: {clients} sessions of sc_incr_once, {batch_clients} of "
      "batches of new keys) "
      "| ms a call, alone | during the flood | ratio | ratio over the machine's |")
print("|---|---|---|---|---|")
names = {"once": "sc_incr_once, a new request id per call", "new": "sc_incr, a new key per call",
         "resident": "sc_incr of a resident key (the machine's share)"}
for w in ("once", "new", "resident"):
    a, f = med[("alone", w)], med[("flood", w)]
    print(f"| {names[w]} | {a:.3f} | {f:.3f} | {f / a:.2f} | {f / a / base:.2f} |")
PY
if [[ $exact != t ]]; then
    echo "a counter of database quiet is not exact" >&2
    exit 1
fi
