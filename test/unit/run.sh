#!/usr/bin/env bash
# Builds and runs the unit tests of the pure C++ core (src/core/, every file of it):
#   1. a normal build in test/unit/build/normal, run with ctest;
#   2. the threaded tests again, built with -fsanitize=thread in test/unit/build/tsan.
# With --quick as the first argument (test/quick.sh), step 1 alone, its two test programs run
# directly (one process each, where ctest starts one per test), and no ThreadSanitizer.
# Exits non-zero on any failure. Extra arguments are passed to cmake at configure time (e.g.
# -DSC_SRC_DIR=/some/copy/of/src to test another version of the core; the default is reset on
# every run, since the build directories keep their cache).
set -euo pipefail
quick=0
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$here/build"
jobs="$(nproc 2>/dev/null || echo 2)"

echo "== normal build =="
src_default=(-DSC_SRC_DIR="$(cd "$here/../../src" && pwd)")
cmake -S "$here" -B "$build/normal" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${src_default[@]}" "$@" >/dev/null
cmake --build "$build/normal" -j "$jobs"
if [ "$quick" -eq 1 ]; then
  echo "== unit tests =="
  "$build/normal/sc_unit_tests" --gtest_brief=1
  echo "== threaded tests =="
  "$build/normal/sc_thread_tests" --gtest_brief=1
  echo "== all unit tests passed (without ThreadSanitizer) =="
  exit 0
fi
echo "== ctest =="
# Serial: the threaded tests already use every core.
(cd "$build/normal" && ctest --output-on-failure)

echo "== ThreadSanitizer build =="
cmake -S "$here" -B "$build/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_TSAN=ON "${src_default[@]}" "$@" \
  >/dev/null
cmake --build "$build/tsan" -j "$jobs" --target sc_thread_tests

bin="$build/tsan/sc_thread_tests"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 exitcode=66 second_deadlock_stack=1}"
# TSan can fail to start when the kernel randomises mmap too much ("unexpected memory mapping");
# then run it with address-space randomisation off.
runner=()
if ! "$bin" --gtest_list_tests >/dev/null 2>"$build/tsan/probe.err"; then
  echo "ThreadSanitizer did not start normally:"
  sed -n 1,5p "$build/tsan/probe.err"
  echo "retrying with setarch -R (ASLR off)"
  runner=(setarch "$(uname -m)" -R)
  "${runner[@]}" "$bin" --gtest_list_tests >/dev/null
fi
echo "== threaded tests under ThreadSanitizer =="
# At half the operations of the normal run (SC_UNIT_SCALE, counter_table_threads_test.cpp): a
# race shows in the first thousands of them, and under TSan the server model's runs take a
# minute each at full scale on a quiet machine.
SC_UNIT_SCALE="${SC_UNIT_SCALE:-0.5}" "${runner[@]}" "$bin" --gtest_brief=0
echo "== all unit tests passed =="
