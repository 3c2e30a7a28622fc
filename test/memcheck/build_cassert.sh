#!/usr/bin/env bash
# Builds, once, an assert-enabled PostgreSQL 15 from Debian's source package of the installed
# minor version, for the memory checks of test/run.sh (the suites "cassert" and "valgrind"), and
# prints its installation directory (the last line of standard output; everything else goes to
# standard error).
#
# --enable-cassert: every Assert() is live, memory contexts are checked, and freed memory is
# clobbered (0x7f bytes), so a read of freed memory shows as wrong values instead of passing by
# luck. -DUSE_VALGRIND: the memory contexts tell Valgrind which bytes of their blocks are
# allocated, so that it reports a read of a freed palloc chunk (it costs nothing outside Valgrind).
# --enable-tap-tests installs PostgreSQL::Test::Cluster, and the install has pg_regress and the
# isolation tester where PGXS looks for them. No documentation, no contrib, no LLVM.
#
# The cache: /var/cache/slotted_counter/pg15-cassert-<source version>-<hash of this recipe>
# (SC_CASSERT_CACHE overrides the parent directory), reused when present. It is built in a
# temporary directory beside it and renamed into place only when complete, under a lock, so an
# interrupted or concurrent build is never taken as done. 2 to 7 minutes on 2 cores, with load.
#
# Debian's own source is used (apt-get source, from a deb-src entry this script adds in a file of
# its own under /etc/apt/sources.list.d/), without its patches: they change only the installation
# layout (fixed /usr/lib/postgresql/15 paths, which would install outside the cache), the socket
# directory and packaging. When the installed version's source is not available (a security
# update whose source the mirror lacks), the newest version that is available is built instead.
# Runs as root (through sudo when started by another user).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || exec sudo -- bash "$0" "$@"

cache=${SC_CASSERT_CACHE:-/var/cache/slotted_counter}
say() { echo "build_cassert: $*" >&2; }

# What is built, and how: any change here makes another cache entry.
configure_flags=(--enable-cassert --enable-debug --enable-tap-tests --without-readline
                 --without-zlib --without-icu --without-llvm --disable-nls)
cflags="-O1 -fno-omit-frame-pointer -DUSE_VALGRIND"
recipe="recipe 1; ${configure_flags[*]}; CFLAGS=$cflags; CXXFLAGS=-O1 -fno-omit-frame-pointer"
recipe_hash=$(printf '%s' "$recipe" | sha1sum | cut -c1-10)

sources=/etc/apt/sources.list.d/slotted-counter-src.sources
if [ ! -f "$sources" ]; then
  . /etc/os-release
  say "adding Debian's source packages ($sources)"
  cat >"$sources" <<EOF
# Added by slotted_counter's test/memcheck/build_cassert.sh: apt-get source postgresql-15.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $VERSION_CODENAME-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -q >&2
fi
source_versions() { apt-cache showsrc postgresql-15 2>/dev/null | sed -n 's/^Version: //p'; }
if [ -z "$(source_versions)" ]; then apt-get update -q >&2; fi

# The installed version first, then every available one, newest first.
installed=$(dpkg-query -W -f='${Version}' postgresql-15)
mapfile -t candidates < <({ echo "$installed"; source_versions | sort -u -r -V; } | awk '!seen[$0]++')

mkdir -p "$cache"
chmod 755 "$cache"
exec 9>"$cache/.lock"
flock 9

for version in "${candidates[@]}"; do
  prefix="$cache/pg15-cassert-$(printf '%s' "$version" | tr -c 'A-Za-z0-9.\n' '_')-$recipe_hash"
  if [ -x "$prefix/bin/postgres" ]; then
    [ "$version" = "$installed" ] || say "using $version: the source of $installed is not available"
    echo "$prefix"
    exit 0
  fi
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  # The build directory goes whatever happens (the lock has kept others out of it).
  trap 'rm -rf "$tmp"' EXIT
  say "fetching the source of postgresql-15 $version"
  if ! (cd "$tmp" && apt-get source -q --download-only -o APT::Sandbox::User=root \
          "postgresql-15=$version" >&2); then
    say "the source of postgresql-15 $version is not available"
    rm -rf "$tmp"
    trap - EXIT
    continue
  fi
  say "building PostgreSQL $version with assertions into $prefix (log: $tmp/build.log)"
  start=$(date +%s)
  if ! bash -euo pipefail -c '
      cd "$1"; prefix=$2; cflags=$3; shift 3
      dpkg-source --skip-patches -x ./*.dsc src
      cd src
      ./configure --prefix="$prefix" "$@" CFLAGS="$cflags" CXXFLAGS="-O1 -fno-omit-frame-pointer"
      make -j"$(( $(nproc) + 1 ))"
      make install DESTDIR="$PWD/../dest"
      # The top-level install has put them there already; PGXS runs them from there.
      make -C src/test/isolation install DESTDIR="$PWD/../dest"
      install -m 644 src/tools/valgrind.supp "$PWD/../dest$prefix/share/postgresql/valgrind.supp"
    ' build "$tmp" "$prefix" "$cflags" "${configure_flags[@]}" >"$tmp/build.log" 2>&1; then
    tail -n 50 "$tmp/build.log" >&2
    say "the build failed (above: the end of its log)"
    exit 1
  fi
  pgxs="$tmp/dest$prefix/lib/postgresql/pgxs/src"
  for f in test/regress/pg_regress test/isolation/pg_isolation_regress test/isolation/isolationtester \
           test/perl/PostgreSQL/Test/Cluster.pm makefiles/pgxs.mk; do
    [ -e "$pgxs/$f" ] || { say "the install lacks $f"; exit 1; }
  done
  chmod -R a+rX "$tmp/dest$prefix"
  mv -T "$tmp/dest$prefix" "$prefix"
  say "built in $(( $(date +%s) - start )) s"
  echo "$prefix"
  exit 0
done
say "no source of postgresql-15 could be fetched (versions tried: ${candidates[*]})"
exit 1
