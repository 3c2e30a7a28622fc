#!/usr/bin/env bash
# proxy.sh: the router (slotted_counter_proxy) against direct calls, in one invocation on one
# server, and a model of how throughput grows with data nodes, measured rather than assumed.
#
# One throwaway server holds the data nodes (databases node0..node2, slotted_counter) and three
# routers (databases router1 over node0 alone, router2 over node0 and node1, router3 over all
# three), so every run shares the same cores: the throughputs are comparable with each other, not
# with a real cluster. Rows (pgbench -M prepared, DURATION seconds each, at each of CLIENTS; each
# row run RUNS times and its best run kept, the runs of a client count interleaved row by row):
#   select1        SELECT 1 on a data node (the server's ceiling)
#   direct         buffered sc_incr of 10,000 uniform keys, straight to node0
#   router1        the same through a router with one data node
#   router2        the same through a router with two data nodes
#   router3        the same through a router with three data nodes
#   spread3        buffered sc_incr of one spread hot key through router3
#   sum1           sc_sum of the same keys through router1 (the router's own routing, as sc_incr)
#   plproxy1       the same read as PL/Proxy routes it (sc_sum with an open range, which every
#                  call but sc_incr and sc_sum shares)
#   inside1        the keys of direct through a router installed in node0's own database (schema
#                  "router") over node0 alone: every key in-process, no hop
#   inside3        the same through a router in node2's database over all three nodes: a third of
#                  the keys in-process, two thirds one hop away
# In the inside rows the router is the node's own backend: its CPU shows as the node's.
# For each run it also samples the CPU time of every server process by database (router backends
# against the data nodes' backends that serve them), which gives the router's and a node's CPU
# per call (a router backend's connections to the nodes are opened in the run and counted in it).
# The model (at the end of this script): CPU per call on routers and nodes, and what N nodes
# serve, with routers apart and with every node a router.
# Exactness: after every run each counter must equal the calls pgbench reports, else exit 1.
#
# Environment: DURATION (10), CLIENTS ("8 32"), RUNS (2), JOBS (2),
# OUT (test/bench/out/proxy-<UTC stamp>).
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)
# shellcheck source=../../scripts/pg_server.sh
source "$ROOT/scripts/pg_server.sh"

DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-"8 32"}
RUNS=${RUNS:-2}
JOBS=${JOBS:-2}
OUT=${OUT:-$BENCH/out/proxy-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

throwaway_init sc_proxy_bench "max_connections = 200" "slotted_counter.max_entries = 200000"
server_start "$WORK"
db() { as_pg "$PGBIN/psql" -h "$WORK" -d "$1" -Atq -v ON_ERROR_STOP=1 -c "$2"; }

for n in 0 1 2; do
    db postgres "CREATE DATABASE node$n"
    db "node$n" "CREATE EXTENSION slotted_counter"
done
node() { printf "'host=%s dbname=node%s'" "$WORK" "$1"; }
for r in 1 2 3; do
    db postgres "CREATE DATABASE router$r"
    db "router$r" "CREATE EXTENSION slotted_counter_proxy CASCADE"
done
db router1 "SELECT sc_proxy_configure(ARRAY[$(node 0)])"
db router2 "SELECT sc_proxy_configure(ARRAY[$(node 0), $(node 1)])"
db router3 "SELECT sc_proxy_configure(ARRAY[$(node 0), $(node 1), $(node 2)])"
# Each router's counters exist on the nodes it routes to; names apart so the runs do not mix.
db router1 "SELECT sc_create('r1', 'buffered')" >/dev/null
db router2 "SELECT sc_create('r2', 'buffered')" >/dev/null
db router3 "SELECT sc_create('r3', 'buffered'), sc_create('spread', 'buffered', spread => true)" >/dev/null
db node0 "SELECT sc_create('direct', 'buffered')" >/dev/null
inside() { db "$1" "CREATE SCHEMA router; CREATE EXTENSION slotted_counter_proxy SCHEMA router CASCADE"; }
inside node0
db node0 "SELECT router.sc_proxy_configure(ARRAY[$(node 0)])"
db node0 "SELECT router.sc_create('i1', 'buffered')" >/dev/null
inside node2
db node2 "SELECT router.sc_proxy_configure(ARRAY[$(node 0), $(node 1), $(node 2)])"
db node2 "SELECT router.sc_create('i3', 'buffered')" >/dev/null

cat >"$OUT/select1.sql" <<'EOF'
SELECT 1;
EOF
# The key typed bigint: under -M prepared an untyped :k would take the text form
# (docs/reference/functions.md: "Keys as text"), which reads it as a bigint on the router and
# again on the node.
for name in direct r1 r2 r3; do
    printf '\\set k random(1, 10000)\nSELECT sc_incr(%s, :k::bigint);\n' "'$name'" >"$OUT/$name.sql"
done
printf "SELECT sc_incr('spread');\n" >"$OUT/spread.sql"
printf '\\set k random(1, 10000)\nSELECT sc_sum(%s, :k::bigint);\n' "'r1'" >"$OUT/sum1.sql"
printf '\\set k random(1, 10000)\nSELECT sc_sum(%s, :k::bigint, NULL, NULL);\n' "'r1'" \
    >"$OUT/plproxy1.sql"
for name in i1 i3; do
    printf '\\set k random(1, 10000)\nSELECT router.sc_incr(%s, :k::bigint);\n' "'$name'" >"$OUT/$name.sql"
done

# run NAME DB SCRIPT CLIENTS RUN: "calls throughput" (calls/s) on stdout; CPU per call (µs) of
# router and node processes in $OUT/NAME-CLIENTS-RUN.cpu.
run() {
    local name=$1 database=$2 script=$3 clients=$4 tag="$1-$4-$5"
    local samples="$OUT/$tag.samples"
    : >"$samples"
    as_pg "$PGBIN/pgbench" -h "$WORK" -n -M prepared -c "$clients" -j "$JOBS" -T "$DURATION" \
        -f "$script" "$database" >"$OUT/$tag.out" 2>&1 &
    local bench=$!
    python3 "$BENCH/cpu_by_db.py" "$bench" >"$samples"
    wait "$bench" || { cat "$OUT/$tag.out" >&2; exit 1; }
    local tx tps
    tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/$tag.out")
    tps=$(awk -v tx="$tx" -v d="$DURATION" 'BEGIN { printf "%.0f", tx / d }')
    awk -v tx="$tx" '
        $1 ~ /^router/ { r += $2 } $1 ~ /^node/ { n += $2 }
        END { printf "%.1f %.1f\n", r / tx * 1e6, n / tx * 1e6 }' "$samples" >"$OUT/$tag.cpu"
    echo "$tx $tps"
}

check() {
    local what=$1 got=$2 want=$3
    if [[ $got != "$want" ]]; then
        echo "proxy.sh: $what: $got, expected $want" >&2
        exit 1
    fi
}

{
    echo "| clients | row | calls/s (best of $RUNS) | each run | ratio to direct | router CPU/call (µs) | node CPU/call (µs) |"
    echo "| ---: | --- | ---: | --- | ---: | ---: | ---: |"
} >"$OUT/table.md"
# Each row's database and script (whose name is also its counter's, totalled over every run).
declare -A row_db=([select1]=node0 [direct]=node0 [router1]=router1 [router2]=router2
                   [router3]=router3 [spread3]=router3 [sum1]=router1 [plproxy1]=router1
                   [inside1]=node0 [inside3]=node2)
declare -A row_script=([select1]=select1 [direct]=direct [router1]=r1 [router2]=r2 [router3]=r3
                       [spread3]=spread [sum1]=sum1 [plproxy1]=plproxy1 [inside1]=i1 [inside3]=i3)
rows="select1 direct router1 router2 router3 spread3 sum1 plproxy1 inside1 inside3"
declare -A total=([direct]=0 [r1]=0 [r2]=0 [r3]=0 [spread]=0 [i1]=0 [i3]=0)
for c in $CLIENTS; do
    declare -A best=() runs=() best_run=()
    for ((i = 1; i <= RUNS; i++)); do
        for row in $rows; do
            read -r tx tps < <(run "$row" "${row_db[$row]}" "$OUT/${row_script[$row]}.sql" "$c" "$i")
            [[ -v total[${row_script[$row]}] ]] &&
                total[${row_script[$row]}]=$((total[${row_script[$row]}] + tx))
            runs[$row]+="${runs[$row]:+, }$tps"
            if ((tps > ${best[$row]:-0})); then best[$row]=$tps; best_run[$row]=$i; fi
        done
    done
    for row in $rows; do
        read -r rc nc <"$OUT/$row-$c-${best_run[$row]}.cpu"
        printf '| %s | %s | %s | %s | %.2f | %s | %s |\n' "$c" "$row" "${best[$row]}" "${runs[$row]}" \
            "$(awk -v a="${best[$row]}" -v b="${best[direct]}" 'BEGIN { print a / b }')" "$rc" "$nc" \
            >>"$OUT/table.md"
    done
    for row in $rows; do cp "$OUT/$row-$c-${best_run[$row]}.cpu" "$OUT/$row-$c.cpu"; done
    unset best runs best_run
done

keys="ARRAY(SELECT generate_series(1, 10000)::bigint)"
check "direct" "$(db node0 "SELECT sc_sum_keys('direct', $keys)")" "${total[direct]}"
check "router1" "$(db router1 "SELECT sc_sum_keys('r1', $keys)")" "${total[r1]}"
check "router2" "$(db router2 "SELECT sc_sum_keys('r2', $keys)")" "${total[r2]}"
check "router3" "$(db router3 "SELECT sc_sum_keys('r3', $keys)")" "${total[r3]}"
check "spread" "$(db router3 "SELECT sc_sum('spread')")" "${total[spread]}"
check "inside1" "$(db node0 "SELECT router.sc_sum_keys('i1', $keys)")" "${total[i1]}"
check "inside3" "$(db node2 "SELECT router.sc_sum_keys('i3', $keys)")" "${total[i3]}"
shares=""
for n in 0 1 2; do
    shares+="node$n $(db "node$n" "SELECT sc_sum('spread')") "
done

# The model, from the smallest client count: the more clients, the more of the two cores goes to
# switching between the kinds of processes that share them here.
#   Routers apart (router3): a data node of C cores serves C / node_cpu calls/s; N nodes serve N
#   times that, behind routers with N * calls * router_cpu of CPU between them.
#   Every node a router (inside1, router1): a node's own keys cost local_cpu (inside1: the whole
#   call, in one backend), another node's keys cost a hop, router_cpu + node_cpu (router1); with
#   N nodes a call is local one time in N, so N nodes of C cores serve
#   N * C / (local_cpu / N + hop_cpu * (N - 1) / N) calls/s.
last=${CLIENTS%% *}
read -r rc nc <"$OUT/router3-$last.cpu"
read -r hop_r hop_n <"$OUT/router1-$last.cpu"
read -r _ local_cpu <"$OUT/inside1-$last.cpu"
cores=$(nproc)
{
    echo
    echo "Spread hot key, each node's share: $shares(total ${total[spread]})"
    echo
    echo "Model from $last clients, on $cores cores per server:"
    echo "routers apart (router3): router CPU $rc µs/call, data node CPU $nc µs/call;"
    echo "every node a router: a node's own key $local_cpu µs/call (inside1), another's $hop_r + $hop_n µs/call (router1)."
    echo
    echo "| data nodes | routers apart: calls/s | router cores needed | every node a router: calls/s |"
    echo "| ---: | ---: | ---: | ---: |"
    for n in 1 2 3 4 8 16; do
        awk -v n="$n" -v c="$cores" -v nc="$nc" -v rc="$rc" -v l="$local_cpu" \
            -v h="$(awk -v a="$hop_r" -v b="$hop_n" 'BEGIN { print a + b }')" 'BEGIN {
            t = n * c / nc * 1e6; r = t * rc / 1e6
            e = n * c / (l / n + h * (n - 1) / n) * 1e6
            printf "| %d | %.0f | %.1f | %.0f |\n", n, t, r, e }'
    done
} >>"$OUT/table.md"
cat "$OUT/table.md"
echo "proxy.sh: exact (every counter equals the calls pgbench reported); output in $OUT" >&2
