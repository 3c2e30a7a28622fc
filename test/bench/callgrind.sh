#!/usr/bin/env bash
# callgrind.sh: instructions per call of the hot path, counted by valgrind's callgrind.
#
# Wall-clock figures on a shared machine drift by 30%; instruction counts do not (the same
# binary and inputs give the same count whatever else the machine does). This starts a
# throwaway server under callgrind (data in a temp dir, unix socket only, the library
# preloaded), collects only inside PortalRun, and runs each in-process workload in a backend of
# its own: SELECT count(f(...)) FROM generate_series(1, N). It prints instructions per row, and
# per row beyond the harness (the same query with abs() in place of the function, over the same
# argument expression), which is the cost of the call itself. Every key a workload touches is
# made resident first (an increment by 0), so that no row pays a first load. With --annotate it
# also prints the top functions of each run.
#
# Usage: test/bench/callgrind.sh [--annotate]     Environment: N (200000 rows per query)
set -euo pipefail

N=${N:-200000}
annotate=0
[[ ${1:-} == --annotate ]] && annotate=1
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/pg_server.sh"
throwaway_init sc-callgrind "autovacuum = off" "fsync = off"
as_pg valgrind --tool=callgrind --collect-atstart=no --toggle-collect=PortalRun \
    --callgrind-out-file="$WORK/callgrind.out.%p" \
    "$PGBIN/postgres" -D "$WORK/data" >"$WORK/server.log" 2>&1 &
for _ in $(seq 1 120); do "$PGBIN/pg_isready" -h "$WORK" -q && break; sleep 1; done
psql_ -c "CREATE EXTENSION slotted_counter" \
      -c "SELECT sc_create('b', 'buffered'), sc_create('t'), sc_create('h', 'buffered', '1 hour')" \
      -c "SELECT sc_create('r', 'buffered', retain => '1 day')" \
      -c "SELECT sc_create('x', 'buffered', key_type => 'text')" >/dev/null

# label | measured expression | the harness it is compared with (same argument expression)
WORKLOADS=(
    "harness: abs()|count(abs(g))|"
    "harness: abs(), (g % 1000)::bigint|count(abs((g % 1000)::bigint))|"
    "buffered sc_incr, one key|count(sc_incr('b', 0, 1))|harness: abs()"
    "buffered sc_incr, 1000 keys|count(sc_incr('b', g % 1000, 1))|harness: abs(), (g % 1000)::bigint"
    "buffered sc_sum, one key|count(sc_sum('b', 0))|harness: abs()"
    "harness: abs(), (g + 1000000)::bigint|count(abs((g + 1000000)::bigint))|"
    "buffered sc_sum, a key not in the buffer (read from key_values)|count(sc_sum('b', g + 1000000))|harness: abs(), (g + 1000000)::bigint"
    "transactional sc_incr, one key|count(sc_incr('t', 0, 1))|harness: abs()"
    "transactional sc_incr, 1000 keys|count(sc_incr('t', g % 1000, 1))|harness: abs(), (g % 1000)::bigint"
    "bucketed (hourly) sc_incr, one key|count(sc_incr('h', 0, 1))|harness: abs()"
    "buffered sc_incr, one key of a counter whose keys expire (retain)|count(sc_incr('r', 0, 1))|harness: abs()"
    "buffered sc_incr, one text key|count(sc_incr('x', '/home', 1))|harness: abs()"
    "harness: length(), concat('/p/', g % 1000)|count(length(concat('/p/', g % 1000)))|"
    "buffered sc_incr, 1000 text keys|count(sc_incr('x', concat('/p/', g % 1000), 1))|harness: length(), concat('/p/', g % 1000)"
    "buffered sc_incr, one bigint key given as text|count(sc_incr('b', '0', 1))|harness: abs()"
    "buffered sc_incr_bounded, one key, bound not reached|count(sc_incr_bounded('b', 0, 1, 0, 1000000000000))|harness: abs()"
    "transactional sc_incr_bounded, one key, bound not reached|count(sc_incr_bounded('t', 0, 1, 0, 1000000000000))|harness: abs()"
)
psql_ -c "SELECT count(sc_incr(c, g, 0)) FROM unnest(ARRAY['b', 't', 'h', 'r']) c, generate_series(0, 999) g" \
      -c "SELECT cardinality(sc_incr_batch_text('x', ARRAY(SELECT '/p/' || g FROM generate_series(0, 999) g) || '/home'::text, array_fill(0::bigint, ARRAY[1001])))" >/dev/null
declare -A PER_ROW=()
printf '| workload | instructions per row | beyond the harness |\n|---|---:|---:|\n'
for w in "${WORKLOADS[@]}"; do
    IFS='|' read -r label expr harness <<<"$w"
    # A first statement of the backend loads its caches; the second is the measured one.
    out=$(psql_ -c "SELECT pg_backend_pid()" \
                -c "SELECT sc_incr('b', 0, 0), sc_incr('h', 0, 0), sc_incr('t', 0, 0), sc_incr('r', 0, 0), sc_incr('x', '/home', 0)" \
                -c "SELECT $expr FROM generate_series(1, $N) g")
    pid=${out%%$'\n'*}
    # The backend writes its profile when it exits.
    f=$WORK/callgrind.out.$pid
    for _ in $(seq 1 120); do grep -q '^summary' "$f" 2>/dev/null && break; sleep 1; done
    total=$(grep -m1 '^summary' "$f" | awk '{print $2}')
    per_row=$(( total / N ))
    PER_ROW[$label]=$per_row
    if [[ -n $harness ]]; then
        printf '| %s | %d | %d |\n' "$label" "$per_row" $(( per_row - PER_ROW[$harness] ))
    else
        printf '| %s | %d | |\n' "$label" "$per_row"
    fi
    if [[ $annotate -eq 1 ]]; then
        callgrind_annotate --inclusive=no "$f" 2>/dev/null | sed -n '/^Ir *file:function/,$p' | sed -n 3,22p >&2
    fi
done
