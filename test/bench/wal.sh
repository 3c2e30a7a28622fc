#!/usr/bin/env bash
# wal.sh: the WAL each transaction writes, counted by pg_waldump: an append-only INSERT against a
# transactional sc_incr, and what the fold of those increments writes afterwards.
#
# Starts a throwaway server (as bench.sh), with full_page_writes off (so that a record's size does
# not depend on where the last checkpoint fell) and flush_interval 0 (no fold inside the counted
# window). Runs each workload under pgbench (4 clients, TRANSACTIONS each, after a warm-up of as
# many), reads the WAL between the insert positions before and after with pg_waldump
# --stats=record, and prints the records and bytes per transaction. Then it lets the flusher fold
# every delta (flush_interval 1 s until deltas is empty) and counts that window the same way. The
# 10,000 keys of uniform_tx have their rows before anything is counted, so the fold updates rows,
# as it does in a steady state.
#
# Usage: test/bench/wal.sh [WORKLOAD.sql ...]
#        (default: insert_append.sql sc_incr_transactional_uniform.sql)
# Environment: TRANSACTIONS (500 per client)
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORKLOADS=("$@")
[[ ${#WORKLOADS[@]} -gt 0 ]] || WORKLOADS=(insert_append.sql sc_incr_transactional_uniform.sql)
TRANSACTIONS=${TRANSACTIONS:-500}
CLIENTS=4

source "$BENCH/../../scripts/pg_server.sh"
throwaway_init sc-wal "full_page_writes = off" "slotted_counter.flush_interval = 0"
server_start "$WORK"
cp "$BENCH"/setup.sql "$BENCH"/workloads/*.sql "$WORK"/
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql
psql_ -f "$WORK/setup.sql" >/dev/null

fold() {
    psql_ -c "ALTER SYSTEM SET slotted_counter.flush_interval = '1s'" -c "SELECT pg_reload_conf()"
    until [[ $(psql_ -c "SELECT count(*) FROM slotted_counter.deltas") == 0 ]]; do sleep 0.5; done
    sleep 2  # the fold's rows are gone with its commit; let its cleanup finish too
    psql_ -c "ALTER SYSTEM SET slotted_counter.flush_interval = 0" -c "SELECT pg_reload_conf()"
}
psql_ -c "SELECT count(sc_incr('uniform_tx', g, 1)) FROM generate_series(1, 10000) g" >/dev/null
fold >/dev/null

lsn() { psql_ -c "SELECT pg_current_wal_insert_lsn()"; }

# Prints pg_waldump's totals between two positions, per transaction of N.
per_transaction() {
    local from=$1 to=$2 n=$3
    as_pg "$PGBIN/pg_waldump" -p "$WORK/data/pg_wal" -s "$from" -e "$to" --stats=record \
        >"$WORK/waldump.out" 2>/dev/null || true
    grep -E '^[A-Za-z0-9]+/[A-Z_+]+ +[1-9]' "$WORK/waldump.out" |
        awk -v n="$n" '{ printf "  %-26s %8.3f records %8.1f bytes\n", $1, $2 / n, $5 / n }'
    awk -v n="$n" '/^Total/ {
        printf "  %-26s %8.3f records %8.1f bytes\n", "total", $2 / n, $3 / n }' "$WORK/waldump.out"
}

for w in "${WORKLOADS[@]}"; do
    run() { as_pg "$PGBIN/pgbench" -n -h "$WORK" -c "$CLIENTS" -t "$TRANSACTIONS" -M prepared \
                -f "$WORK/$w" postgres >/dev/null; }
    run
    psql_ -c "CHECKPOINT"
    from=$(lsn)
    run
    to=$(lsn)
    echo "## $w: per transaction, over $((CLIENTS * TRANSACTIONS))"
    per_transaction "$from" "$to" $((CLIENTS * TRANSACTIONS))
done

from=$(lsn)
increments=$(psql_ -c "SELECT count(*) FROM slotted_counter.deltas")
fold >/dev/null
to=$(lsn)
echo "## the fold of those $increments deltas, per delta"
per_transaction "$from" "$to" "$increments"
