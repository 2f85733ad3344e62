#!/bin/sh
# Installs what zinc needs on a fresh Debian machine (run as root, or with sudo
# available). Called by ci/configure.sh (so by make) when something is
# missing, and by .ci/run. .ci/purge.sh removes the same packages.
set -e
PKGS="gcc make libcjson-dev libxxhash-dev libcmocka-dev liburing-dev valgrind gcovr python3 python3-numpy openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if [ -n "$missing" ]; then
  echo "ci/setup.sh: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# The tests' independent float32 reference (tests/adam_ref.py) needs numpy in
# the python3 on PATH; python3-numpy serves Debian's python3, pip any other
# (a pyenv or venv python3 first on PATH).
if ! python3 -c 'import numpy' 2>/dev/null; then
  echo "ci/setup.sh: installing numpy for $(command -v python3) (pip)"
  python3 -m pip install -q numpy
fi
