#!/bin/sh
# make test-peer: zinc's GPT-2 against Hugging Face transformers on this CPU
# (tests/peer_gpt2.py, spec Z-HF-010..012), in the peers' venv
# (ci/peer_venv.sh). Exit status: the test's (0: every comparison within
# its tolerance).
set -e
B=${1:-build}
PY=$(sh ci/peer_venv.sh "$B" | tail -n 1)
exec "$PY" tests/peer_gpt2.py --zinc "$B/zinc" --work "$B/peer"
