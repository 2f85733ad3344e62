#!/bin/sh
# ci/gpu_check.sh: the whole GPU session in one command, on the GPU machine,
# from the project root, after ci/gpu_pack.sh built build-gpu/ here and the
# device tool carried it (carry: build-gpu/zinc, build-gpu/tests/gpu_probe,
# build-gpu/tests/test_kernels_gpu, build-gpu/tests/bench_gpu, build-gpu/lib).
#
#   sh ci/gpu_check.sh             on the GPU machine: writes under $OUT
#   sh ci/gpu_check.sh --rehearse  here, without a GPU: the same script with
#                                  the GPU side of each check on the simulator
#
# In order, and stopping at nothing: the machine (probe.txt), make test-gpu's
# checks (ci/test_gpu.sh: kernels, the exact-digest matrix, conformance cases,
# NCCL; results.txt kernels.txt spec.txt nccl.txt), make bench-gpu's
# (bench.txt, with a GPT-2 124M run's per-call profile). Each file is written as its part runs, so a run cut short still
# returns what it did; check.log holds everything printed, fails.tgz the
# outputs of each failing check. Eight files: what the device returns at most.
# Time limits: each zinc run ZINC_GPU_JOB_TIMEOUT (60 s), the test part 300 s,
# the bench 150 s, the profile 60 s: about 9 minutes at worst, 3 when all is well.
RH=0
[ "${1:-}" = --rehearse ] && RH=1
B=${ZINC_GPU_BUILD:-build-gpu}   # tests/gpu_session_test.sh rehearses with build/
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
main() {
  date -u +"gpu_check: start %Y-%m-%dT%H:%M:%SZ"
  if [ "$RH" = 0 ]; then
    . ci/gpu_env.sh
    { uname -a; nvidia-smi; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$B/zinc";
      python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'; } >"$OUT/probe.txt" 2>&1
    grep -E 'H100|H200|Driver Version|not found' "$OUT/probe.txt"
  else
    echo "rehearsal: no GPU" >"$OUT/probe.txt"
  fi
  F=$(mktemp -d)
  ZINC_GPU_REHEARSE=$RH ZINC_GPU_LOG=$OUT ZINC_GPU_FAILS=$F/fails ZINC_GPU_JOB_TIMEOUT=${ZINC_GPU_JOB_TIMEOUT:-60} \
    timeout -k 10 300 sh ci/test_gpu.sh "$B"
  echo "gpu_check: test-gpu exit $?"
  [ -d "$F/fails" ] && tar -czf "$OUT/fails.tgz" -C "$F" fails
  rm -rf "$F"
  date -u +"gpu_check: bench %H:%M:%S"
  if [ "$RH" = 0 ]; then
    timeout -k 10 150 sh ci/bench_gpu.sh "$B" >"$OUT/bench.txt" 2>&1
    echo "gpu_check: bench-gpu exit $?"
    cat "$OUT/bench.txt"
    # where a GPT-2 124M run's time goes, call by call (ZINC_CUDA_PROFILE, kernels/device_cuda.cu)
    date -u +"gpu_check: profile %H:%M:%S"
    ZINC_CUDA_PROFILE=1 timeout -k 10 60 "$B/zinc" train --backend cuda --model gpt2 --data text:tests/data/gpl-3.txt \
      --seq-len 1024 --micro-batch 4 --world-size 1 --stage 0 --dtype fp32 --steps 3 --steps-per-print 1 >>"$OUT/bench.txt" 2>&1
    echo "gpu_check: profile exit $?"
    grep -E '^step=|^cuda profile' "$OUT/bench.txt" | head -n 40
  else
    python3 -c 'import ast, sys; ast.parse(open("tests/bench_torch.py").read())' && echo "bench: skipped (rehearsal; bench_torch.py parses)" | tee "$OUT/bench.txt"
  fi
  date -u +"gpu_check: end %H:%M:%S"
}
main 2>&1 | tee "$OUT/check.log"
