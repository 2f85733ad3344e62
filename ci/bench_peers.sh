#!/bin/sh
# make bench-peers: zinc against PyTorch and DeepSpeed on this CPU
# (tests/bench_peers.py). Makes BUILD/peers-venv from PyPI when it lacks
# torch or deepspeed (PEERS_VENV names another), then runs the benchmark
# with DeepSpeed on its CPU accelerator. Whatever cannot be installed
# becomes `bench NAME skipped: REASON` lines; the exit status is 0 when
# zinc's own figures were printed.
B=${1:-build}
VENV=${PEERS_VENV:-$B/peers-venv}
PY="$VENV/bin/python"
SYS_PY=$(command -v python3) || { echo "bench-peers: python3 not found" >&2; exit 1; }
export DS_ACCELERATOR=cpu

sh ci/setup_peers.sh || echo "bench-peers: could not install g++ python3-dev python3-venv; going on"
have_peers() { [ -x "$PY" ] && "$PY" -c 'import torch, deepspeed' >/dev/null 2>&1; }
if ! have_peers; then
  echo "bench-peers: making $VENV (torch, deepspeed, ninja from PyPI)"
  [ -x "$PY" ] || "$SYS_PY" -m venv "$VENV" || echo "bench-peers: python3 -m venv $VENV failed"
  if [ -x "$PY" ]; then
    # the CPU wheel (~200 MB); where its index is unreachable, PyPI's
    # default wheel (larger: it brings the CUDA libraries, unused here)
    "$PY" -m pip install -q --retries 1 --timeout 60 torch --index-url https://download.pytorch.org/whl/cpu ||
      { echo "bench-peers: the PyTorch CPU index is unreachable; torch from PyPI instead";
        "$PY" -m pip install -q torch; } ||
      echo "bench-peers: torch could not be installed"
    "$PY" -m pip install -q deepspeed ninja || echo "bench-peers: deepspeed could not be installed"
  fi
fi
# the venv's bin first on PATH: DeepSpeed's JIT build runs its ninja
PATH="$(cd "$(dirname "$PY")" 2>/dev/null && pwd || echo /nonexistent):$PATH" \
  "$SYS_PY" tests/bench_peers.py "$B" --python "$PY"
