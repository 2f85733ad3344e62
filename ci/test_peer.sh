#!/bin/sh
# make test-peer: zinc's GPT-2 against Hugging Face transformers on this CPU
# (tests/peer_gpt2.py, spec Z-HF-010..012). Makes BUILD/peer-venv (torch's
# CPU wheel, transformers, safetensors, numpy) unless it already imports
# them; PEER_VENV names another folder. ZINC_PEER_TORCH_FROM=VENV borrows an
# existing venv's packages (its torch) through a .pth file instead of
# downloading torch again: a local shortcut; CI builds its own.
# Exit status: the test's (0: every comparison within its tolerance).
set -e
B=${1:-build}
VENV=${PEER_VENV:-$B/peer-venv}
PY="$VENV/bin/python"
SYS_PY=$(command -v python3) || { echo "test-peer: python3 not found" >&2; exit 1; }

have_peer() { [ -x "$PY" ] && "$PY" -c 'import torch, transformers, safetensors, numpy' >/dev/null 2>&1; }
if ! have_peer; then
  sh ci/setup_peers.sh || echo "test-peer: could not install python3-venv python3-dev; going on"
  echo "test-peer: making $VENV (torch CPU, transformers, safetensors, numpy)"
  [ -x "$PY" ] || "$SYS_PY" -m venv "$VENV"
  if [ -n "$ZINC_PEER_TORCH_FROM" ]; then
    SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    FROM=$("$ZINC_PEER_TORCH_FROM/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$FROM" > "$SITE/zinc_peer_torch.pth"
  fi
  # the CPU wheel (~200 MB), asked twice (its index has answered "no
  # versions" once and then served the next request); where it stays
  # unreachable, PyPI's default wheel (larger: it brings the CUDA libraries,
  # unused here, and costs CI minutes), as bench-peers does
  "$PY" -c 'import torch' >/dev/null 2>&1 ||
    "$PY" -m pip install -q --retries 2 --timeout 120 torch --index-url https://download.pytorch.org/whl/cpu ||
    { sleep 15; "$PY" -m pip install -q --retries 2 --timeout 120 torch --index-url https://download.pytorch.org/whl/cpu; } ||
    { echo "test-peer: the PyTorch CPU index is unreachable; torch from PyPI instead";
      "$PY" -m pip install -q --retries 2 --timeout 120 torch; }
  "$PY" -m pip install -q --retries 2 --timeout 120 transformers safetensors numpy
fi
have_peer || { echo "test-peer: $VENV lacks torch, transformers, safetensors or numpy" >&2; exit 1; }
exec "$PY" tests/peer_gpt2.py --zinc "$B/zinc" --work "$B/peer"
