#!/bin/sh
# configure.sh BUILD: installs what is missing (ci/setup.sh), THEN looks for
# the toolchains and records them in BUILD/config.mk, which the Makefile
# includes and every object depends on. Detecting after installing is what
# lets a fresh machine pass `make test` first time; the file is rewritten
# only when its content changes, so a toolchain that appears or goes
# rebuilds what it must and nothing else. Run by make on every invocation
# (about 0.1 s when nothing is missing).
set -e
B=${1:-build}
mkdir -p "$B"

missing() {
  [ ! -f /usr/include/cjson/cJSON.h ] || [ ! -f /usr/include/cmocka.h ] || [ ! -f /usr/include/liburing.h ] && return 0
  for c in gcovr valgrind mpirun mpicc python3; do command -v $c >/dev/null || return 0; done
  python3 -c 'import numpy' 2>/dev/null || return 0
  return 1
}
if missing; then
  echo "zinc: installing build dependencies (ci/setup.sh)" >&2
  sh ci/setup.sh >&2
fi

tmp="$B/config.mk.tmp"
{
  echo "# written by ci/configure.sh: the toolchains this build was configured with"
  mpicc=$(command -v mpicc || true)
  if [ -n "$mpicc" ]; then
    echo "MPICC := $mpicc"
    echo "MPI_COMPILE := $("$mpicc" --showme:compile 2>/dev/null)"
    echo "MPI_LINK := $("$mpicc" --showme:link 2>/dev/null)"
  fi
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  echo "NVCC_FOUND := $nvcc"
} >"$tmp"
if cmp -s "$tmp" "$B/config.mk"; then rm -f "$tmp"
else
  [ -f "$B/config.mk" ] && echo "zinc: toolchains changed, reconfigured $B/config.mk" >&2
  mv "$tmp" "$B/config.mk"
fi
