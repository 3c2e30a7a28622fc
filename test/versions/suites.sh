# The suites of test/run.sh, which sources this file, on the PostgreSQL versions the host's Debian
# does not package: 17 (Debian trixie) and 18 (Debian sid), each in a chroot of its own
# (test/versions/chroot.sh: made on first use, cached in /var/cache/slotted_counter).
# Uses run.sh's $top (the tree), $work (its scratch copy), copy_sources, $packages_out and sudo
# (empty as root, else the sudo that runs what needs root: debootstrap, chroot, mount).
#
#   NN packages   the Debian packages, built in the chroot with warnings as errors and installed
#                 there (test/versions/packages.sh)
#   NN pg_regress, NN isolation, NN tap
#                 the suites against the installed packages, as postgres, in a copy of the tree:
#                 pg_regress and every isolation test, and the TAP tests named in
#                 versions_tap: those of what PostgreSQL does around us (a restart, crash
#                 recovery, a standby, a clean stop, dump and restore, a library replaced or not
#                 preloaded, CREATE and DROP DATABASE) and those of our code that differs between
#                 versions (src/compat.hpp: loads from the table's index, transactional inserts,
#                 write-through requests, ownership and role checks, attachments' search_path,
#                 the guards: sequences made, granted, given and dropped through core's API,
#                 the wait events' names)
#
# The copy ($work/versions/NN) is mounted into the chroot at /build, with a private /dev/shm and
# /proc, only while a suite runs. The packages are left in $packages_out/NN (run.sh).

versions_tap=$(printf 'test/t/%s.pl ' 001_restart 002_worker_kill 003_small_buffer \
  006_not_preloaded 007_txn_crash 008_txn_standby 010_txn_prepare 011_attach 014_drop_full_buffer \
  015_attach_security 017_dump_restore_roles 022_dump_restore 024_databases 025_replaced_library \
  027_clean_stop 029_batch_interrupted 038_versions 043_roles 044_pg_upgrade 046_expiry 047_rank_index \
  048_text_keys 061_wait_events 063_large_transactions)

declare -A versions_root=() versions_ready=()

# Runs a command in the chroot of version $1 with the copy at /build, as root, or as postgres
# with --user; unmounts whatever it mounted.
versions_in_chroot() {
  local version=$1; shift
  local as_root=1
  if [ "$1" = --user ]; then as_root=; shift; fi
  local root=${versions_root[$version]}
  local mounts=() rc=0 m
  # A run killed in the middle leaves its mounts, /build on a copy that is gone: mounting on that
  # fails (ENOENT), so they go first.
  for m in "$root/dev/shm" "$root/proc" "$root/build"; do
    if grep -qs " $m " /proc/mounts; then "${sudo[@]}" umount -l "$m" || true; fi
  done
  "${sudo[@]}" mkdir -p "$root/build"
  "${sudo[@]}" mount --bind "$work/versions/$version" "$root/build" && mounts+=("$root/build") &&
    "${sudo[@]}" mount -t proc proc "$root/proc" && mounts+=("$root/proc") &&
    "${sudo[@]}" mount -t tmpfs -o size=1g,mode=1777 tmpfs "$root/dev/shm" &&
    mounts+=("$root/dev/shm") || rc=1
  if [ "$rc" -eq 0 ]; then
    local who=()
    [ -n "$as_root" ] || who=(runuser -u postgres --)
    "${sudo[@]}" chroot "$root" env -i \
      PATH="/usr/lib/postgresql/$version/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/tmp \
      LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "${who[@]}" "$@" || rc=$?
  fi
  for m in "${mounts[@]}"; do "${sudo[@]}" umount -l "$m" || rc=1; done
  return "$rc"
}

# Makes (or finds) the chroot of Debian $1 with PostgreSQL $2, builds the packages there from a
# copy of the tree and installs them.
versions_packages() {
  local suite=$1 version=$2 root
  root=$(bash "$top/test/versions/chroot.sh" "$suite" "$version") || return 1
  versions_root[$version]=$root
  local copy=$work/versions/$version
  mkdir -p "$copy/src" "$copy/packages" || return 1
  copy_sources "$copy/src" || return 1
  versions_in_chroot "$version" bash /build/src/test/versions/packages.sh /build/src /build/packages ||
    return 1
  "${sudo[@]}" rm -rf "${packages_out:?}/$version" && "${sudo[@]}" mkdir -p "$packages_out" &&
    "${sudo[@]}" cp -a "$copy/packages" "$packages_out/$version" || return 1
  # The tests write into their copy as postgres.
  "${sudo[@]}" chown -R postgres "$copy/src" && versions_ready[$version]=1
}

versions_check() {
  local version=$1; shift
  if [ -z "${versions_ready[$version]:-}" ]; then
    echo "PostgreSQL $version's packages were not installed (see the suite \"$version packages\")"
    return 1
  fi
  versions_in_chroot "$version" --user make -s -C /build/src installcheck \
    PG_CONFIG="/usr/lib/postgresql/$version/bin/pg_config" "$@"
}
