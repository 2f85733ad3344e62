#!/bin/sh
# replay.sh BUILD [TARGET...]: replays every committed corpus (tests/fuzz/TARGET/,
# crash inputs included) through BUILD/fuzz/replay_TARGET (replay_main.c),
# shows each target's line and the files that failed, then one total:
#   fuzz: N passed, N failed
# Run by ci/run_tests.sh (make test; make sanitize under ASan/UBSan) and
# make fuzz-replay (spec Z-FUZZ-008).
B=$1; shift
[ $# -eq 0 ] && set -- $(cd tests/fuzz && for d in */; do echo "${d%/}"; done)   # every target
pass=0; fail=0
for t in "$@"; do
  out=$("$B/fuzz/replay_$t" "tests/fuzz/$t" 2>&1)
  echo "$out" | grep -v '^ok '
  p=$(echo "$out" | sed -n "s/^fuzz $t: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p")
  f=$(echo "$out" | sed -n "s/^fuzz $t: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p")
  [ -z "$p" ] && { p=0; f=1; echo "fuzz $t: the replay driver died without its line"; }
  pass=$((pass + p)); fail=$((fail + f))
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
