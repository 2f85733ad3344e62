#!/bin/sh
# The GPU session's harness, checked without a GPU (spec Z-CUDA-010):
# ci/gpu_check.sh --rehearse runs every check of make test-gpu with the GPU
# side on the simulator and writes its files under $OUT; ci/gpu_job.sh
# reports a differing digest and a run past its time limit as one FAIL line
# each and keeps the outputs. Prints "gpusession: N passed, N failed".
#   sh tests/gpu_session_test.sh [BUILD]      (default build)
B=${1:-build}
. tests/lib.sh

# spec: Z-CUDA-010 the rehearsal passes every check and writes the session's files
OUT=$T/out ZINC_GPU_BUILD=$B ZINC_GPU_JOBS=2 sh ci/gpu_check.sh --rehearse >"$T/log" 2>&1
n=$(sed -n 's/^test-gpu: \([0-9]*\) checks of the matrix.*/\1/p' "$T/log")
line=$(grep '^zinc test-gpu:' "$T/log")
if [ -n "$n" ] && [ "$n" -ge 200 ] && [ "$line" = "zinc test-gpu: $((n + 4)) passed, 0 failed" ]; then
  ok "Z-CUDA-010 rehearsal: $line"
else bad Z-CUDA-010-rehearse "matrix '$n', summary '$line': $(grep FAIL "$T/log" | head -n 3)"; fi
missing=
for f in probe.txt results.txt kernels.txt spec.txt nccl.txt bench.txt check.log; do
  [ -s "$T/out/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ] && grep -q '^zinc test-gpu:' "$T/out/check.log" && [ "$(grep -c '^ok ' "$T/out/results.txt")" = $((n + 4)) ]; then
  ok "Z-CUDA-010 the rehearsal's files under \$OUT"
else bad Z-CUDA-010-files "missing:$missing"; fi

# a zinc whose --exact runs print another digest, and one whose runs hang
cat >"$T/zdiff" <<EOZ
#!/bin/sh
case " \$* " in *" --exact "*) "$PWD/$B/zinc" "\$@" | sed 's/^digest=.*/digest=0000000000000000/' ;; *) exec "$PWD/$B/zinc" "\$@" ;; esac
EOZ
printf '#!/bin/sh\nsleep 30\n' >"$T/zhang"
chmod +x "$T/zdiff" "$T/zhang"

# spec: Z-CUDA-010 a digest that differs is one FAIL line naming the check, its outputs kept
out=$(ZINC_GPU_REHEARSE=1 ZINC_GPU_FAILS=$T/fails sh ci/gpu_job.sh "$T/zdiff" digest mlp-s2-bf16-w2 - --stage 2 --dtype bf16 --world-size 2 --steps 3)
rc=$?
case $out in
  "FAIL mlp-s2-bf16-w2: sim 'digest="*"' cuda 'digest=0000000000000000'"*)
    if [ $rc -ne 0 ] && [ -s "$T/fails/mlp-s2-bf16-w2/cuda" ] && [ -s "$T/fails/mlp-s2-bf16-w2/sim" ]; then
      ok "Z-CUDA-010 a differing digest fails its check and keeps both outputs"
    else bad Z-CUDA-010-kept "rc $rc, kept: $(ls "$T/fails/mlp-s2-bf16-w2" 2>&1)"; fi ;;
  *) bad Z-CUDA-010-differ "rc $rc: $out" ;;
esac

# spec: Z-CUDA-010 a resumed run whose digest differs fails too
out=$(ZINC_GPU_REHEARSE=1 sh ci/gpu_job.sh "$T/zdiff" resume r - 'sim>cuda' --stage 1 --dtype fp16 --world-size 2)
case $out in "FAIL r: 10 steps 'digest="*"', sim 5 then cuda 5 'digest=0000000000000000'"*) ok "Z-CUDA-010 a resume that differs fails" ;;
  *) bad Z-CUDA-010-resume "$out" ;; esac

# spec: Z-CUDA-010 a run past ZINC_GPU_JOB_TIMEOUT fails its check, not the session
t0=$(date +%s)
out=$(ZINC_GPU_JOB_TIMEOUT=1 sh ci/gpu_job.sh "$T/zhang" digest hung - --steps 3)
dt=$(( $(date +%s) - t0 ))
case $out in "FAIL hung: sim '' cuda ''"*) [ "$dt" -lt 20 ] && ok "Z-CUDA-010 a hung run fails in ${dt}s" || bad Z-CUDA-010-hang "took ${dt}s" ;;
  *) bad Z-CUDA-010-hang "$out" ;; esac

finish gpusession
