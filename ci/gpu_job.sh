#!/bin/sh
# One check of make test-gpu (ci/test_gpu.sh runs many of these side by side).
# Prints exactly one line: "ok   NAME (Ts)" or "FAIL NAME: what differed".
#
#   gpu_job.sh ZINC digest NAME CFG ARGS...   the simulator's digest= line equals
#                                             `--backend cuda --exact`'s (Z-CUDA-003, -009)
#   gpu_job.sh ZINC fast   NAME CFG ARGS...   fast mode's last loss within Z-CUDA-005's
#                                             tolerance of the simulator's
#   gpu_job.sh ZINC resume NAME CFG FROM>TO ARGS...
#                                             FROM (sim|cuda) trains 5 steps and checkpoints,
#                                             TO resumes to step 10: the simulator's 10-step digest
#
# CFG names a zero_optimization section (below), or '-' for none: the dtype and
# the world size come from ARGS. Every run has a time limit (ZINC_GPU_JOB_TIMEOUT,
# default 240 s), so a hung rank fails its check instead of the whole suite.
ZINC=$1 KIND=$2 NAME=$3 CFG=$4
shift 4
LIM=${ZINC_GPU_JOB_TIMEOUT:-240}
# ZINC_GPU_REHEARSE=1 (ci/gpu_check.sh --rehearse, on a machine without a GPU)
# runs the GPU side on the simulator: every check then passes, and what fails
# is this harness
CUDA="--backend cuda"
[ "${ZINC_GPU_REHEARSE:-0}" = 1 ] && CUDA=
T=$(mktemp -d) || exit 1
# a failing check's outputs are kept under ZINC_GPU_FAILS/NAME when that is set
keep() { [ -n "${ZINC_GPU_FAILS:-}" ] && mkdir -p "$ZINC_GPU_FAILS/$NAME" && cp -r "$T"/. "$ZINC_GPU_FAILS/$NAME/"; }
trap 'rm -rf "$T"' EXIT
t0=$(date +%s)

# resume's FROM>TO comes before the train flags
DIR=
[ "$KIND" = resume ] && { DIR=$1; shift; }
zo=
case $CFG in
  -) ;;
  hpz)    zo='"stage": 3, "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2' ;;
  qwzqgz) zo='"stage": 3, "stage3_param_persistence_threshold": 0, "zero_quantized_weights": true, "zero_quantized_gradients": true' ;;
  zpp)    zo='"stage": 3, "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2, "zero_quantized_weights": true, "zero_quantized_gradients": true' ;;
  mics)   zo='"stage": 3, "stage3_param_persistence_threshold": 0, "mics_shard_size": 4, "mics_hierarchical_params_gather": true' ;;
  offopt) zo='"stage": 2, "offload_optimizer": {"device": "cpu"}' ;;
  offall) zo='"stage": 3, "stage3_param_persistence_threshold": 0, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}' ;;
  *) echo "FAIL $NAME: gpu_job.sh: unknown config '$CFG'"; exit 1 ;;
esac
if [ -n "$zo" ]; then
  printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {%s}}\n' "$zo" >"$T/c.json"
  set -- --config "$T/c.json" "$@"
fi

# run LOG ARGS...: zinc train with the time limit; the output (both streams) in LOG
run() { log=$1; shift; timeout -k 5 "$LIM" "$ZINC" train "$@" >"$log" 2>&1; }
digest() { grep '^digest=' "$1"; }
final_loss() { sed -n 's/^step=[0-9]* loss=\([^ ]*\) .*/\1/p' "$1" | tail -n 1; }
# why LOG: the run's last line, for the FAIL message
why() { tail -n 1 "$1" | cut -c 1-300; }
done_ok() { echo "ok   $NAME ($(( $(date +%s) - t0 ))s)"; exit 0; }

case $KIND in
digest)
  run "$T/sim" "$@"; run "$T/cuda" $CUDA --exact "$@"
  ds=$(digest "$T/sim"); dc=$(digest "$T/cuda")
  [ -n "$ds" ] && [ "$ds" = "$dc" ] && done_ok
  echo "FAIL $NAME: sim '$ds' cuda '$dc'; cuda said: $(why "$T/cuda")" ;;
fast)
  run "$T/sim" "$@" --steps-per-print 1; run "$T/cuda" $CUDA "$@" --steps-per-print 1
  ls=$(final_loss "$T/sim"); lc=$(final_loss "$T/cuda")
  # Z-CUDA-005: relative 1e-3 for fp32, 2e-2 for the 16-bit dtypes
  tol=0.02; case " $* " in *" fp32 "*) tol=0.001 ;; esac
  awk -v a="$lc" -v b="$ls" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
      exit !(a != "" && b != "" && d <= t * (m > 1e-6 ? m : 1e-6)) }' && done_ok
  echo "FAIL $NAME: last loss sim '$ls' cuda '$lc' (tolerance $tol relative); cuda said: $(why "$T/cuda")" ;;
resume)
  from=${DIR%>*} to=${DIR#*>}
  for b in "$from" "$to"; do
    case $b in sim|cuda) ;; *) echo "FAIL $NAME: resume wants sim>cuda or cuda>sim, not '$b'"; exit 1 ;; esac
  done
  be() { [ "$1" = cuda ] && echo "$CUDA --exact"; }
  run "$T/base" "$@" --steps 10
  # shellcheck disable=SC2046 # be's words are flags
  run "$T/w" $(be "$from") "$@" --steps 5 --checkpoint-dir "$T/ck" --checkpoint-interval 5
  run "$T/r" $(be "$to") "$@" --steps 10 --checkpoint-dir "$T/ck" --resume
  db=$(digest "$T/base"); dr=$(digest "$T/r")
  [ -n "$db" ] && [ "$db" = "$dr" ] && done_ok
  echo "FAIL $NAME: 10 steps '$db', $from 5 then $to 5 '$dr'; writer said: $(why "$T/w"); reader said: $(why "$T/r")" ;;
*)
  echo "FAIL $NAME: gpu_job.sh: unknown kind '$KIND'" ;;
esac
keep
exit 1
