#!/usr/bin/env bash
# flood.sh: how much one database's dirty flood slows another database's new keys. Database
# "flood" keeps more keys dirty than the buffer holds (FLOOD_CLIENTS sessions calling
# sc_incr_batch of BATCH random keys out of FLOOD_KEYS, buffered); database "quiet" commits
# COMMITS transactions, each counting one new key of a transactional counter. The quiet
# database's run is timed alone, then during the flood; and, during the flood too, the same
# commits on keys already resident in the buffer, which share the machine (CPU, WAL) with the
# flood but need no entry: their time is what the flood costs without taking the buffer. Prints
# the three times and the ratios (the target: new keys during the flood at most 2 x alone).
# Exits 1 if a quiet counter is not exact.
#
# Environment: MAX_ENTRIES (10000), FLOOD_KEYS (12000), BATCH (3000), FLOOD_CLIENTS (2),
#   COMMITS (200)
set -euo pipefail
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/pg_server.sh
. "$BENCH/../../scripts/pg_server.sh"

MAX_ENTRIES=${MAX_ENTRIES:-10000}
FLOOD_KEYS=${FLOOD_KEYS:-12000}
BATCH=${BATCH:-3000}
FLOOD_CLIENTS=${FLOOD_CLIENTS:-2}
COMMITS=${COMMITS:-200}

throwaway_init sc-flood "slotted_counter.max_entries = $MAX_ENTRIES" "max_connections = 40"
server_start "$WORK"
psql_ -c "CREATE DATABASE flood" -c "CREATE DATABASE quiet" >/dev/null
as_pg "$PGBIN/psql" -h "$WORK" -d flood -Atq -v ON_ERROR_STOP=1 \
    -c "CREATE EXTENSION slotted_counter" -c "SELECT sc_create('f', 'buffered')" >/dev/null
as_pg "$PGBIN/psql" -h "$WORK" -d quiet -Atq -v ON_ERROR_STOP=1 \
    -c "CREATE EXTENSION slotted_counter" -c "SELECT sc_create('alone')" \
    -c "SELECT sc_create('flooded')" -c "SELECT sc_create('resident')" >/dev/null

printf "SELECT cardinality(sc_incr_batch('f', ARRAY(SELECT (random() * %d)::bigint + 1 FROM generate_series(1, %d)), array_fill(1::bigint, ARRAY[%d])));\n" \
    "$((FLOOD_KEYS - 1))" "$BATCH" "$BATCH" >"$WORK/flood.sql"
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"/*.sql

# COMMITS transactions of one new key each, one after the other; prints the seconds they took.
quiet_run() {
    local counter=$1
    as_pg "$PGBIN/psql" -h "$WORK" -d quiet -Atq -v ON_ERROR_STOP=1 <<SQL
CREATE TEMP TABLE t (at timestamptz);
INSERT INTO t VALUES (clock_timestamp());
DO \$\$
BEGIN
  FOR i IN 1..$COMMITS LOOP
    PERFORM sc_incr('$counter', i);
    COMMIT;
  END LOOP;
END
\$\$;
SELECT round(extract(epoch FROM clock_timestamp() - at)::numeric, 3) FROM t;
SQL
}

alone=$(quiet_run alone)
# The resident keys: counted once and flushed, so that they are clean entries of quiet's own.
quiet_run resident >/dev/null
as_pg "$PGBIN/psql" -h "$WORK" -d quiet -Atq -c "SELECT sc_rollup()" >/dev/null
as_pg "$PGBIN/pgbench" -h "$WORK" -n -c "$FLOOD_CLIENTS" -j 1 -T 600 -f "$WORK/flood.sql" flood \
    >"$WORK/flood.log" 2>&1 &
flood_pid=$!
# Wait until the flood fills the buffer with dirty entries of its own.
for _ in $(seq 1 600); do
    dirty=$(psql_ -c "SELECT coalesce(sum(dirty_entries), 0) FROM slotted_counter.stats WHERE datname = 'flood'" 2>/dev/null || echo 0)
    [[ $dirty -ge $((MAX_ENTRIES / 2)) ]] && break
    sleep 0.1
done
flooded=$(quiet_run flooded)
resident=$(quiet_run resident)
kill "$flood_pid" 2>/dev/null || true
wait "$flood_pid" 2>/dev/null || true

keys="ARRAY(SELECT generate_series(1, $COMMITS))::bigint[]"
exact=$(as_pg "$PGBIN/psql" -h "$WORK" -d quiet -Atq -c \
    "SELECT sc_sum_keys('alone', $keys) = $COMMITS AND sc_sum_keys('flooded', $keys) = $COMMITS AND sc_sum_keys('resident', $keys) = 2 * $COMMITS")
awk -v a="$alone" -v f="$flooded" -v r="$resident" -v n="$COMMITS" -v m="$MAX_ENTRIES" \
    -v k="$FLOOD_KEYS" -v b="$BATCH" -v c="$FLOOD_CLIENTS" 'BEGIN {
    printf "| %d transactional commits in database quiet (max_entries = %d; flood: %d keys kept dirty by %d sessions, batches of %d) | seconds | ratio |\n|---|---|---|\n", n, m, k, c, b
    printf "| new keys, alone | %.3f | 1 |\n", a
    printf "| new keys, during the flood | %.3f | %.2f |\n", f, f / a
    printf "| resident keys, during the flood (the machine shared, the buffer not needed) | %.3f | %.2f |\n", r, r / a
}'
if [[ $exact != t ]]; then
    echo "a counter of database quiet is not exact" >&2
    exit 1
fi
