#!/usr/bin/env bash
# small_buffer.sh: sc_incr with a buffer far too small for the keys of one flush interval, buffered
# (an increment of a key that is not resident is written through by the flusher, or finds an
# entry a flush brought forward made clean) and transactional (each commit needs an entry whose
# deltas a flush folded: the flushes the full buffer asks for), against an append-only INSERT on
# the same server in the same run. Prints the rates and their ratios; exits 1 if a counter does
# not equal the increments pgbench reports as committed.
#
# Environment: CLIENTS (6), DURATION (10 s), KEYS (30000), MAX_ENTRIES (128),
#   SYNCHRONOUS_COMMIT (on), BATCH (0: one key per call; n: sc_incr_batch of n random keys)
set -euo pipefail
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/pg_server.sh
. "$BENCH/../../scripts/pg_server.sh"

CLIENTS=${CLIENTS:-6}
DURATION=${DURATION:-10}
KEYS=${KEYS:-30000}
MAX_ENTRIES=${MAX_ENTRIES:-128}
SYNCHRONOUS_COMMIT=${SYNCHRONOUS_COMMIT:-on}
BATCH=${BATCH:-0}

throwaway_init sc-small-buffer "slotted_counter.max_entries = $MAX_ENTRIES" \
    "synchronous_commit = $SYNCHRONOUS_COMMIT" "max_connections = $((CLIENTS + 10))"
server_start "$WORK"
psql_ -c "CREATE EXTENSION slotted_counter" -c "SELECT sc_create('small', 'buffered'), sc_create('small_t')" \
    -c "CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY, v integer NOT NULL)" >/dev/null

echo "INSERT INTO events (v) VALUES (1);" >"$WORK/insert.sql"
if [[ $BATCH -eq 0 ]]; then
    per_call=1
    printf '\\set k random(1, %d)\nSELECT sc_incr('"'small'"', :k, 1);\n' "$KEYS" >"$WORK/incr.sql"
    printf '\\set k random(1, %d)\nSELECT sc_incr('"'small_t'"', :k, 1);\n' "$KEYS" >"$WORK/incr_t.sql"
else
    per_call=$BATCH
    printf "SELECT cardinality(sc_incr_batch('small', ARRAY(SELECT (random() * %d)::bigint + 1 FROM generate_series(1, %d)), array_fill(1::bigint, ARRAY[%d])));\n" \
        "$((KEYS - 1))" "$BATCH" "$BATCH" >"$WORK/incr.sql"
fi
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql

# The rate (transactions per second, failed ones excluded) and the committed count of a run.
run() {
    local out
    out=$(as_pg "$PGBIN/pgbench" -h "$WORK" -n -M prepared -c "$CLIENTS" -j 2 -T "$DURATION" \
        -f "$WORK/$1.sql" postgres 2>&1) || { echo "$out" >&2; exit 1; }
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | head -n 1)
    committed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
}

run insert
insert_tps=$tps insert_n=$committed
run incr
incr_tps=$tps incr_n=$committed
# Transactional single keys (a batch of them is one commit of many keys: not this case).
incr_t_tps=0 incr_t_n=0
if [[ $BATCH -eq 0 ]]; then
    run incr_t
    incr_t_tps=$tps incr_t_n=$committed
fi
rows=$(psql_ -c "SELECT count(*) FROM events")
counted() {
    psql_ -c "SELECT sc_rollup() >= 0" -c \
        "SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values WHERE counter = '$1'::slotted_counter::integer" | tail -n 1
}
total=$(counted small)
total_t=$(counted small_t)
stats=$(psql_ -c "SELECT write_throughs || ' write-throughs, ' || flushes || ' flushes' FROM slotted_counter.stats WHERE datname = 'postgres'")

awk -v i="$insert_tps" -v c="$incr_tps" -v t="$incr_t_tps" -v p="$per_call" -v cl="$CLIENTS" \
    -v k="$KEYS" -v m="$MAX_ENTRIES" -v st="$stats" 'BEGIN {
    printf "| workload (%d clients, %d keys, max_entries = %d) | per second | ratio to INSERT |\n|---|---|---|\n", cl, k, m
    printf "| append-only INSERT | %.0f | 1.00 |\n", i
    printf "| buffered sc_incr, buffer too small (increments) | %.0f | %.2f |\n", c * p, c * p / i
    if (t > 0) printf "| transactional sc_incr, buffer too small | %.0f | %.2f |\n", t, t / i
    printf "\n(%s)\n", st }'

status=0
[[ $rows -eq $insert_n ]] || { echo "events has $rows rows, pgbench committed $insert_n" >&2; status=1; }
[[ $total -eq $((incr_n * per_call)) ]] ||
    { echo "the counter is $total, pgbench committed $((incr_n * per_call)) increments" >&2; status=1; }
[[ $total_t -eq $incr_t_n ]] ||
    { echo "the transactional counter is $total_t, pgbench committed $incr_t_n" >&2; status=1; }
exit $status
