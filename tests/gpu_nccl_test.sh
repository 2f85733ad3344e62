#!/bin/sh
# NCCL checks for make test-gpu (needs a GPU and libnccl.so.2 on
# LD_LIBRARY_PATH). Exits non-zero on any failure.
ZINC=${1:-build/zinc}
fail=0
M="--steps 10 --stage 3 --dtype bf16"
sim=$("$ZINC" train $M --world-size 1 | grep '^digest=')
# spec: Z-NCCL-001 world size 1 over NCCL in exact mode prints the simulator's digest
one=$(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_PORT=29531 "$ZINC" train --backend nccl --exact $M | grep '^digest=')
[ -n "$sim" ] && [ "$sim" = "$one" ] || { echo "FAIL Z-NCCL-001: sim '$sim' nccl '$one'"; fail=1; }
# spec: Z-NCCL-002 the launcher with one process per visible GPU, exact mode:
# the simulator's digest at that world size
n=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$n" -ge 1 ] || n=1
simn=$("$ZINC" train $M --world-size "$n" | grep '^digest=')
ln=$("$ZINC" launch --nproc-per-node "$n" --master-port 29532 -- zinc train --backend nccl --exact $M | sed -n 's/^\[rank0\]: \(digest=.*\)/\1/p')
[ -n "$simn" ] && [ "$simn" = "$ln" ] || { echo "FAIL Z-NCCL-002: sim '$simn' launch '$ln' ($n GPUs)"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok   NCCL world size 1 and $n process(es) per node"
exit $fail
