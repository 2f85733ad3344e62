#!/bin/sh
# make test-deepspeed: DeepSpeed itself as the peer, on this CPU (spec
# Z-DSP-*), in the peers' venv (ci/peer_venv.sh):
#   1. tests/diff_deepspeed.py: DeepSpeed's plain-Python parts (LR schedules,
#      the fp16 loss scaler, the batch triad) against zinc's C (tests/ds_probe)
#      on thousands of random cases, bit for bit;
#   2. tests/peer_deepspeed.py: the scenario matrix, the same ds_config file
#      trained by DeepSpeed (torchrun, gloo, DS_ACCELERATOR=cpu) and by zinc.
# Exit status 0 when both pass.
B=${1:-build}
PY=$(sh ci/peer_venv.sh "$B" | tail -n 1) || exit 1
[ -x "$PY" ] || exit 1
export DS_ACCELERATOR=cpu
# the venv's bin first on PATH: DeepSpeed's JIT builds run its ninja
PATH="$(dirname "$PY"):$PATH"
export PATH
# DeepSpeed's "[date] [WARNING] ..." log lines are left out of what prints
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
"$PY" tests/diff_deepspeed.py "$B/tests/ds_probe" --cases "${ZINC_DS_CASES:-2000}" >"$log" 2>&1 || rc=1
grep -v '^\[20' "$log"
"$PY" tests/peer_deepspeed.py --zinc "$B/zinc" --work "$B/deepspeed" >"$log" 2>&1 || rc=1
grep -v '^\[20' "$log"
exit $rc
