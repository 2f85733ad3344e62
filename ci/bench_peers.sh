#!/bin/sh
# make bench-peers: zinc against PyTorch and DeepSpeed on this CPU
# (tests/bench_peers.py), in the peers' venv (ci/peer_venv.sh). Whatever
# cannot be installed becomes `bench NAME skipped: REASON` lines; the exit
# status is 0 when zinc's own figures were printed.
B=${1:-build}
SYS_PY=$(command -v python3) || { echo "bench-peers: python3 not found" >&2; exit 1; }
export DS_ACCELERATOR=cpu
PY=$(sh ci/peer_venv.sh "$B" | tail -n 1) || PY="${PEER_VENV:-$B/peer-venv}/bin/python"
# the venv's bin first on PATH: DeepSpeed's JIT build runs its ninja
PATH="$(cd "$(dirname "$PY")" 2>/dev/null && pwd || echo /nonexistent):$PATH" \
  "$SYS_PY" tests/bench_peers.py "$B" --python "$PY"
