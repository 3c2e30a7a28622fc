#!/usr/bin/env bash
# publish.sh: copy one benchmark run into test/bench/published/<date>/, to be committed: the tables
# (table.md), the chart (chart.png, chart.dat) and the machine description (machine.txt). Raw
# pgbench output and server logs stay in test/bench/out/ (not committed).
#
# Usage: test/bench/publish.sh [RUN_DIR] [--force]
#   RUN_DIR  a directory bench.sh wrote (default: the newest one under test/bench/out/)
#   --force  replace an existing published/<date>/ directory
# <date> is the run's UTC date (YYYY-MM-DD); a second run published the same day goes to
# published/<date>-2/, and so on, unless --force.
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { printf 'publish.sh: %s\n' "$*" >&2; exit 1; }

run='' force=0
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option \"$arg\" (try --help)" ;;
        *) [[ -z $run ]] || die "one run directory only"; run=$arg ;;
    esac
done

if [[ -z $run ]]; then
    run=$(find "$BENCH/out" -mindepth 1 -maxdepth 1 -type d -name '20*' 2>/dev/null | sort | tail -n 1)
    [[ -n $run ]] || die "no run under $BENCH/out; run test/bench/bench.sh first"
fi
[[ -d $run ]] || die "no such directory: $run"
run=$(cd "$run" && pwd)
[[ -f $run/table.md ]] || die "$run has no table.md (did bench.sh finish?)"
[[ -f $run/machine.txt ]] || die "$run has no machine.txt"

# the run's date: from machine.txt ("date: 2026-11-21 10:00:00 UTC"), else from the directory name
day=$(sed -n 's/^date: \([0-9-]\{10\}\).*/\1/p' "$run/machine.txt")
if [[ -z $day ]]; then
    base=$(basename "$run")
    [[ $base =~ ^([0-9]{4})([0-9]{2})([0-9]{2})T ]] || die "cannot tell the date of $run"
    day=${BASH_REMATCH[1]}-${BASH_REMATCH[2]}-${BASH_REMATCH[3]}
fi

dest=$BENCH/published/$day
if [[ -e $dest && $force -eq 0 ]]; then
    n=2
    while [[ -e $BENCH/published/$day-$n ]]; do n=$((n + 1)); done
    dest=$BENCH/published/$day-$n
fi
rm -rf "$dest"
mkdir -p "$dest"

cp "$run/table.md" "$run/machine.txt" "$dest/"
for f in chart.png chart.dat; do
    if [[ -f $run/$f ]]; then cp "$run/$f" "$dest/"; else echo "publish.sh: $run has no $f" >&2; fi
done
if grep -q MISMATCH "$dest/table.md"; then
    echo "publish.sh: warning: this run has a count mismatch (see Exactness in table.md)" >&2
fi
echo "published $run"
echo "       to $dest:"
ls -l "$dest"
