#!/bin/sh
# make bench: the step-time model (zinc plan --machine) against zinc's own
# measured runs on this machine, side by side (spec: Z-CAL-006). For each
# backend setting (the simulator with 1, 2 and 4 ranks; tcp and mpi
# processes with 2 ranks) it calibrates the machine as those ranks see it
# (zinc calibrate), then for each case prints zinc plan's time.step_s next
# to the median time_ms of steps 3..8 of an 8-step zinc train of the same
# flags (steps 1-2 warm up):
#   bench plan sim W=2 stage 2: predicted 22.2 ms, measured 25.3 ms, predicted/measured 0.88
# and a summary line. A benchmark reports, it does not assert: no ratio
# fails it. It exits 1 only when zinc itself fails (what failed is printed).
#   sh tests/bench_plan.sh BUILD_DIR
set -u
B=${1:-build}
Z=$B/zinc
PORT=${BENCH_PLAN_PORT:-29519}
[ -x "$Z" ] || { echo "bench plan: $Z not found (make BUILD=$B all)" >&2; exit 1; }
TMP=$(mktemp -d) || { echo "bench plan: mktemp -d failed" >&2; exit 1; }
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FAILED=0
: > "$TMP/ratios"

# the MLP runs fp32, zinc's default dtype: zinc's host buffers hold fp32, and
# calibrate measures fp32 kernels (a 16-bit run would be priced at the same
# rates while converting on every step)
MLP="--model mlp:1024,1024,1024,1024,10 --micro-batch 64"
printf '%s\n' '{"train_micro_batch_size_per_gpu": 64, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}' \
  > "$TMP/offload.json"

# zinc CMD ARGS... as the ranks of the current setting ($BE, $W); stdout and
# stderr to $TMP/out and $TMP/err
ranks() {
  case $BE in
    sim) "$Z" "$@" --world-size "$W" ;;
    tcp) "$Z" launch --nproc-per-node "$W" --master-port "$PORT" -- "$Z" "$@" --backend tcp ;;
    mpi) # --oversubscribe where the ranks outnumber the cores (as the Makefile's bench line)
         over=
         [ "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)" -ge "$W" ] || over=--oversubscribe
         mpirun -np "$W" $over --bind-to none "$Z" "$@" --backend mpi ;;
  esac > "$TMP/out" 2> "$TMP/err"
}

failed() {   # failed WHAT: say so, with zinc's last words
  echo "bench plan $BE W=$W: FAILED: $1" >&2
  tail -n 5 "$TMP/err" "$TMP/out" >&2
  FAILED=1
}

step_s() {   # time.step_s of the plan's JSON in $TMP/plan.json
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["time"]["step_s"])' "$TMP/plan.json"
  else   # "step_s" appears once in the document, in "time"
    tr -d ' \t\n' < "$TMP/plan.json" | sed -n 's/.*"step_s":\([-+0-9.eE]*\).*/\1/p'
  fi
}

measured_ms() {   # the median time_ms of steps 3..8 in $TMP/out (rank 0's: the launcher prefixes "[rank0]: ")
  sed -n 's/^\(\[rank0\]: \)\{0,1\}step=\([0-9]*\) .*time_ms=\([0-9.]*\).*/\2 \3/p' "$TMP/out" |
    awk '$1 >= 3 && $1 <= 8 { print $2 }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR == 0) exit 1;
          if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_case LABEL FLAGS...: plan and train with FLAGS on this setting
bench_case() {
  label=$1
  shift
  # plan runs in this process whatever the setting (a dry run of W ranks)
  if ! "$Z" plan "$@" --world-size "$W" --machine "$TMP/machine.json" --json \
      > "$TMP/plan.json" 2> "$TMP/err"; then
    cp "$TMP/plan.json" "$TMP/out"
    failed "zinc plan $* --world-size $W --machine FILE --json"
    return
  fi
  pred=$(step_s) && [ -n "$pred" ] || { failed "no time.step_s in zinc plan's JSON ($*)"; return; }
  if ! ranks train "$@" --steps 8 --steps-per-print 1; then
    failed "zinc train $* --steps 8 --steps-per-print 1"
    return
  fi
  meas=$(measured_ms) || { failed "no step=K ... time_ms=T lines from zinc train $*"; return; }
  awk -v b="$BE" -v w="$W" -v l="$label" -v p="$pred" -v m="$meas" 'BEGIN {
    printf "bench plan %s W=%s %s: predicted %.1f ms, measured %.1f ms, predicted/measured %.2f\n",
           b, w, l, p * 1000, m, p * 1000 / m }'
  awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%.6f\n", p * 1000 / m }' >> "$TMP/ratios"
}

# setting BE W: calibrate, then the cases
setting() {
  BE=$1 W=$2
  rm -f "$TMP/machine.json"
  ranks calibrate -o "$TMP/machine.json" || { failed "zinc calibrate -o FILE ($BE, $W ranks)"; return; }
  [ -s "$TMP/machine.json" ] || { failed "zinc calibrate wrote no machine file ($BE, $W ranks)"; return; }
  for s in 0 1 2 3; do bench_case "stage $s" $MLP --stage "$s"; done
  bench_case "stage 2 offload cpu" $MLP --config "$TMP/offload.json"
  if [ "$BE" = sim ] && [ "$W" = 2 ]; then
    bench_case "gpt2-tiny stage 3" --model gpt2-tiny --seq-len 32 --micro-batch 8 --data text:README.md --stage 3
  fi
}

setting sim 1
setting sim 2
setting sim 4
setting tcp 2
if ! command -v mpirun >/dev/null 2>&1; then
  echo "bench plan mpi skipped: mpirun not found"
else
  # a build without MPI refuses --backend mpi before it starts: one rank tells
  BE=mpi W=1
  if ranks train --model mlp:4,2 --steps 1; then
    setting mpi 2
  else
    echo "bench plan mpi skipped: $(grep -m 1 . "$TMP/err" || echo "zinc train --backend mpi failed")"
  fi
fi

# The dry run's own cost (Z-DRY-010): seconds and peak memory of one
# zinc plan (a step, the fit, the time on dgx-h100) as the world and the
# model grow; python3 reads the child's peak RSS (getrusage)
if command -v python3 >/dev/null 2>&1; then
  for model in gpt2-xl gpt3-13b gpt3-175b; do
    for w in 8 64 512 4096; do
      python3 - "$Z" "$model" "$w" <<'PY' || FAILED=1
import resource, subprocess, sys, time
z, model, w = sys.argv[1:4]
t0 = time.monotonic()
r = subprocess.run([z, "plan", "--model", model, "--world-size", w, "--stage", "3", "--dtype", "bf16",
                    "--micro-batch", "1", "--steps", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
dt = time.monotonic() - t0
if r.returncode:
    print("bench plan scale %s W=%s: zinc plan failed: %s" % (model, w, r.stderr.decode().strip()))
    sys.exit(1)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
print("bench plan scale %s W=%s: %.2f s, peak RSS %.1f MiB" % (model, w, dt, rss))
PY
    done
  done
else
  echo "bench plan scale skipped: python3 not found"
fi

sort -n "$TMP/ratios" | awk -v failed="$FAILED" '{ v[NR] = $1 } END {
  if (NR == 0) { print "bench plan: 0 cases"; exit }
  med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "bench plan: %d cases, predicted/measured from %.2f to %.2f (median %.2f)%s\n",
         NR, v[1], v[NR], med, failed ? " (some runs failed: see above)" : "" }'
exit "$FAILED"
