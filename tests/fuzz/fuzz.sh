#!/bin/sh
# fuzz.sh BUILD SECONDS TARGET...: runs each libFuzzer harness
# BUILD/fuzz/fuzz_TARGET for SECONDS (under nice: the machine is shared).
# New inputs go to BUILD/fuzz/corpus/TARGET, a copy that grows from run to
# run; the committed corpus tests/fuzz/TARGET/ is only read. A crash, leak,
# timeout or out-of-memory input lands in BUILD/fuzz/artifacts/TARGET/ and
# fails the run: fix the defect, then commit the input as
# tests/fuzz/TARGET/crash-<name> so every `make sanitize` replays it.
# Prints each target's final coverage line and "fuzz: N passed, N failed"
# (one per target). Spec Z-FUZZ-007.
B=$1; S=$2; shift 2
pass=0; fail=0
for t in "$@"; do
  work="$B/fuzz/corpus/$t"; art="$B/fuzz/artifacts/$t"
  mkdir -p "$work" "$art"
  [ -n "$(ls -A "$work")" ] || cp "tests/fuzz/$t"/* "$work"/
  before=$(ls "$art" | wc -l)
  log="$B/fuzz/$t.log"
  nice "$B/fuzz/fuzz_$t" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "tests/fuzz/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  last=$(grep -aE '^#[0-9]+' "$log" | tail -n 1)
  echo "fuzz $t: ${S}s, $execs runs; $last"
  new=$(ls "$art" | wc -l)
  if [ "$rc" -ne 0 ] || [ "$new" -ne "$before" ]; then
    fail=$((fail + 1))
    grep -aE 'ERROR|SUMMARY|==[0-9]+==|fuzz:|Test unit written' "$log" | head -n 20
    echo "fuzz $t: FAILED (exit $rc); log $log; inputs in $art/"
  else
    pass=$((pass + 1))
  fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
