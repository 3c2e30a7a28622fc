#!/usr/bin/env bash
# waits.sh: where the time of a commit-bound workload goes, by sampling wait events.
#
# Starts a throwaway server (as bench.sh: temp dir, unix socket, the library preloaded), runs
# each given workload of workloads/ under pgbench, and samples pg_stat_activity every 10 ms
# meanwhile. Prints, per workload, the share of client backends' samples in each wait event
# (CPU: no wait event), which shows what bounds it: for a transactional counter and for an
# append-only INSERT alike, the commit's WAL flush (IO:WALSync, LWLock:WALWrite), not a lock.
#
# Usage: test/bench/waits.sh [CLIENTS] [WORKLOAD.sql ...]
#        (default: 32 clients; insert_append.sql sc_incr_transactional.sql update_hot.sql)
# Environment: DURATION (10 s per workload)
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLIENTS=${1:-32}
shift || true
WORKLOADS=("$@")
[[ ${#WORKLOADS[@]} -gt 0 ]] || WORKLOADS=(insert_append.sql sc_incr_transactional.sql update_hot.sql)
DURATION=${DURATION:-10}

source "$BENCH/../../scripts/pg_server.sh"
throwaway_init sc-waits "max_connections = $((CLIENTS + 10))"
server_start "$WORK"
cp "$BENCH"/setup.sql "$BENCH"/workloads/*.sql "$WORK"/
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql
psql_ -f "$WORK/setup.sql" >/dev/null
psql_ -c "CREATE TABLE waits (workload text, event text)"

for w in "${WORKLOADS[@]}"; do
    as_pg "$PGBIN/pgbench" -n -h "$WORK" -c "$CLIENTS" -j 2 -T "$DURATION" -M prepared \
        -f "$WORK/$w" postgres >"$WORK/pgbench.out" 2>&1 &
    pgbench_pid=$!
    # One sampler session: a loop of samples 10 ms apart, inside the server.
    psql_ -c "DO \$\$ BEGIN
        FOR i IN 1..$((DURATION * 90)) LOOP
          INSERT INTO waits SELECT '$w', COALESCE(wait_event_type || ':' || wait_event, 'CPU')
          FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active'
            AND pid <> pg_backend_pid();
          PERFORM pg_sleep(0.01);
          COMMIT;
        END LOOP; END \$\$" >/dev/null
    wait "$pgbench_pid"
    tps=$(grep -oP 'tps = \K[0-9.]+' "$WORK/pgbench.out" | head -1)
    echo "## $w, $CLIENTS clients: $tps tps"
    psql_ -c "SELECT rpad(event, 28) || lpad(round(100.0 * count(*) / sum(count(*)) OVER (), 1) || ' %', 8)
              FROM waits WHERE workload = '$w' GROUP BY event ORDER BY count(*) DESC LIMIT 8"
done
