#!/bin/sh
# What `make bench-peers` needs from the system on Debian (run as root, or
# with sudo available): g++ and the Python headers for DeepSpeedCPUAdam's JIT
# build, venv for the peers' virtual environment (ci/bench_peers.sh), and
# OpenBLAS, the GEMM peer of `make bench` (loaded with dlopen when present).
# The Python packages themselves (torch, deepspeed, ninja) go into that venv.
set -e
command -v dpkg >/dev/null 2>&1 || exit 0   # not Debian: the caller finds out what is missing
PKGS="g++ python3-dev python3-venv libopenblas0-pthread"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "ci/setup_peers.sh: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
