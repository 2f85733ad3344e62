#!/bin/sh
# make test-gpu (spec Z-CUDA-*, Z-NCCL-*): needs a visible CUDA GPU. Without one
# it prints one line saying why and exits 1. Then, each check one line:
#   1. test_kernels_gpu: every kernel against its host twin, bitwise;
#   2. the digest matrix (ci/gpu_job.sh, ZINC_GPU_JOBS at a time, default the
#      core count): `zinc train --backend cuda --exact` prints the simulator's
#      digest= line for the MLP (stages 0-3, fp32/fp16/bf16, world sizes 1-4
#      and 8) and GPT-2 (world sizes 1-4), with hpZ, qwZ+qgZ, all of ZeRO++,
#      hierarchical MiCS and offload to host (Z-CUDA-003, -009); fast mode's
#      last loss within Z-CUDA-005's tolerance; a checkpoint written by the
#      simulator resumes on the GPU, and the other way round, to the same
#      digest as an uninterrupted run;
#   3. the conformance cases on --backend cuda --exact;
#   4. NCCL at world size 1 and the launcher with one process per GPU;
#   5. ZINC_CUDA_PROFILE changes no bit and prints its table.
# Ends with "zinc test-gpu: N passed, N failed". ZINC_GPU_LOG=DIR keeps each
# part's output there as it goes (ci/gpu_check.sh points it at $OUT), and
# ZINC_GPU_FAILS=DIR each failing check's outputs.
B=${1:-build}
ZINC=$B/zinc
LOG=${ZINC_GPU_LOG:-}
[ -n "$LOG" ] || { LOG=$(mktemp -d) && DROP_LOG=$LOG; }   # none asked for: removed at exit
mkdir -p "$LOG" || exit 1
# ZINC_GPU_REHEARSE=1: no GPU; the GPU side of each check runs on the
# simulator (ci/gpu_job.sh) and the GPU-only parts say they were skipped
RH=${ZINC_GPU_REHEARSE:-0}
if [ "$RH" = 1 ]; then echo "test-gpu: rehearsal, the GPU side on the simulator"; SB=
else "$B"/tests/gpu_probe || exit 1; SB="--backend cuda"; fi
P=${ZINC_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
R=$LOG/results.txt
: >"$R"
TMPD=$(mktemp -d) || exit 1
trap 'rm -rf "$TMPD" ${DROP_LOG:+"$DROP_LOG"}' EXIT

# 1. kernels; cmocka's report kept whole in the log
if [ "$RH" = 1 ]; then echo "skip test_kernels_gpu (rehearsal)" >"$LOG/kernels.txt"; echo "ok   test_kernels_gpu skipped" >>"$R"
elif timeout -k 5 300 "$B"/tests/test_kernels_gpu >"$LOG/kernels.txt" 2>&1; then echo "ok   test_kernels_gpu" >>"$R"
else echo "FAIL test_kernels_gpu (exit $?): $(grep -E 'FAILED|Failure|error' "$LOG/kernels.txt" | head -n 5 | tr '\n' ' ')" >>"$R"; fi
tail -n 1 "$R"

# 3 runs beside 2: the conformance cases take one process for a while
( if timeout -k 5 240 "$ZINC" spec run $SB --exact >"$LOG/spec.txt" 2>&1; then echo "ok   spec run --backend cuda --exact"
  else echo "FAIL spec run --backend cuda --exact: $(grep -v '^ok ' "$LOG/spec.txt" | head -n 5 | tr '\n' ' ')"; fi ) >"$TMPD/spec.res" &
spec_pid=$!

# 2. the matrix: one line a job, "KIND NAME CFG ARGS..." (ci/gpu_job.sh)
J=$TMPD/jobs.txt
: >"$J"
TXT="--data text:tests/data/gpl-3.txt --seq-len 16"
for S in 0 1 2 3; do
  for D in fp32 fp16 bf16; do
    for W in 1 2 3 4 8; do
      a="--stage $S --dtype $D --world-size $W"
      echo "digest mlp-s$S-$D-w$W - $a --steps 10" >>"$J"
      echo "fast mlp-fast-s$S-$D-w$W - $a --steps 10" >>"$J"
      [ "$W" -le 4 ] && echo "digest gpt2-s$S-$D-w$W - --model gpt2-tiny $TXT $a --steps 3" >>"$J"
    done
    echo "fast gpt2-fast-s$S-$D-w2 - --model gpt2-tiny $TXT --stage $S --dtype $D --world-size 2 --steps 10" >>"$J"
  done
done
for M in mlp gpt2; do
  m=; [ $M = gpt2 ] && m="--model gpt2-tiny $TXT"
  for D in fp16 bf16; do
    for C in hpz qwzqgz zpp mics; do
      echo "digest $M-$C-$D $C $m --dtype $D --world-size 4 --ranks-per-node 2 --steps 3" >>"$J"
    done
  done
  for D in fp32 fp16 bf16; do
    for C in offopt offall; do
      echo "digest $M-$C-$D $C $m --dtype $D --world-size 2 --steps 3" >>"$J"
    done
  done
  for dir in 'sim>cuda' 'cuda>sim'; do
    n=$(echo "$dir" | tr '>' '2')
    echo "resume $M-resume-$n-s3-bf16-w2 - $dir $m --stage 3 --dtype bf16 --world-size 2" >>"$J"
    echo "resume $M-resume-$n-s1-fp16-w3 - $dir $m --stage 1 --dtype fp16 --world-size 3" >>"$J"
    echo "resume $M-resume-$n-s0-fp32-w1 - $dir $m --stage 0 --dtype fp32 --world-size 1" >>"$J"
    echo "resume $M-resume-$n-offall-bf16-w2 offall $dir $m --dtype bf16 --world-size 2" >>"$J"
  done
done
echo "test-gpu: $(wc -l <"$J") checks of the matrix, $P at a time"
xargs -L 1 -P "$P" sh ci/gpu_job.sh "$ZINC" <"$J" | tee -a "$R" | grep '^FAIL' | cut -c 1-600

wait "$spec_pid"
cat "$TMPD/spec.res" >>"$R"; cat "$TMPD/spec.res"

# 4. NCCL (tests/gpu_nccl_test.sh names the clauses)
if [ "$RH" = 1 ]; then echo "skip (rehearsal)" >"$LOG/nccl.txt"; echo "ok   NCCL checks skipped" >>"$R"
elif timeout -k 5 300 sh tests/gpu_nccl_test.sh "$ZINC" >"$LOG/nccl.txt" 2>&1; then echo "ok   NCCL checks" >>"$R"
else echo "FAIL NCCL checks: $(tail -n 3 "$LOG/nccl.txt" | tr '\n' ' ')" >>"$R"; fi
tail -n 1 "$R"

# 5. ZINC_CUDA_PROFILE (tests/gpu_profile_test.sh)
if [ "$RH" = 1 ]; then echo "ok   profile checks skipped" >>"$R"
elif timeout -k 5 120 sh tests/gpu_profile_test.sh "$ZINC" >"$TMPD/prof.txt" 2>&1; then echo "ok   profile checks" >>"$R"
else echo "FAIL profile checks: $(tail -n 3 "$TMPD/prof.txt" | tr '\n' ' ')" >>"$R"; fi
tail -n 1 "$R"

pass=$(grep -c '^ok ' "$R")
fail=$(grep -c '^FAIL' "$R")
echo "zinc test-gpu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
