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
# spec: Z-NCCL-003 one process more than the visible GPUs, by hand (no
# launcher to stop the others): the extra rank's GPU does not exist (a
# usage error, exit 2), and every other process exits 1 within 60 s, rank 0
# naming it and its reason
T=$(mktemp -d)
t0=$(date +%s)
q=0
while [ "$q" -le "$n" ]; do
  ( env RANK=$q WORLD_SIZE=$((n + 1)) LOCAL_RANK=$q LOCAL_WORLD_SIZE=$((n + 1)) MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
      timeout -k 5 60 "$ZINC" train --backend nccl --exact $M >"$T/out$q" 2>&1; echo $? >"$T/rc$q" ) &
  q=$((q + 1))
done
wait
dt=$(( $(date +%s) - t0 ))
q=0
while [ "$q" -le "$n" ]; do
  want=1; [ "$q" = "$n" ] && want=2
  [ "$(cat "$T/rc$q")" = "$want" ] || { echo "FAIL Z-NCCL-003: rank $q exit $(cat "$T/rc$q"): $(tail -n 2 "$T/out$q" | tr '\n' ' ')"; fail=1; }
  q=$((q + 1))
done
grep -qF "gpu $n does not exist ($n visible)" "$T/out$n" || { echo "FAIL Z-NCCL-003: rank $n said: $(tail -n 2 "$T/out$n" | tr '\n' ' ')"; fail=1; }
grep -qF "rank 0: rank $n failed before NCCL started: --backend cuda: gpu $n does not exist" "$T/out0" ||
  { echo "FAIL Z-NCCL-003: rank 0 said: $(tail -n 2 "$T/out0" | tr '\n' ' ')"; fail=1; }
echo "Z-NCCL-003: $((n + 1)) processes on $n GPU(s) ended in ${dt} s; rank 0 said: $(tail -n 1 "$T/out0")"
rm -rf "$T"
[ "$fail" -eq 0 ] && echo "ok   NCCL world size 1, $n process(es) per node, one process more than the GPUs"
exit $fail
