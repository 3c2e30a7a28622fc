#!/usr/bin/env bash
# Runs every test of slotted_counter: installs what it needs (apt), builds the Debian packages of
# the extension and the router for PostgreSQL 15 with warnings as errors and installs them
# (test/versions/packages.sh), then runs, as an unprivileged user (PostgreSQL refuses root) in a
# scratch copy of the tree: pg_regress, the isolation tests and the TAP tests (each against
# temporary instances with the library preloaded), and the unit tests of the C++ core.
# Then the client suite (test/clients/): psycopg, node-postgres, PgJDBC, asyncpg, pgx, psycopg2,
# SQLAlchemy, Django, postgres.js, ruby-pg, ActiveRecord, pgbouncer and Prometheus'
# postgres_exporter against a temporary instance.
# Then the memory checks (test/memcheck/): the same pg_regress, isolation and load-reading TAP
# tests against an assert-enabled PostgreSQL 15 that test/memcheck/build_cassert.sh builds once
# (2 to 7 minutes on 2 cores) from Debian's source into the cache /var/cache/slotted_counter
# (SC_CASSERT_CACHE overrides it), and a subset of pg_regress with that server under Valgrind.
# Then PostgreSQL 17 and 18 (test/versions/): in a Debian chroot each (trixie, sid), made on first
# use (about a minute each) and cached in /var/cache/slotted_counter (SC_CACHE overrides it), the
# packages built with warnings as errors and installed, then pg_regress, the isolation tests and
# the essential TAP tests against them.
# The packages of the last run are left in /var/cache/slotted_counter/packages/NN.
# Works as root or as a sudo user, with no standard input. Exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
packages=(build-essential postgresql-15 postgresql-server-dev-15
          libipc-run-perl cmake libgtest-dev
          python3-psycopg default-jdk-headless libpostgresql-jdbc-java pgbouncer
          python3-asyncpg python3-psycopg2 python3-sqlalchemy python3-greenlet python3-django
          golang-go golang-github-jackc-pgx-v4-dev ruby-pg ruby-activerecord
          prometheus-postgres-exporter
          postgresql-15-plproxy postgresql-15-hll valgrind
          debhelper dpkg-dev postgresql-server-dev-all debootstrap)
# A Node.js installed from elsewhere bundles npm and conflicts with Debian's npm package: ask apt
# only for the commands that are missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" </dev/null
fi
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
export PATH=/usr/lib/postgresql/15/bin:$PATH

# The database tests run as postgres when we are root, else as ourselves, in a copy they own.
work=$(mktemp -d /tmp/slotted_counter_test.XXXXXX)
cp -a "$top/." "$work/"
packages_out=${SC_CACHE:-/var/cache/slotted_counter}/packages

# The packages for 15, the extension's and the router's (whose tests need both), built from a copy
# of the tree with warnings as errors (WERROR=1, for the objects and the bitcode alike) and
# installed: every suite below runs against them.
# The steps' runner and copy_sources (test/steps.sh); a failure shows its logs.
. "$top/test/steps.sh"
show_logs=1
copy_sources "$work/packages/15/src"
"${sudo[@]}" bash "$top/test/versions/packages.sh" "$work/packages/15/src" "$work/packages/15/debs"
"${sudo[@]}" rm -rf "$packages_out/15"
"${sudo[@]}" mkdir -p "$packages_out"
"${sudo[@]}" cp -a "$work/packages/15/debs" "$packages_out/15"

# A small filesystem for the test of a full disk (test/t/028_full_disk.pl), where one may be
# mounted; that test is skipped elsewhere.
mkdir "$work/small_fs"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=16m tmpfs "$work/small_fs" 2>/dev/null; then
  export SC_SMALL_FS="$work/small_fs"
  trap 'umount "$work/small_fs" 2>/dev/null || true' EXIT
else
  echo "no small filesystem could be mounted: the full-disk test is skipped"
fi
own_work

check() { "${run[@]}" make -s -C "$work" installcheck PG_CONFIG="$PG_CONFIG" "$@"; }
# The router's TAP tests two at a time, as the extension's.
check_proxy() { "${run[@]}" make -s -C "$work/proxy" installcheck PG_CONFIG="$PG_CONFIG" PROVE_FLAGS=-j2; }

# No TAP assertion may pass whatever happens: ok() of a query's output passes on 'f' (a true
# string in Perl), and pass() passes always. Compare with is(..., 't') instead.
lint_tap() {
  if perl -0ne 'while (/\bok\(\s*\$\w+->(?:safe_)?psql\b|\bpass\(/g) { print "$ARGV\n"; $bad = 1 } END { exit($bad ? 1 : 0) }' \
      "$top"/test/t/*.pl "$top"/proxy/test/t/*.pl; then
    return 0
  fi
  echo "ok(\$node->safe_psql(...)) passes on 'f' and pass() on anything: compare with is(..., 't')"
  return 1
}

step "lint" lint_tap
# The modules of src/ include each other without a cycle (docs/design.md: "Modules").
step "modules" python3 "$top/test/lint/modules.py"
step "pg_regress" check ISOLATION= TAP_TESTS=
step "isolation" check REGRESS= TAP_TESTS=
# TAP tests two at a time: each starts servers of its own on ports of its own (PostgreSQL's test
# modules lock the ports they take), and most of a test's time is spent waiting for events.
step "tap" check REGRESS= ISOLATION= PROVE_FLAGS=-j2
step "proxy" check_proxy
step "unit" bash "$top/test/unit/run.sh"
# In the scratch copy, so that npm installs node-postgres where the suite's user may write.
step "clients" "${run[@]}" bash "$work/test/clients/run.sh"
# Freed memory read back, assertions, and what Valgrind sees (test/memcheck/suites.sh).
. "$top/test/memcheck/suites.sh"
step "cassert" memcheck_cassert
step "valgrind" memcheck_valgrind
# PostgreSQL 17 and 18, each in a Debian chroot, against the packages built there
# (test/versions/suites.sh).
. "$top/test/versions/suites.sh"
for version_suite in "17 trixie" "18 sid"; do
  read -r version debian <<<"$version_suite"
  step "$version packages" versions_packages "$debian" "$version"
  step "$version pg_regress" versions_check "$version" ISOLATION= TAP_TESTS=
  step "$version isolation" versions_check "$version" REGRESS= TAP_TESTS=
  step "$version tap" versions_check "$version" REGRESS= ISOLATION= PROVE_TESTS="$versions_tap" \
    PROVE_FLAGS=-j2
done

if [ -n "${SC_SMALL_FS:-}" ]; then umount "$work/small_fs"; fi
trap - EXIT
if [ "${#failed[@]}" -eq 0 ]; then
  "${sudo[@]}" rm -rf "$work"
  echo "suites: $passed passed, 0 failed ($SECONDS s in all)"
else
  echo "the scratch copy with every log is kept in $work"
  echo "suites: $passed passed, ${#failed[@]} failed: ${failed[*]} ($SECONDS s in all)"
  exit 1
fi
