#!/bin/sh
# CLI checks: exit statuses, messages and outputs of `zinc` as a user sees
# them. Each check names its spec clause. Prints "cli: N passed, N failed".
ZINC=${ZINC:-build/zinc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# expect_fail ID STATUS SUBSTRING -- zinc args...
expect_fail() {
  id=$1; want=$2; sub=$3; shift 4
  "$ZINC" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$id" "exit $rc, expected $want ($(cat "$T/err"))"; return; fi
  if ! grep -qF -- "$sub" "$T/err"; then bad "$id" "stderr '$(cat "$T/err")' lacks '$sub'"; return; fi
  if [ "$(wc -l <"$T/err")" -ne 1 ]; then bad "$id" "expected one message line, got: $(cat "$T/err")"; return; fi
  ok "$id"
}

# spec: Z-CLI-003 a JSON syntax error names line and column, exit 2
printf '{\n  "train_batch_size": 8,\n  "zero_optimization": {"stage": 2,}\n}\n' >"$T/syntax.json"
expect_fail Z-CLI-003 2 "syntax.json:3:" -- train --config "$T/syntax.json" --steps 1
# spec: Z-CLI-003 a wrong type names its JSON path
printf '{"train_batch_size": 8, "zero_optimization": {"stage": "two"}}\n' >"$T/type.json"
expect_fail Z-CLI-003-type 2 "zero_optimization.stage" -- train --config "$T/type.json" --steps 1
# spec: Z-CLI-003 unknown key inside zero_optimization is refused
printf '{"train_batch_size": 8, "zero_optimization": {"stage": 1, "bogus": 1}}\n' >"$T/unk.json"
expect_fail Z-CLI-003-unknown 2 "zero_optimization.bogus" -- train --config "$T/unk.json" --world-size 2 --steps 1
# spec: Z-CLI-004 a batch the world size does not divide
printf '{"train_batch_size": 33, "train_micro_batch_size_per_gpu": 17, "gradient_accumulation_steps": 2}\n' >"$T/batch.json"
expect_fail Z-CLI-004 2 "train_batch_size" -- train --config "$T/batch.json" --world-size 2 --steps 1
expect_fail Z-CLI-004-world 2 "train_batch_size" -- train --train-batch-size 10 --micro-batch 4 --world-size 2 --steps 1
# spec: Z-CLI-005 a model spec that does not parse
expect_fail Z-CLI-005 2 "mlp:4,x" -- train --model mlp:4,x --steps 1
expect_fail Z-CLI-005-kind 2 "cnn" -- train --model cnn:3,4 --steps 1
# spec: Z-CLI-006 unknown flags and bad flag values
expect_fail Z-CLI-006 2 "--frobnicate" -- train --frobnicate 1
expect_fail Z-CLI-006-value 2 "--stage" -- train --stage 7
expect_fail Z-CLI-006-missing 2 "does-not-exist.json" -- train --config "$T/does-not-exist.json"
expect_fail Z-CLI-006-cmd 2 "unknown command" -- frobnicate

# spec: Z-CLI-001 stage 0 and stage 3 at world size 4 print the same digest
"$ZINC" train --stage 0 --world-size 4 --steps 20 >"$T/s0" 2>&1 &&
"$ZINC" train --stage 3 --world-size 4 --steps 20 >"$T/s3" 2>&1
d0=$(grep '^digest=' "$T/s0"); d3=$(grep '^digest=' "$T/s3")
if [ -n "$d0" ] && [ "$d0" = "$d3" ]; then ok Z-CLI-001; else bad Z-CLI-001 "digests '$d0' vs '$d3'"; fi

# spec: Z-CLI-002 the default run prints step lines, the loss falls from about ln(10), then the digest
"$ZINC" train >"$T/def" 2>&1
first=$(grep '^step=10 ' "$T/def" | sed 's/.*loss=\([0-9.]*\).*/\1/')
last=$(grep '^step=100 ' "$T/def" | sed 's/.*loss=\([0-9.]*\).*/\1/')
if grep -q '^digest=[0-9a-f]\{16\}$' "$T/def" && [ -n "$first" ] && [ -n "$last" ] &&
   awk -v a="$first" -v b="$last" 'BEGIN { exit !(a < 2.6 && b < a * 0.9) }'; then
  ok Z-CLI-002
else
  bad Z-CLI-002 "output: $(head -c 600 "$T/def")"
fi

# spec: Z-CLI-007 --log writes one CSV row per step under a header
"$ZINC" train --steps 7 --log "$T/log.csv" >/dev/null 2>&1
rows=$(wc -l <"$T/log.csv" 2>/dev/null)
if [ "$rows" = 8 ] && head -n 1 "$T/log.csv" | grep -q '^step,loss,lr,grad_norm'; then ok Z-CLI-007
else bad Z-CLI-007 "log has $rows lines"; fi

# spec: Z-CLI-008 the same command twice prints the same output digest (determinism)
"$ZINC" train --stage 2 --world-size 3 --steps 15 --train-batch-size 24 >"$T/r1" 2>&1
"$ZINC" train --stage 2 --world-size 3 --steps 15 --train-batch-size 24 >"$T/r2" 2>&1
if grep -q '^digest=' "$T/r1" && [ "$(sed 's/ time_ms=.*//' "$T/r1")" = "$(sed 's/ time_ms=.*//' "$T/r2")" ]; then ok Z-CLI-008
else bad Z-CLI-008 "outputs differ"; fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
