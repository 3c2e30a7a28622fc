#!/usr/bin/env bash
# Makes, once, a minimal Debian chroot with PostgreSQL NN's server and development files, for
# building, testing and packaging against a version this host's Debian does not package, and
# prints its path (the last line of standard output; everything else goes to standard error).
#
#   test/versions/chroot.sh SUITE NN       e.g. trixie 17, sid 18
#
# The chroot is Debian's own: debootstrap --variant=minbase from deb.debian.org, then
# postgresql-NN, its -dev package, PL/Proxy (the router's package needs it), a compiler,
# PostgreSQL's TAP dependencies and what pg_buildext needs, installed with no service started (policy-rc.d) and no default cluster
# (createcluster.conf), so nothing in it runs until a test starts its own servers.
# (Installing these packages into the host is not possible: they need a newer libc.)
#
# The cache: /var/cache/slotted_counter/chroot-SUITE-pgNN-<hash of this recipe> (SC_CACHE
# overrides the parent directory), reused when present. It is made in a directory beside it and
# renamed into place only when complete, under a lock, so an interrupted or concurrent set-up is
# never taken as done. Each later use refreshes its PostgreSQL packages only when asked
# (SC_CHROOT_UPGRADE=1). Runs as root (through sudo when started by another user).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || exec sudo -- bash "$0" "$@"
suite=$1 version=$2
cache=${SC_CACHE:-/var/cache/slotted_counter}
mirror=http://deb.debian.org/debian
say() { echo "chroot $suite: $*" >&2; }

packages=("postgresql-$version" "postgresql-server-dev-$version" postgresql-server-dev-all
          "postgresql-$version-plproxy" "postgresql-$version-hll" build-essential libipc-run-perl debhelper dpkg-dev fakeroot)
recipe="recipe 1; $suite; $mirror; ${packages[*]}"
dir=$cache/chroot-$suite-pg$version-$(printf '%s' "$recipe" | sha1sum | cut -c1-10)

mkdir -p "$cache"
chmod 755 "$cache"
exec 9>"$cache/.lock-chroot-$suite"
flock 9

# /proc for the package scripts, unmounted whatever happens.
mounted=()
release() { local m; for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap release EXIT
in_chroot() {
  local root=$1; shift
  if ! mountpoint -q "$root/proc"; then mount -t proc proc "$root/proc"; mounted+=("$root/proc"); fi
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 "$@"
}
apt_install() {
  in_chroot "$1" apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confold "${@:2}" </dev/null >&2
}

if [ -x "$dir/usr/lib/postgresql/$version/bin/postgres" ]; then
  if [ "${SC_CHROOT_UPGRADE:-}" = 1 ]; then
    say "upgrading its packages"
    in_chroot "$dir" apt-get update -q >&2
    apt_install "$dir" "${packages[@]}"
  fi
  echo "$dir"
  exit 0
fi

tmp=$dir.partial
rm -rf --one-file-system "$tmp"
say "debootstrap (minbase) into $tmp"
debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >&2
# sid's Release files may be older than apt's validity window allows on a mirror snapshot.
if [ "$suite" = sid ]; then
  echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99slotted-counter"
fi
# No service starts in the chroot, and installing PostgreSQL creates no cluster.
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
mkdir -p "$tmp/etc/postgresql-common"
echo 'create_main_cluster = false' >"$tmp/etc/postgresql-common/createcluster.conf"
in_chroot "$tmp" apt-get update -q >&2
say "installing ${packages[*]}"
apt_install "$tmp" "${packages[@]}"
in_chroot "$tmp" apt-get clean >&2
# The tests run as postgres, whom the package made; the host's uid of postgres owns the copies
# the tests write, so the two must agree.
host_uid=$(id -u postgres 2>/dev/null || echo "")
chroot_uid=$(chroot "$tmp" id -u postgres)
if [ -n "$host_uid" ] && [ "$host_uid" != "$chroot_uid" ]; then
  say "postgres has uid $chroot_uid in the chroot, $host_uid on the host: changing the chroot's"
  in_chroot "$tmp" usermod -u "$host_uid" postgres >&2
  in_chroot "$tmp" groupmod -g "$(id -g postgres)" postgres >&2 || true
  in_chroot "$tmp" sh -c 'chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql /var/log/postgresql /etc/postgresql 2>/dev/null || true'
fi
release
mounted=()
mv "$tmp" "$dir"
say "ready"
# Chroots of an older recipe go, unless something is mounted in one (a run of an older tree).
for old in "$cache/chroot-$suite-pg$version-"*; do
  [ "$old" != "$dir" ] && [ -d "$old" ] || continue
  if grep -qF " $old/" /proc/mounts; then continue; fi
  say "removing $old (an older recipe)"
  rm -rf --one-file-system "$old"
done
echo "$dir"
