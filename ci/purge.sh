#!/bin/sh
# Removes what ci/setup.sh installs, so the next `make` starts as on a fresh
# machine (.ci/run calls it before the README's commands). Leaves gcc, make
# and python3, which CI itself needs to run at all. Run as root.
set -e
PKGS="libcjson-dev libxxhash-dev libcmocka-dev liburing-dev valgrind gcovr python3-numpy openmpi-bin libopenmpi-dev"
present=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 && present="$present $p"
done
if [ -n "$present" ]; then
  echo "ci/purge.sh: purging$present"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --autoremove $present >/dev/null
fi
# numpy that setup.sh put into a non-Debian python3 with pip
if python3 -c 'import numpy' 2>/dev/null; then
  python3 -m pip uninstall -y -q numpy 2>/dev/null || true
fi
for c in mpicc mpirun valgrind gcovr; do
  if command -v $c >/dev/null; then echo "ci/purge.sh: $c is still on PATH ($(command -v $c))" >&2; exit 1; fi
done
if python3 -c 'import numpy' 2>/dev/null; then echo "ci/purge.sh: numpy is still importable" >&2; exit 1; fi
echo "ci/purge.sh: none of the project's packages is installed"
