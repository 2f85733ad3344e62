#!/bin/sh
# Valgrind gate: memcheck (errors and leaks) over every unit-test binary, a
# short simulated run of every stage and a sample of the allocation-failure
# loop; helgrind and DRD (races, lock order) over multi-rank runs of the
# simulator. Counts every report.
# The checks are independent runs: ZINC_TEST_JOBS of them (default: the core
# count, as ci/run_tests.sh) run at a time, each into a file of its own; their
# lines come in the order below at each `settle` (where later checks need the
# earlier ones done). ZINC_TEST_JOBS=1 runs them one after another.
B=${1:-build-vg}
Z=$B/zinc
MC="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --track-fds=yes"
RUN="train --world-size 3 --steps 3 --train-batch-size 12 --model mlp:8,12,5 --steps-per-print 0"
# JOBS, the folder $D for the checks' files and the slots (ci/jobs.sh)
. ci/jobs.sh
fail=0
n=0
pending=""
if [ "$JOBS" -gt 1 ]; then slots; fi
export ZINC_UNDER_VALGRIND=1   # tests that crash children on purpose skip themselves
check() {   # name, command...: started now, its line printed at the next settle
  n=$((n + 1))
  echo "$1" >"$D/$n.name"; shift
  if [ "$JOBS" -eq 1 ]; then
    "$@" >"$D/$n.out" 2>&1; echo $? >"$D/$n.rc"
    pending=" $n:"; settle
  else
    read -r _ <&3
    ( "$@" >"$D/$n.out" 2>&1 </dev/null 3>&-; echo $? >"$D/$n.rc"; echo >&3 ) &
    pending="$pending $n:$!"
  fi
}
settle() {   # waits for the checks started so far; prints their lines in order
  # (_e, _c: names no loop below uses, as check may call it inside one)
  for _e in $pending; do
    _c=${_e%%:*}; [ -n "${_e#*:}" ] && wait "${_e#*:}"
    if [ "$(cat "$D/$_c.rc" 2>/dev/null)" = 0 ]; then echo "ok   $(cat "$D/$_c.name")"
    else echo "FAIL $(cat "$D/$_c.name")"; tail -n 40 "$D/$_c.out"; fail=$((fail + 1)); fi
    rm -f "$D/$_c.out"
  done
  pending=""
}
for t in "$B"/tests/test_*; do
  check "memcheck $(basename "$t")" $MC "$t"
done
for s in 0 1 2 3; do
  check "memcheck zinc train stage $s" $MC $Z $RUN --stage $s
done
check "memcheck zinc spec (error cases)" $MC $Z spec run spec/cases/cli
# a dry run at 512 ranks with ZeRO++ groups, the fit, the time, the JSON and
# the picture; calibrate's quick pass over 2 simulated ranks (Z-CAP, Z-CAL)
PD=$(mktemp -d)
printf '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8, "zero_quantized_weights": true}}\n' >"$PD/z.json"
check "memcheck zinc plan" $MC $Z plan --config "$PD/z.json" --model gpt2-medium --world-size 512 --steps 1 --machine dgx-a100 --svg "$PD/p.svg"
check "memcheck zinc plan --json" $MC $Z plan --model mlp:64,64,8 --world-size 16 --steps 1 --device-memory 1MB --json
check "memcheck zinc calibrate" $MC $Z calibrate --world-size 2 --quick -o "$PD/m.json"
# GPT-2 at stage 3 with prefetch, reuse and activation checkpointing, and
# at stage 2 in bf16 with two host threads under helgrind
GPT="train --model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 8 --world-size 2 --steps 2 --train-batch-size 4 --steps-per-print 0"
GCFG=$(mktemp)
printf '{"train_batch_size": 4, "activation_checkpointing": {}, "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 100000}}\n' >"$GCFG"
check "memcheck zinc train gpt2 stage 3" $MC $Z $GPT --stage 3 --steps 3 --config "$GCFG"
check "helgrind zinc train gpt2 stage 2" valgrind -q --tool=helgrind --error-exitcode=98 $Z $GPT --stage 2 --dtype bf16 --threads 2
# a GPT-2 checkpoint exported for transformers and sampled (Z-HF-001, Z-SAMPLE-002)
GK=$(mktemp -d)
$Z train --model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 16 --world-size 2 --steps 2 \
  --checkpoint-dir "$GK/ck" --checkpoint-interval 2 >/dev/null 2>&1
check "memcheck zinc ckpt consolidate --hf" $MC $Z ckpt consolidate --input "$GK/ck/global_step2" --hf "$GK/hf" --dtype bf16
check "memcheck zinc sample" $MC $Z sample --checkpoint-dir "$GK/ck" --prompt GNU --max-new-tokens 40 --logits "$GK/l.st"
check "memcheck zinc sample --temperature" $MC $Z sample --checkpoint-dir "$GK/ck" --prompt GNU --max-new-tokens 40 \
  --temperature 0.9 --top-k 8 --seed 5
for s in 2 3; do
  check "helgrind zinc train stage $s" valgrind -q --tool=helgrind --error-exitcode=98 $Z $RUN --stage $s
  check "drd zinc train stage $s" valgrind -q --tool=drd --error-exitcode=98 $Z $RUN --stage $s
done
# group collectives (ZeRO++'s hpZ, qwZ, qgZ; MiCS's hierarchical gather) on
# 4 ranks in 2 simulated nodes, under both
ZP=$(mktemp -d)
printf '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2, "zero_quantized_weights": true, "zero_quantized_gradients": true}}\n' >"$ZP/zpp.json"
printf '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "mics_shard_size": 4, "mics_hierarchical_params_gather": true}}\n' >"$ZP/mics.json"
for c in zpp mics; do
  for tool in helgrind drd; do
    check "$tool zinc train $c" valgrind -q --tool=$tool --error-exitcode=98 $Z train --world-size 4 --ranks-per-node 2 \
      --steps 2 --model mlp:8,12,5 --steps-per-print 0 --config "$ZP/$c.json"
  done
done
# a checkpoint save (rank 0 writes the module file on a second thread) and a
# resume (every rank parses its shard's header at once) under both
# (each tool its own folder: the saves, then the resumes from them)
CK=$(mktemp -d)
for tool in helgrind drd; do
  check "$tool zinc train save" valgrind -q --tool=$tool --error-exitcode=98 $Z $RUN --stage 3 --steps 2 \
    --checkpoint-dir "$CK/$tool" --checkpoint-interval 1
done
settle
for tool in helgrind drd; do
  check "$tool zinc train resume" valgrind -q --tool=$tool --error-exitcode=98 $Z $RUN --stage 3 \
    --checkpoint-dir "$CK/$tool" --resume
done
# The allocation-failure loop (Z-CKPT-012) leaks nothing: every 9th of the
# allocations of a stage-3 fp16 run that saves a checkpoint every step fails
# under memcheck (the shim's malloc stands before valgrind's: valgrind then
# replaces only libc's), and each point must end cleanly (exit 0-3) with no
# memcheck error and no definite or indirect leak.
SHIM=$(pwd)/$B/tests/libfailmalloc.so
ARUN="train --stage 3 --world-size 2 --dtype fp16 --model mlp:6,8,4 --steps 2 --train-batch-size 8 --steps-per-print 0 --checkpoint-interval 1"
VT=$(mktemp -d)
alloc_point() {   # k: fails the k-th allocation (in folder VT/k); 0 when clean and leak-free
  env ZN_FAIL_ALLOC=$1 ZN_FAIL_ALLOC_REPORT="$VT/$1.rep" ZN_FAIL_ALLOC_PROG=zinc LD_PRELOAD="$SHIM" \
    $MC --soname-synonyms=somalloc=nouserintercepts $Z $ARUN --checkpoint-dir "$VT/$1"
  rc=$?
  [ "$rc" -le 3 ] && grep -q "fired 1" "$VT/$1.rep"
}
alloc_point 0 >/dev/null 2>&1
total=$(sed -n 's/^allocations \([0-9]*\) .*/\1/p' "$VT/0.rep")
if [ "${total:-0}" -gt 100 ]; then
  for k in $(seq 1 9 "$total"); do check "memcheck allocation failure $k of $total" alloc_point "$k"; done
else
  settle; n=$((n + 1)); fail=$((fail + 1)); echo "FAIL memcheck allocation loop: the run made ${total:-no} allocations"
fi
settle
rm -rf "$PD" "$GCFG" "$GK" "$ZP" "$CK" "$VT"
echo "memcheck: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
