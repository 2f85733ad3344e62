#!/bin/sh
# Installs what zinc needs on a fresh Debian machine (run as root, or with sudo
# available). Called by make when a dependency is missing, and by .ci/run.
set -e
PKGS="gcc make libcjson-dev libcmocka-dev valgrind gcovr python3 openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "ci/setup.sh: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
