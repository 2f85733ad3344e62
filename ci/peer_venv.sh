#!/bin/sh
# The peers' Python environment, shared by make test-peer, test-deepspeed and
# bench-peers: VENV (default BUILD/peer-venv; PEER_VENV names another) with
# torch (the CPU wheel; PyPI's default where the CPU index is unreachable),
# transformers, safetensors, numpy, deepspeed and ninja (DeepSpeed's CPU ops
# build with it and g++). Made only when it lacks one of them; prints the
# venv's python on its last line. ZINC_PEER_TORCH_FROM=VENV borrows an
# existing venv's packages (its torch) through a .pth file instead of
# downloading torch again: a local shortcut; CI builds its own.
# Usage: sh ci/peer_venv.sh BUILD_DIR   (exit 1: it could not be made)
B=${1:-build}
VENV=${PEER_VENV:-$B/peer-venv}
PY="$VENV/bin/python"
SYS_PY=$(command -v python3) || { echo "peer-venv: python3 not found" >&2; exit 1; }
MODS='import torch, transformers, safetensors, numpy, deepspeed'

have() { [ -x "$PY" ] && "$PY" -c "$MODS" >/dev/null 2>&1; }
if ! have; then
  # g++ and the Python headers (DeepSpeed's CPU ops), venv, OpenBLAS (make bench)
  sh ci/setup_peers.sh >&2 || echo "peer-venv: could not install g++ python3-dev python3-venv; going on" >&2
  echo "peer-venv: making $VENV (torch, transformers, safetensors, numpy, deepspeed, ninja)" >&2
  [ -x "$PY" ] || "$SYS_PY" -m venv "$VENV" >&2
  if [ -n "$ZINC_PEER_TORCH_FROM" ]; then
    SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    FROM=$("$ZINC_PEER_TORCH_FROM/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$FROM" > "$SITE/zinc_peer_torch.pth"
  fi
  # the CPU wheel (~200 MB), asked twice (its index has answered "no
  # versions" once and then served the next request); where it stays
  # unreachable, PyPI's default wheel (larger: it brings the CUDA libraries,
  # unused here, and costs CI minutes)
  "$PY" -c 'import torch' >/dev/null 2>&1 ||
    "$PY" -m pip install -q --retries 2 --timeout 120 torch --index-url https://download.pytorch.org/whl/cpu >&2 ||
    { sleep 15; "$PY" -m pip install -q --retries 2 --timeout 120 torch --index-url https://download.pytorch.org/whl/cpu >&2; } ||
    { echo "peer-venv: the PyTorch CPU index is unreachable; torch from PyPI instead" >&2;
      "$PY" -m pip install -q --retries 2 --timeout 120 torch >&2; }
  "$PY" -m pip install -q --retries 2 --timeout 120 transformers safetensors numpy deepspeed ninja >&2
fi
have || { echo "peer-venv: $VENV lacks one of torch, transformers, safetensors, numpy, deepspeed" >&2; exit 1; }
echo "$PY"
