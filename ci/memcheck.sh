#!/bin/sh
# Valgrind gate: memcheck (errors and leaks) over every unit-test binary and a
# short simulated run of every stage; helgrind and DRD (races, lock order)
# over multi-rank runs of the simulator. Fails on the first report.
B=${1:-build-vg}
Z=$B/zinc
MC="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --track-fds=yes"
RUN="train --world-size 3 --steps 3 --train-batch-size 12 --model mlp:8,12,5 --steps-per-print 0"
fail=0
n=0
export ZINC_UNDER_VALGRIND=1   # tests that crash children on purpose skip themselves
check() {   # name, command...
  name=$1; shift
  n=$((n + 1))
  if "$@" >/tmp/zinc-vg.out 2>&1; then echo "ok   $name"
  else echo "FAIL $name"; tail -n 40 /tmp/zinc-vg.out; fail=$((fail + 1)); fi
}
for t in "$B"/tests/test_*; do
  check "memcheck $(basename "$t")" $MC "$t"
done
for s in 0 1 2 3; do
  check "memcheck zinc train stage $s" $MC $Z $RUN --stage $s
done
check "memcheck zinc spec (error cases)" $MC $Z spec run spec/cases/cli
for s in 2 3; do
  check "helgrind zinc train stage $s" valgrind -q --tool=helgrind --error-exitcode=98 $Z $RUN --stage $s
  check "drd zinc train stage $s" valgrind -q --tool=drd --error-exitcode=98 $Z $RUN --stage $s
done
rm -f /tmp/zinc-vg.out
echo "memcheck: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
