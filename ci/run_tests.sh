#!/bin/sh
# Runs the whole suite against the build in $1 (default build): every unit-test
# binary (cmocka), the conformance cases (zinc spec run), the CLI checks,
# 300 hostile config mutants (tests/mutants_test.sh), the fuzz corpora
# replayed (tests/fuzz/replay.sh),
# the multi-process checks (tests/proc_test.sh), the GPU session's harness
# rehearsed without a GPU (tests/gpu_session_test.sh) and the spec-coverage check.
# Prints each part's own lines, then one total:
#   zinc: N passed, N failed
# Exits non-zero if anything failed or a test binary crashed.
#
# The parts are independent: ZINC_TEST_JOBS of them (default: the core count
# plus one) run at a time, each into a log file of its own, the longest started
# first; the logs are then printed in the fixed order below, so the output,
# the counts and the exit status are those of a run one part after another.
# ZINC_TEST_JOBS=1 runs them one after another, printing each as it ends.
# ZINC_TEST_TIMES=1 adds each part's seconds and CPU time after its lines
# ("time NAME: S s, cpu USER SYSTEM").
B=${1:-build}
ZINC=$B/zinc
export ZINC
# JOBS, the log folder $D and the slots (ci/jobs.sh). One part more than
# the cores: the multi-process parts (proc, fault) spend most of their time
# waiting on sockets, timeouts and child processes, so a third part on 2
# cores fills that time (159 s -> 137 s on this 2-core machine)
: "${ZINC_TEST_JOBS:=$(( $(nproc 2>/dev/null || echo 1) + 1 ))}"
. ci/jobs.sh
pass=0
fail=0
crashed=""

count() {   # $1 = passed, $2 = failed
  pass=$((pass + $1)); fail=$((fail + $2))
}

# the parts, in the order their lines are printed: every unit-test binary,
# then the named parts, then the spec-coverage check (speccov)
order=""
for t in "$B"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  case $name in *_gpu) continue ;; esac   # need a GPU: make test-gpu runs them
  order="$order $name"
done
order="$order spec cli clicover climore mutants fuzz proc fault alloc adamref build progress clihelp readme readmefigures launchgroup"
# the rehearsal checks shell scripts driving ordinary simulator runs, which
# the other parts already hold to the sanitizers and gcov: make sanitize and
# make coverage leave it out (ZINC_REHEARSE=0), to keep CI under its hour
if [ "${ZINC_REHEARSE:-1}" = 1 ]; then order="$order gpusession"; else order="$order norehearse"; fi
order="$order speccov"

# cmd NAME: runs part NAME (its output goes to the caller's redirection)
cmd() {
  case $1 in
    test_*) "$B/tests/$1" ;;
    spec) "$ZINC" spec run ;;
    cli) sh tests/cli_test.sh ;;
    clicover) sh tests/cli_cover_test.sh ;;
    climore) sh tests/cli_more_test.sh ;;
    mutants) sh tests/mutants_test.sh ;;
    fuzz) sh tests/fuzz/replay.sh "$B" ;;
    proc) sh tests/proc_test.sh ;;
    fault) sh tests/fault_test.sh ;;
    alloc) sh tests/alloc_test.sh "$B" ;;
    adamref) python3 tests/adam_ref.py --check ;;
    build) sh tests/build_test.sh "$B" ;;
    progress) sh tests/progress_test.sh ;;
    clihelp) sh tests/cli_help_test.sh ;;
    readme) sh tests/readme_test.sh ;;
    readmefigures) sh tests/readme_figures_test.sh ;;
    launchgroup) sh tests/launch_group_test.sh ;;
    gpusession) sh tests/gpu_session_test.sh "$B" ;;
    norehearse) echo "gpusession: left out of this build's run (make test runs it)" ;;
    speccov) "$ZINC" spec coverage ;;
  esac
}

# run NAME: runs part NAME into $D/NAME.log, its exit status into $D/NAME.rc,
# its seconds and CPU time (user and system, its processes') into $D/NAME.s
run() {
  t0=$(date +%s)
  ( cmd "$1" >"$D/$1.log" 2>&1 </dev/null
    rc=$?
    echo "$(($(date +%s) - t0))" >"$D/$1.s"; times >"$D/$1.cpu"
    exit $rc )
  echo $? >"$D/$1.rc"
}

# report NAME: prints part NAME's lines from its log and adds its counts
report() {
  name=$1; log=$D/$1.log; rc=$(cat "$D/$1.rc" 2>/dev/null || echo 255)
  case $name in
    test_*)   # a cmocka binary: its summary lines, its whole log when it failed
      p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log" | tail -n 1)
      f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
      p=${p:-0}; f=${f:-0}
      if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        crashed="$crashed $name(rc=$rc)"
        f=1
      fi
      [ "$f" -ne 0 ] && cat "$log"
      echo "$name: $p passed, $f failed"
      count "$p" "$f" ;;
    norehearse) cat "$log" ;;
    speccov)
      if [ "$rc" -eq 0 ]; then tail -n 1 "$log"; count 1 0
      else cat "$log"; count 0 1; fi ;;
    *)   # a part that ends with "NAME: N passed, N failed": its non-ok lines
         # and its counts (a crash without the line counts as one failure)
      grep -v '^ok ' "$log"
      p=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed/\1/p" "$log")
      f=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed/\2/p" "$log")
      p=${p:-0}; f=${f:-0}
      [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { crashed="$crashed $name(rc=$rc)"; f=1; }
      count "$p" "$f" ;;
  esac
  [ -n "$ZINC_TEST_TIMES" ] && echo "time $name: $(cat "$D/$name.s" 2>/dev/null) s, cpu $(sed -n 2p "$D/$name.cpu" 2>/dev/null)"
}

if [ "$JOBS" -eq 1 ]; then
  for n in $order; do run "$n"; report "$n"; done
else
  # the longest parts first, so that no long one starts last and runs alone
  # (on 2 cores: alloc 130-150 s, fault 55, proc 40-60, test_zeropp 25-35,
  # test_run_faults 10-20 (the NVMe swap's I/O), cli 10-25 in make test;
  # under gcov test_offload 370-700 s, test_zeropp 300-430, alloc 130,
  # cli 80); then the rest in the printed order
  first=""
  for n in alloc test_offload test_zeropp fault proc test_run_faults cli spec test_ds_ckpt gpusession test_store mutants test_sim readme; do
    case " $order " in *" $n "*) first="$first $n" ;; esac
  done
  rest=""
  for n in $order; do
    case " $first " in *" $n "*) ;; *) rest="$rest $n" ;; esac
  done
  # JOBS slots: a part takes one to start and gives it back when it ends
  slots
  for n in $first $rest; do
    read -r _ <&3
    ( run "$n" 3>&-; echo >&3 ) &
    eval "pid_$n=$!"
  done
  for n in $order; do
    eval "wait \$pid_$n"
    report "$n"
  done
  exec 3>&-
fi

[ -n "$crashed" ] && echo "crashed or failed without a report:$crashed"
echo "zinc: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
