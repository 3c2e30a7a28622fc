#!/usr/bin/env bash
# The quick tier: what a contributor runs after a change, in about a minute on a warm build
# (CONTRIBUTING.md, "The quick tier"); test/run.sh remains the full command.
#   1. builds the extension with warnings as errors and installs it into the PostgreSQL that
#      PG_CONFIG names (default: the pg_config on PATH), with sudo when that installation is not
#      ours to write; builds the router too (not installed: its tests are the full command's);
#   2. runs pg_regress and the isolation tests against temporary instances with the library
#      preloaded, in a scratch copy of the tree (as postgres when run as root: PostgreSQL refuses
#      root);
#   3. runs the unit tests of the C++ core, without ThreadSanitizer (test/unit/run.sh --quick).
# No apt, no packages, no chroots, no TAP tests, no memory checks. Ends with the line
# "quick: passed" or "quick: FAILED (...)", and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

PG_CONFIG=${PG_CONFIG:-pg_config}
if ! command -v "$PG_CONFIG" >/dev/null 2>&1; then
  echo "quick: no pg_config at '$PG_CONFIG': set PG_CONFIG to the server's pg_config"
  exit 2
fi
PG_CONFIG=$(command -v "$PG_CONFIG")
export PG_CONFIG
jobs=$(nproc 2>/dev/null || echo 2)

# The steps' runner and copy_sources (test/steps.sh).
. "$top/test/steps.sh"

# 1. Build and install. The installation is written as ourselves when we may, else with sudo.
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  for dir in "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)/extension"; do
    [ -w "$dir" ] || sudo=(sudo)
  done
fi
build() {
  make -s -j"$jobs" PG_CONFIG="$PG_CONFIG" WERROR=1 &&
    "${sudo[@]}" make -s install PG_CONFIG="$PG_CONFIG" &&
    make -s -C proxy -j"$jobs" PG_CONFIG="$PG_CONFIG" WERROR=1
}
step "build and install" build
if [ "${#failed[@]}" -ne 0 ]; then
  echo "quick: FAILED (build and install)"
  exit 1
fi

# 2. The database tests, in a scratch copy that the user who runs them owns.
work=$(mktemp -d /tmp/slotted_counter_quick.XXXXXX)
copy_sources "$work"
own_work
check() { "${run[@]}" make -s -C "$work" installcheck PG_CONFIG="$PG_CONFIG" "$@"; }
step "pg_regress" check ISOLATION= TAP_TESTS=
step "isolation" check REGRESS= TAP_TESTS=

# 3. The core's unit tests, in the tree (test/unit/build keeps the warm build).
step "unit" bash "$top/test/unit/run.sh" --quick

if [ "${#failed[@]}" -eq 0 ]; then
  rm -rf "$work"
  echo "quick: passed ($passed steps, $SECONDS s)"
else
  echo "the scratch copy with the test logs is kept in $work"
  echo "quick: FAILED (${failed[*]}; $SECONDS s)"
  exit 1
fi
