# The memory checks of test/run.sh, which sources this file: the suites "cassert" and "valgrind".
# Uses run.sh's $top (the tree), $work (its scratch copy), copy_sources and run (the command prefix
# that runs as the unprivileged user).
#
#   cassert   pg_regress and every isolation test against an assert-enabled PostgreSQL 15
#             (test/memcheck/build_cassert.sh, cached in /var/cache/slotted_counter), with the
#             expected output of the normal build, then the TAP tests that read under load;
#             any server log with an assertion failure (TRAP) or a process killed by SIGSEGV,
#             SIGABRT, SIGBUS, SIGILL or SIGFPE fails it too.
#   valgrind  the pg_regress tests that read at scale and through SPI, with every server process
#             under Valgrind memcheck (PostgreSQL's src/tools/valgrind.supp); fails on any diff and
#             on any error Valgrind reports, whatever the process.
#
# Both use a copy of the cached installation in $work/memcheck, with the extension built against
# its headers in a copy of the tree of its own (objects built for the normal server would not do)
# and installed there: the cache is never written but by build_cassert.sh.

# The TAP tests run against the assert-enabled server: those that read while clients write, the
# role commands, dumps and restores that reach the counters' guards through core's API, and the
# tests of the fault points that only an assert-enabled build has (src/faults.hpp).
memcheck_tap="test/t/003_small_buffer.pl test/t/005_table_lock.pl test/t/012_buckets.pl \
test/t/016_unprivileged_load.pl test/t/029_batch_interrupted.pl test/t/043_roles.pl test/t/046_expiry.pl \
test/t/047_rank_index.pl test/t/048_text_keys.pl test/t/051_sums.pl test/t/060_flush_fault.pl \
test/t/074_distinct.pl"
# The pg_regress tests run under Valgrind (all of them would take about twice as long): every
# test of reads (sc_top at scale, sc_sum, sc_sum_keys, buckets), of batches, of writes that go
# through SPI (transactional counters, bounds, sc_incr_once, privileges), and of distinct
# counters (sketches copied, unioned and stored through SPI). Not buffer and
# attach, which wait for the periodic flusher that valgrind.conf turns off.
# In two streams at once, each a server of its own (the two cores each run one Valgrind): the
# longest test, text_keys (about 85 s of about 210), with batch, beside all the others.
memcheck_valgrind_streams=("text_keys batch distinct"
  "type api errors transactional set bounded retention expiry once top rank_total top_scale buckets \
privileges placeholders")

memcheck=$work/memcheck
memcheck_ready=

# Builds (or finds) the server, copies it twice (the second runs under Valgrind), and builds
# and installs the extension into the first copy before the second is made.
memcheck_prepare() {
  local cached
  cached=$(bash "$top/test/memcheck/build_cassert.sh") || return 1
  mkdir -p "$memcheck/tree" "$memcheck/valgrind-logs" || return 1
  cp -a "$cached" "$memcheck/pg" || return 1
  copy_sources "$memcheck/tree" || return 1
  make -s -C "$memcheck/tree" -j2 PG_CONFIG="$memcheck/pg/bin/pg_config" WERROR=1 &&
    make -s -C "$memcheck/tree" install PG_CONFIG="$memcheck/pg/bin/pg_config" || return 1
  cp -a "$memcheck/pg" "$memcheck/pg-valgrind" || return 1
  local bin=$memcheck/pg-valgrind/bin
  mv "$bin/postgres" "$bin/postgres.real" || return 1
  # initdb's bootstrap and single-user runs and the version checks of pg_ctl and initdb are
  # PostgreSQL's alone: run them directly, and everything else (the postmaster, so every backend
  # and worker it forks) under Valgrind. An error makes the process exit with 99, which the
  # postmaster takes for a crash, and is written to a log per process.
  cat >"$bin/postgres" <<EOF
#!/bin/sh
case "\$1" in
  --boot|--single|-V|--version|-C|--describe-config) exec "$bin/postgres.real" "\$@" ;;
esac
exec valgrind --quiet --trace-children=yes --track-origins=no --read-var-info=no --leak-check=no \\
  --num-callers=30 --suppressions="$memcheck/pg-valgrind/share/postgresql/valgrind.supp" \\
  --error-exitcode=99 --log-file="$memcheck/valgrind-logs/%p.log" "$bin/postgres.real" "\$@"
EOF
  chmod 755 "$bin/postgres" || return 1
  if [ "${#run[@]}" -gt 0 ]; then chown -R postgres "$memcheck" || return 1; fi
  memcheck_ready=1
}

# installcheck in the tree copy against the installation $1.
memcheck_check() {
  local pg=$1
  shift
  # The assert-enabled build has no postgresql-hll (test/t/074_distinct.pl skips its part).
  "${run[@]}" env PATH="$pg/bin:$PATH" SC_NO_HLL=1 make -s -C "$memcheck/tree" installcheck \
    PG_CONFIG="$pg/bin/pg_config" "$@"
}

# Assertion failures and crashes in every server log under $1.
memcheck_server_logs() {
  local found
  found=$(find "$1" -name '*.log' -path '*log*' -type f -print0 |
    xargs -0 -r grep -E -H 'TRAP: |terminated by signal (4|6|7|8|11)\b' | head -50)
  [ -z "$found" ] && return 0
  echo "assertion failures or crashes in the server logs:"
  echo "$found"
  return 1
}

# Stops, at once, any server of the tree copy still running: pg_regress gives up on a server
# that does not stop (under Valgrind a fast shutdown that came during crash recovery once never
# finished), and the run must not leave one behind.
# (A stale postmaster.pid is left alone: its pid may be another process's by now.)
memcheck_stop_servers() {
  local pid_file data pid
  find "$memcheck/tree" -name postmaster.pid -print | while read -r pid_file; do
    data=$(dirname "$pid_file")
    pid=$(head -n 1 "$pid_file")
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$data"; then
      echo "stopping the server that was left running in $data"
      "${run[@]}" "$memcheck/pg/bin/pg_ctl" -D "$data" stop -m immediate -t 60 || true
    fi
  done
}

memcheck_cassert() {
  memcheck_prepare || return 1
  local failed=0
  memcheck_check "$memcheck/pg" ISOLATION= TAP_TESTS= || failed=1
  memcheck_stop_servers
  memcheck_check "$memcheck/pg" REGRESS= TAP_TESTS= || failed=1
  memcheck_stop_servers
  memcheck_check "$memcheck/pg" REGRESS= ISOLATION= PROVE_TESTS="$memcheck_tap" PROVE_FLAGS=-j2 || failed=1
  memcheck_stop_servers
  memcheck_server_logs "$memcheck/tree" || failed=1
  return "$failed"
}

memcheck_valgrind() {
  if [ -z "$memcheck_ready" ]; then
    echo "no assert-enabled installation (see the cassert suite)"
    return 1
  fi
  local failed=0 i pids=()
  # The flusher runs on sc_rollup() only (valgrind.conf): under Valgrind a periodic flush
  # between two statements would change what they show. The extension is created by pg_regress,
  # as setup.sql (which shows the settings) is not run. Each stream has its own instance, output
  # folder and port (two pg_regress starting at once could both find the default port free).
  for i in "${!memcheck_valgrind_streams[@]}"; do
    memcheck_check "$memcheck/pg-valgrind" ISOLATION= TAP_TESTS= \
      REGRESS="${memcheck_valgrind_streams[$i]}" \
      REGRESS_OPTS="--inputdir=test --temp-instance=tmp_check_valgrind_$i --port=$((57840 + i)) \
--temp-config=test/memcheck/valgrind.conf --load-extension=slotted_counter --outputdir=output_valgrind_$i" \
      >"$memcheck/valgrind-stream-$i.out" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=1
    cat "$memcheck/valgrind-stream-$i.out"
  done
  memcheck_stop_servers
  for i in "${!memcheck_valgrind_streams[@]}"; do
    memcheck_server_logs "$memcheck/tree/output_valgrind_$i" || failed=1
  done
  local reports
  reports=$(find "$memcheck/valgrind-logs" -type f -size +0 | sort)
  if [ -n "$reports" ]; then
    echo "Valgrind reported errors in $(echo "$reports" | wc -l) processes:"
    local f
    for f in $reports; do
      echo "--- $f"
      head -n 60 "$f"
    done
    failed=1
  fi
  return "$failed"
}
