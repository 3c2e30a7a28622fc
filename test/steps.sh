# steps.sh: how the test commands (test/run.sh, test/quick.sh) run their steps; sourced by both.
#   step NAME COMMAND...  runs the command; says "=== NAME passed (N s)" or "=== NAME FAILED (N s)",
#                         counts it in $passed or names it in $failed, and after a failure shows
#                         what failed under the scratch copy $work (show_failures).
#   own_work              gives the scratch copy $work to the user the tests run as (postgres
#                         when we are root: PostgreSQL refuses root) and sets $run, the prefix
#                         that runs a command as that user.
#   copy_sources DIR      copies the tree's sources ($top) into DIR, without git's data and
#                         build or test outputs.
# $show_logs=1 (test/run.sh) adds each failed TAP test's assertions and the end of its servers'
# logs to what a failure shows; the quick tier shows pg_regress's diffs only.
passed=0
failed=()
work=${work:-}
show_logs=0

# What failed under $work: the diffs of pg_regress and isolation; with $show_logs, the end of
# their servers' logs, and each TAP log that holds a failed assertion (from the first one on) or
# that died (its end), with the end of the logs of that test's servers.
show_failures() {
  [ -n "$work" ] || return 0
  local diffs log dir test
  diffs=$(find "$work" -name regression.diffs 2>/dev/null | sort)
  [ -z "$diffs" ] || cat $diffs | head -n 200
  [ "$show_logs" -eq 1 ] || return 0
  for log in $diffs; do
    for f in "$(dirname "$log")/log/postmaster.log" "$(dirname "$log")/../log/postmaster.log"; do
      if [ -f "$f" ]; then echo "--- $f"; tail -n 100 "$f"; break; fi
    done
  done
  grep -l -E '^(\[[^]]*\]\([^)]*\) )?not ok|Looks like your test exited' -r \
    --include='regress_log_*' "$work" 2>/dev/null | sort | while read -r log; do
      echo "--- $log"
      if grep -q -E '^(\[[^]]*\]\([^)]*\) )?not ok' "$log"; then
        sed -n '/not ok/,$p' "$log" | head -n 200
      else
        tail -n 100 "$log"
      fi
      dir=$(dirname "$log")
      test=${log##*/regress_log_}
      find "$dir" -maxdepth 1 -name "${test}_*.log" -type f | sort | while read -r f; do
        echo "--- $f"
        tail -n 100 "$f"
      done
    done
}

step() {
  local name=$1; shift
  local start=$SECONDS
  echo "=== $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "=== $name passed ($((SECONDS - start)) s)"
  else
    failed+=("$name")
    echo "=== $name FAILED ($((SECONDS - start)) s)"
    # What it shows never stops the run (set -e is off in a function called before ||).
    show_failures || true
  fi
}

copy_sources() {
  mkdir -p "$1" &&
    tar -C "$top" --exclude=./.git --exclude=./test/unit/build --exclude='*.o' --exclude='*.so' \
      --exclude='*.bc' --exclude=./results --exclude=./tmp_check --exclude=./tmp_check_iso \
      --exclude=./output_iso --exclude=./log -cf - . | tar -C "$1" -xf -
}

own_work() {
  run=()
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres "$work"
    chmod 755 "$work"
    run=(runuser -u postgres --)
  fi
}
