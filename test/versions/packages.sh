#!/usr/bin/env bash
# Builds the Debian packages (debian/) of the tree copy $1 with warnings as errors, for every
# PostgreSQL version in debian/pgversions that this system has, installs them, and moves them to
# the folder $2 (with the build's log). Runs as root on the host (PostgreSQL 15) and in the
# chroots of test/versions/chroot.sh (17, 18). The build writes into $1 and its parent folder.
set -euo pipefail
src=$1 out=$2
mkdir -p "$out"
cd "$src"
pg_buildext updatecontrol
if ! DEB_BUILD_OPTIONS="werror nocheck parallel=2" dpkg-buildpackage -b -us -uc \
    >"$out/build.log" 2>&1; then
  tail -n 100 "$out/build.log"
  exit 1
fi
cd ..
mapfile -t debs < <(ls ./*.deb | grep -v -- '-dbgsym_')
dpkg -i "${debs[@]}"
mv ./*.deb ./*.changes ./*.buildinfo "$out/"
echo "built and installed: ${debs[*]#./}"
