#!/bin/sh
# CLI checks of the checkers and the conformance runner: the flags and
# errors of `zinc compare` and `zinc stepper`, and what `zinc spec run` and
# `zinc spec coverage` print when a case or a tree is wrong. Tiny models,
# few steps. Each check names its spec clause. Prints "clicover: N passed,
# N failed".
ZINC=${ZINC:-build/zinc}
. tests/lib.sh
M="--model mlp:6,8,4"

# usage_err ID STATUS LINE -- zinc args...: exit STATUS and stderr exactly
# the one line LINE
usage_err() {
  id=$1; want=$2; line=$3; shift 4
  "$ZINC" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$id" "exit $rc, expected $want ($(cat "$T/err"))"; return; fi
  if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qxF -- "$line" "$T/err"; then
    bad "$id" "stderr '$(cat "$T/err")', expected '$line'"; return
  fi
  ok "$id"
}

# ---- zinc compare: flags and errors ---------------------------------------
# spec: Z-CLI-006 a bad --rtol/--atol value (a word, empty, overflow, NaN, negative) is one message, exit 2
usage_err "Z-CLI-006 compare --rtol word" 2 "zinc: error: --rtol: expected a non-negative number, got 'abc'" -- compare $M --stage 1 --rtol abc
usage_err "Z-CLI-006 compare --rtol empty" 2 "zinc: error: --rtol: expected a non-negative number, got ''" -- compare $M --stage 1 --rtol ""
usage_err "Z-CLI-006 compare --rtol overflow" 2 "zinc: error: --rtol: expected a non-negative number, got '1e400'" -- compare $M --stage 1 --rtol 1e400
usage_err "Z-CLI-006 compare --atol suffix" 2 "zinc: error: --atol: expected a non-negative number, got '1e-3x'" -- compare $M --stage 1 --atol 1e-3x
usage_err "Z-CLI-006 compare --atol nan" 2 "zinc: error: --atol: expected a non-negative number, got 'nan'" -- compare $M --stage 1 --atol nan
usage_err "Z-CLI-006 compare --atol negative" 2 "zinc: error: --atol: expected a non-negative number, got '-1'" -- compare $M --stage 1 --atol -1
# spec: Z-OFF-014 --offload takes none, cpu or nvme
usage_err "Z-OFF-014 compare --offload disk refused" 2 "zinc: error: --offload: expected none, cpu or nvme, got 'disk'" -- compare $M --stage 1 --offload disk
# spec: Z-REP-001 --fault STEP:RANK:INDEX[:DELTA]: a malformed value, a step below 1, a negative rank or index, a rank outside the world
usage_err "Z-REP-001 compare --fault word" 2 "zinc: error: --fault: expected STEP:RANK:INDEX[:DELTA], got 'x'" -- compare $M --stage 1 --fault x
usage_err "Z-REP-001 compare --fault two fields" 2 "zinc: error: --fault: expected STEP:RANK:INDEX[:DELTA], got '1:0'" -- compare $M --stage 1 --fault 1:0
usage_err "Z-REP-001 compare --fault step 0" 2 "zinc: error: --fault: expected STEP:RANK:INDEX[:DELTA], got '0:0:0'" -- compare $M --stage 1 --fault 0:0:0
usage_err "Z-REP-001 compare --fault rank -1" 2 "zinc: error: --fault: expected STEP:RANK:INDEX[:DELTA], got '1:-1:0'" -- compare $M --stage 1 --fault 1:-1:0
usage_err "Z-REP-001 compare --fault index -1" 2 "zinc: error: --fault: expected STEP:RANK:INDEX[:DELTA], got '1:0:-1'" -- compare $M --stage 1 --fault 1:0:-1
usage_err "Z-REP-001 compare --fault rank beyond world" 2 "zinc: error: --fault: rank 2 is not below the world size 2" -- compare $M --stage 1 --world-size 2 --train-batch-size 16 --fault 1:2:0
# spec: Z-REP-001 an index beyond the rank's master partition is refused (it
# would change nothing and the checker would pass): the 92 elements are 24
# per rank of 4 at stage 1 (padded), all 92 at stage 0
usage_err "Z-REP-001 compare --fault index beyond the partition" 2 "zinc: error: --fault: index 24 is not in rank 0's master partition of 24 elements (stage 1)" -- compare $M --stage 1 --fault 1:0:24
usage_err "Z-REP-001 compare --fault index beyond the stage-0 model" 2 "zinc: error: --fault: index 99999 is not in rank 0's master partition of 92 elements (stage 0)" -- compare $M --stage 0 --fault 1:0:99999
# spec: Z-REP-001 --stage K is required
usage_err "Z-REP-001 compare needs --stage" 2 "zinc: error: zinc compare needs --stage K" -- compare $M --world-size 2
# spec: Z-CLI-006 an unknown flag with a value; a train flag out of range; Z-CLI-005 a bad model spec
usage_err "Z-CLI-006 compare unknown flag with value" 2 "zinc: error: unknown flag '--frob' for 'zinc compare'" -- compare $M --stage 1 --frob 1
usage_err "Z-CLI-006 compare --stage 9" 2 "zinc: error: --stage: expected an integer in 0..3, got '9'" -- compare $M --stage 9
usage_err "Z-CLI-005 compare bad model" 2 "zinc: error: model spec 'mlp:4,x': 'x' is not a positive integer" -- compare --model mlp:4,x --stage 1
# spec: Z-CLI-006 a log file that cannot be opened fails the baseline run, exit 1
usage_err "Z-CLI-006 compare unwritable log" 1 "zinc: error: baseline: cannot open log file '$T/no/x.csv': No such file or directory" -- compare $M --stage 1 --steps 2 --log "$T/no/x.csv"
# spec: Z-SCALE-009 a stage-K run that fails (here: a planted huge fault makes
# fp16 overflow with the scale already at its minimum) ends compare with the
# stage's error, exit 1
printf '{"train_micro_batch_size_per_gpu": 4, "fp16": {"enabled": true, "initial_scale_power": 0, "min_loss_scale": 1, "hysteresis": 1}}\n' >"$T/min.json"
usage_err "Z-SCALE-009 compare: the stage-K run's error" 1 "zinc: error: stage 1: rank 0: step 2: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. (loss scale 1 == min_loss_scale 1, overflow at scaler iteration 1)" -- compare $M --config "$T/min.json" --stage 1 --world-size 2 --steps 3 --fault 1:0:3:1e30

# spec: Z-REP-001 --rtol, --atol and --offload none are taken; the header
# names them; one line per step, then TEST PASSED
"$ZINC" compare $M --stage 1 --world-size 2 --train-batch-size 16 --steps 3 --rtol 0.5 --atol 0.25 --offload none >"$T/cmp" 2>&1
rc=$?
if [ $rc = 0 ] && grep -qx "zinc compare: stage 1 against stage 0, fp32, world size 2, 3 steps, rtol 0.5, atol 0.25" "$T/cmp" &&
   [ "$(grep -c '^step=[0-9]* loss=.* | max abs diff: loss 0.000e+00 grad 0.000e+00 param 0.000e+00 | ' "$T/cmp")" = 3 ] &&
   [ "$(tail -n 1 "$T/cmp")" = "TEST PASSED" ]; then ok "Z-REP-001 compare with tolerances and --offload none"
else bad "Z-REP-001 compare with tolerances" "exit $rc: $(cat "$T/cmp")"; fi
# spec: Z-ENG-010 with accumulation stage 2 differs from stage 0 in rounding:
# Z-REP-001 at the default tolerance 0 the first divergence is a gradient of
# step 1 (the losses agree), named with its element and owning rank ...
"$ZINC" compare $M --stage 2 --world-size 2 --micro-batch 4 --train-batch-size 16 --steps 3 >"$T/cmp" 2>&1
rc=$?
if [ $rc = 1 ] && grep -qx "TEST FAILED: step 1, gradient 'layers.0.weight' element [0-9]* (rank [01]): baseline [-0-9.e]*, stage 2 [-0-9.e]* (|diff| [0-9.e+-]* > atol 0 + rtol 0 \* |baseline|)" "$T/cmp"; then
  ok "Z-ENG-010 compare: stage 2 with accumulation fails on a step-1 gradient at tolerance 0"
else bad "Z-ENG-010 compare gradient divergence" "exit $rc: $(tail -n 2 "$T/cmp")"; fi
# ... and Z-ENG-010's absolute 1e-5 makes it pass
"$ZINC" compare $M --stage 2 --world-size 2 --micro-batch 4 --train-batch-size 16 --steps 3 --atol 1e-5 >"$T/cmp" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(tail -n 1 "$T/cmp")" = "TEST PASSED" ]; then ok "Z-ENG-010 compare: within atol 1e-5 with accumulation"
else bad "Z-ENG-010 compare within atol" "exit $rc: $(tail -n 2 "$T/cmp")"; fi

# ---- zinc stepper: flags and errors ---------------------------------------
printf '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 0}}\n' >"$T/A.json"
printf '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 3}}\n' >"$T/B.json"
printf '{"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 1}}\n' >"$T/C.json"
S="stepper $M --base $T/A.json --test $T/B.json"
# spec: Z-REP-006 --track takes a list of params, grads, loss
usage_err "Z-REP-006 stepper --track word" 2 "zinc: error: --track: expected a list of params,grads,loss, got 'foo'" -- $S --track foo
# spec: Z-CLI-006 bad tolerance and count values, a flag without its value, an unknown flag, a missing --base
usage_err "Z-CLI-006 stepper --param-tol word" 2 "zinc: error: --param-tol: expected a non-negative number, got 'x'" -- $S --param-tol x
usage_err "Z-CLI-006 stepper --grad-tol negative" 2 "zinc: error: --grad-tol: expected a non-negative number, got '-1'" -- $S --grad-tol -1
usage_err "Z-CLI-006 stepper --loss-tol inf" 2 "zinc: error: --loss-tol: expected a non-negative number, got 'inf'" -- $S --loss-tol inf
usage_err "Z-CLI-006 stepper --batches 0" 2 "zinc: error: --batches: expected a positive integer, got '0'" -- $S --batches 0
usage_err "Z-CLI-006 stepper --batches too many" 2 "zinc: error: --batches: expected a positive integer, got '1000001'" -- $S --batches 1000001
usage_err "Z-CLI-006 stepper --test-every overflow" 2 "zinc: error: --test-every: expected a positive integer, got '99999999999999999999'" -- $S --test-every 99999999999999999999
usage_err "Z-CLI-006 stepper --status-every suffix" 2 "zinc: error: --status-every: expected a positive integer, got '2x'" -- $S --status-every 2x
usage_err "Z-CLI-006 stepper --world-size word" 2 "zinc: error: --world-size: expected a positive integer, got 'two'" -- $S --world-size two
usage_err "Z-CLI-006 stepper --base-world-size empty" 2 "zinc: error: --base-world-size: expected a positive integer, got ''" -- $S --base-world-size ""
usage_err "Z-CLI-006 stepper --test-world-size negative" 2 "zinc: error: --test-world-size: expected a positive integer, got '-3'" -- $S --test-world-size -3
usage_err "Z-CLI-006 stepper flag without value" 2 "zinc: error: --batches needs a value (or is unknown to 'zinc stepper')" -- $S --batches
usage_err "Z-CLI-006 stepper unknown flag" 2 "zinc: error: unknown flag '--frob' for 'zinc stepper'" -- $S --frob 1
usage_err "Z-REP-006 stepper needs --base" 2 "zinc: error: zinc stepper needs --base A.json and --test B.json" -- stepper --test "$T/B.json"
usage_err "Z-CLI-006 stepper missing base config" 2 "zinc: error: cannot open '$T/none.json': No such file or directory" -- stepper $M --base "$T/none.json" --test "$T/B.json"
usage_err "Z-CLI-006 stepper missing test config" 2 "zinc: error: cannot open '$T/none.json': No such file or directory" -- stepper $M --base "$T/A.json" --test "$T/none.json"
usage_err "Z-CLI-005 stepper bad model" 2 "zinc: error: model spec 'mlp:4,x': 'x' is not a positive integer" -- $S --model mlp:4,x
# spec: Z-REP-006 the two engines' train_batch_size must agree (other micro-batch, or other world sizes)
usage_err "Z-REP-006 stepper: different micro-batch" 2 "zinc: error: base and test see different batches: train_batch_size 8 vs 16" -- stepper $M --base "$T/A.json" --test "$T/C.json" --world-size 2
usage_err "Z-REP-006 stepper: different world sizes" 2 "zinc: error: base and test see different batches: train_batch_size 4 vs 8" -- $S --base-world-size 1 --test-world-size 2
# spec: Z-SCALE-009 a test engine whose run fails (fp16 overflowing at the minimum scale) ends the stepper with its error, exit 1
printf '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}, "fp16": {"enabled": true, "initial_scale_power": 32, "min_loss_scale": 4294967296, "hysteresis": 1}}\n' >"$T/G.json"
usage_err "Z-SCALE-009 stepper: the test engine's error" 1 "zinc: error: test: rank 0: step 1: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. (loss scale 4294967296 == min_loss_scale 4294967296, overflow at scaler iteration 0)" -- stepper $M --base "$T/A.json" --test "$T/G.json" --world-size 2 --batches 3

usage_err "Z-SCALE-009 stepper: the base engine's error" 1 "zinc: error: base: rank 0: step 1: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. (loss scale 4294967296 == min_loss_scale 4294967296, overflow at scaler iteration 0)" -- stepper $M --base "$T/G.json" --test "$T/A.json" --world-size 2 --batches 3

# spec: Z-REP-006 --track loss with --fail: the losses agree at batch 0 (same
# initial weights) and diverge at batch 1: DIVERGED LOSS, the STATUS line of
# the failing batch, TEST FAILED, exit 1; the configuration block shows what is tracked
"$ZINC" $S --world-size 2 --batches 3 --track loss --fail >"$T/st" 2>&1
rc=$?
if [ $rc = 1 ] && grep -qx "track_params=False" "$T/st" && grep -qx "track_loss=True" "$T/st" && grep -qx "track_grads=False" "$T/st" &&
   [ "$(grep -c '^DIVERGED' "$T/st")" = 1 ] &&
   grep -qx "DIVERGED LOSS batch=1 base_loss=[0-9.]* test_loss=[0-9.]* abs_diff=[0-9.]*e[-+][0-9]* rel_diff=[0-9.]*e[-+][0-9]* tol=1.00000e-05" "$T/st" &&
   [ "$(grep '^STATUS' "$T/st" | sed 's/ base_loss.*//')" = "STATUS batch=0 / 3
STATUS batch=1 / 3" ] && [ "$(tail -n 1 "$T/st")" = "TEST FAILED" ]; then ok "Z-REP-006 stepper --track loss --fail: DIVERGED LOSS at batch 1"
else bad "Z-REP-006 stepper --track loss" "exit $rc: $(cat "$T/st")"; fi
# spec: Z-REP-006 --track grads with --fail against a stage-0 test engine:
# every gradient diverges at batch 1, one line per rank (stage 0: every rank holds every parameter)
"$ZINC" stepper $M --base "$T/B.json" --test "$T/A.json" --world-size 2 --batches 3 --track grads --fail >"$T/st" 2>&1
rc=$?
if [ $rc = 1 ] && [ "$(grep -c '^DIVERGED GRADIENT rank=[01] batch=1 param_idx=[0-3] abs_diff=[0-9.]*e-[0-9]* rel_diff=[0-9.]*e-[0-9]* tol=1.00000e-05$' "$T/st")" = 8 ] &&
   [ "$(grep -c '^DIVERGED' "$T/st")" = 8 ] && grep -q '^DIVERGED GRADIENT rank=1 batch=1 param_idx=3 ' "$T/st" &&
   grep -qx "track_params=False" "$T/st" && grep -qx "track_loss=False" "$T/st" && [ "$(tail -n 1 "$T/st")" = "TEST FAILED" ]; then
  ok "Z-REP-006 stepper --track grads --fail: one DIVERGED GRADIENT line per rank and parameter"
else bad "Z-REP-006 stepper --track grads" "exit $rc: $(cat "$T/st")"; fi
# spec: Z-REP-006 --track params with --fail against a stage-3 test engine:
# every parameter diverges at batch 0, one line per rank holding part of it
# (stage 3 at world size 2: both ranks), and the run stops after batch 0
"$ZINC" $S --world-size 2 --batches 3 --track params --fail >"$T/st" 2>&1
rc=$?
if [ $rc = 1 ] && [ "$(grep -c '^DIVERGED PARAMETER rank=[01] batch=0 param_idx=[0-3] abs_diff=1.00000e-03 rel_diff=[0-9.]*e-[0-9]* tol=1.00000e-05$' "$T/st")" = 8 ] &&
   [ "$(grep -c '^DIVERGED' "$T/st")" = 8 ] && [ "$(grep '^STATUS' "$T/st" | sed 's/ base_loss.*//')" = "STATUS batch=0 / 3" ] &&
   grep -qx "track_params=True" "$T/st" && grep -qx "track_grads=False" "$T/st" && [ "$(tail -n 1 "$T/st")" = "TEST FAILED" ]; then
  ok "Z-REP-006 stepper --track params --fail: DIVERGED PARAMETER per rank at batch 0"
else bad "Z-REP-006 stepper --track params" "exit $rc: $(cat "$T/st")"; fi
# spec: Z-REP-006 --test-every, --status-every and tolerances: checked every
# 2nd batch, STATUS every 3rd and at the last; tolerances wide enough that --fail still passes
"$ZINC" $S --world-size 2 --batches 6 --test-every 2 --status-every 3 --param-tol 1 --grad-tol 0.5 --loss-tol 0.25 --fail >"$T/st" 2>&1
rc=$?
if [ $rc = 0 ] && grep -qx "test_every=2" "$T/st" && grep -qx "status_every=3" "$T/st" &&
   grep -qx "param_tol=1.000000e+00" "$T/st" && grep -qx "grad_tol=5.000000e-01" "$T/st" && grep -qx "loss_tol=2.500000e-01" "$T/st" &&
   [ "$(grep '^STATUS' "$T/st" | sed 's/ base_loss.*//')" = "STATUS batch=0 / 6
STATUS batch=3 / 6
STATUS batch=5 / 6" ] && ! grep -q '^DIVERGED' "$T/st" && [ "$(tail -n 1 "$T/st")" = "TEST PASSED" ]; then
  ok "Z-REP-006 stepper --test-every/--status-every/tolerances"
else bad "Z-REP-006 stepper intervals" "exit $rc: $(cat "$T/st")"; fi

# ---- zinc stepper/compare --peer deepspeed: flags, and a peer that fails ----
PD="--peer deepspeed --config examples/ds.json --model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32"
# spec: Z-DSP-010 the peer's own flags: a bad count or bound, a flag without
# its value, an unknown flag, a train flag's bad value: one line, exit 2
usage_err "Z-DSP-010 stepper --peer --batches 0" 2 "zinc: error: --batches: expected a positive integer, got '0'" -- stepper $PD --batches 0
usage_err "Z-DSP-010 stepper --peer --test-every word" 2 "zinc: error: --test-every: expected a positive integer, got 'x'" -- stepper $PD --test-every x
usage_err "Z-DSP-010 stepper --peer --status-every too many" 2 "zinc: error: --status-every: expected a positive integer, got '1000001'" -- stepper $PD --status-every 1000001
usage_err "Z-DSP-010 stepper --peer --status-every overflow" 2 "zinc: error: --status-every: expected a positive integer, got '99999999999999999999'" -- stepper $PD --status-every 99999999999999999999
usage_err "Z-DSP-010 stepper --peer --status-every empty" 2 "zinc: error: --status-every: expected a positive integer, got ''" -- stepper $PD --status-every ""
usage_err "Z-DSP-010 stepper --peer --param-tol negative" 2 "zinc: error: --param-tol: expected a number >= 0, got '-1'" -- stepper $PD --param-tol -1
usage_err "Z-DSP-010 stepper --peer --loss-tol inf" 2 "zinc: error: --loss-tol: expected a number >= 0, got 'inf'" -- stepper $PD --loss-tol inf
usage_err "Z-DSP-010 stepper --peer --loss-tol overflow" 2 "zinc: error: --loss-tol: expected a number >= 0, got '1e400'" -- stepper $PD --loss-tol 1e400
usage_err "Z-DSP-010 stepper --peer --param-tol empty" 2 "zinc: error: --param-tol: expected a number >= 0, got ''" -- stepper $PD --param-tol ""
usage_err "Z-DSP-010 stepper --peer --param-tol suffix" 2 "zinc: error: --param-tol: expected a number >= 0, got '1e-3x'" -- stepper $PD --param-tol 1e-3x
usage_err "Z-DSP-010 stepper --peer flag without value" 2 "zinc: error: --python needs a value (or is unknown to 'zinc stepper --peer')" -- stepper $PD --python
usage_err "Z-DSP-010 stepper --peer unknown flag" 2 "zinc: error: unknown flag '--frob' for 'zinc stepper --peer'" -- stepper $PD --frob 1
usage_err "Z-DSP-010 stepper --peer bad --world-size" 2 "zinc: error: --world-size: expected an integer in 1..131072, got 'two'" -- stepper $PD --world-size two
# spec: Z-DSP-012 compare --peer takes --rtol and --atol, not stepper's counts
usage_err "Z-DSP-012 compare --peer --rtol word" 2 "zinc: error: --rtol: expected a number >= 0, got 'x'" -- compare $PD --rtol x
usage_err "Z-DSP-012 compare --peer --batches unknown" 2 "zinc: error: unknown flag '--batches' for 'zinc compare --peer'" -- compare $PD --batches 2

# A stand-in for the peers' venv: a python that is never run (zinc runs the
# torchrun beside it) and a torchrun that fails as FAKE_PEER says, writing
# what the worker would into ds/ beside the job file ($5)
mkdir -p "$T/venv" "$T/novenv"
printf '#!/bin/sh\nexit 0\n' >"$T/venv/python"
cp "$T/venv/python" "$T/novenv/python"
cat >"$T/venv/torchrun" <<'EOT'
#!/bin/sh
ds=$(dirname "$5")/ds
mkdir -p "$ds"
case $FAKE_PEER in
  exit3) echo "RuntimeError: worker died"; exit 3 ;;
  refuse) echo "ValueError: no such optimizer" | tee "$ds/error.txt"; exit 1 ;;
  short) echo '{"loss": [2.5]}' >"$ds/losses.json" ;;
  norecord) echo '{"loss": [2.5, 2.25]}' >"$ds/losses.json" ;;
  empty) echo '{"loss": [2.5, 2.25]}' >"$ds/losses.json"
         printf '\002\0\0\0\0\0\0\0{}' >"$ds/record.safetensors" ;;
esac
exit 0
EOT
chmod +x "$T/venv/python" "$T/novenv/python" "$T/venv/torchrun"
FP="$PD --world-size 2 --python $T/venv/python"
# spec: Z-DSP-010 a --python with no torchrun beside it, and a ZINC_PEER_WORKER
# that cannot be read, are one-line usage errors before anything runs
usage_err "Z-DSP-010 no torchrun beside --python" 2 "zinc: error: --python: no executable torchrun beside it ($T/novenv/torchrun): No such file or directory" -- stepper $PD --python "$T/novenv/python"
ZINC_PEER_WORKER=$T/none.py "$ZINC" stepper $FP >"$T/out" 2>"$T/err"; rc=$?
if [ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: ZINC_PEER_WORKER: cannot read '$T/none.py': No such file or directory" ]; then
  ok "Z-DSP-010 ZINC_PEER_WORKER unreadable"
else bad "Z-DSP-010 ZINC_PEER_WORKER unreadable" "exit $rc: $(cat "$T/err")"; fi
# spec: Z-DSP-010 a temporary folder that cannot be made (TMPDIR) is one error line, exit 1
TMPDIR=$T/none ZINC_PEER_WORKER=tests/peer_ds_worker.py "$ZINC" stepper $FP >"$T/out" 2>"$T/err"; rc=$?
if [ $rc = 1 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: cannot make a folder in $T/none: No such file or directory" ]; then
  ok "Z-DSP-010 TMPDIR missing"
else bad "Z-DSP-010 TMPDIR missing" "exit $rc: $(cat "$T/err")"; fi

# peer_fail ID STATUS MODE LINE -- zinc args: with FAKE_PEER=MODE, exit
# STATUS, stderr LINE (a grep -x pattern; @DIR@ the kept folder) then the line
# naming the folder kept, which exists
peer_fail() {
  id=$1; want=$2; mode=$3; line=$4; shift 5
  rm -rf "$T/tmp"; mkdir -p "$T/tmp"
  FAKE_PEER=$mode TMPDIR=$T/tmp ZINC_PEER_WORKER=tests/peer_ds_worker.py "$ZINC" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  k=$(ls -d "$T"/tmp/zinc-peer-* 2>/dev/null)
  pat=$(printf '%s' "$line" | sed "s|@DIR@|$k|g")
  if [ "$rc" = "$want" ] && [ -n "$k" ] && [ -d "$k" ] && [ "$(wc -l <"$T/err")" = 2 ] && head -n 1 "$T/err" | grep -qx -- "$pat" &&
     [ "$(tail -n 1 "$T/err")" = "zinc: DeepSpeed's log and files are kept in $k" ]; then ok "$id"
  else bad "$id" "exit $rc: $(cat "$T/err")"; fi
}
# spec: Z-DSP-010 torchrun exiting non-zero is an error quoting its last line
# (exit 1); DeepSpeed's refusal (ds/error.txt) one quoting it (exit 2); a
# losses.json or record.safetensors missing or short an error naming the file
peer_fail "Z-DSP-010 torchrun exits 3" 1 exit3 "zinc: error: $T/venv/torchrun exited 3: RuntimeError: worker died" -- stepper $FP --batches 2
peer_fail "Z-DSP-010 DeepSpeed refuses the config" 2 refuse "zinc: error: DeepSpeed cannot run this config: ValueError: no such optimizer" -- stepper $FP --batches 2
peer_fail "Z-DSP-010 no losses.json" 1 none "zinc: error: @DIR@/ds/losses.json: open failed: No such file or directory" -- stepper $FP --batches 2
peer_fail "Z-DSP-010 one loss of two" 1 short "zinc: error: @DIR@/ds/losses.json: 1 losses, expected 2" -- stepper $FP --batches 2
peer_fail "Z-DSP-010 no record" 1 norecord "zinc: error: @DIR@/ds/record.safetensors: open failed: No such file or directory" -- stepper $FP --batches 2
peer_fail "Z-DSP-010 a record without the masters" 1 empty "zinc: error: @DIR@/ds/record.safetensors: no fp32 tensor '0/transformer.wte.weight' of 8192 elements" -- stepper $FP --batches 2
# spec: Z-DSP-012 ... and compare --peer reads the gradients first
peer_fail "Z-DSP-012 a record without the gradients" 1 empty "zinc: error: @DIR@/ds/record.safetensors: no fp32 tensor '0/grad/transformer.wte.weight' of 8192 elements" -- compare $FP --steps 2

# ---- zinc spec run / zinc spec: the command line ---------------------------
# spec: Z-CLI-006 `zinc spec` without run or coverage prints its usage line, exit 2; --backend takes sim or cuda
U="usage: zinc spec run [--backend sim|cuda|tcp] [--exact] [CASE.json...] | zinc spec coverage"
usage_err "Z-CLI-006 spec without a command" 2 "$U" -- spec
usage_err "Z-CLI-006 spec unknown command" 2 "$U" -- spec frob
usage_err "Z-CLI-006 spec run --backend gloo" 2 "zinc: error: zinc spec run --backend: expected sim, cuda or tcp" -- spec run --backend gloo
usage_err "Z-CLI-006 spec run --backend without value" 2 "zinc: error: zinc spec run --backend: expected sim, cuda or tcp" -- spec run --backend
# spec: Z-SPEC-001 a file argument runs that file's case, after the options
# (--backend sim, --backend cuda and --exact accepted: a config-error case
# needs no device)
for opt in "--backend sim" "--backend cuda"; do
  "$ZINC" spec run $opt spec/cases/cli/Z-CLI-005-error-bad-model.json >"$T/out" 2>&1
  rc=$?
  if [ $rc = 0 ] && [ "$(cat "$T/out")" = "ok   error-bad-model
spec: 1 passed, 0 failed" ]; then ok "Z-SPEC-001 spec run $opt FILE"
  else bad "Z-SPEC-001 spec run $opt" "exit $rc: $(cat "$T/out")"; fi
done

# spec: Z-SPEC-001 ... and --exact before a file that trains (exact mode on the simulator keeps the stages' bits)
"$ZINC" spec run --exact spec/cases/engine/Z-ENG-009-stages-bitwise-run-keys.json >"$T/out" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "ok   stages-bitwise-run-keys
spec: 1 passed, 0 failed" ]; then ok "Z-SPEC-001 spec run --exact FILE"
else bad "Z-SPEC-001 spec run --exact" "exit $rc: $(cat "$T/out")"; fi

# ---- zinc spec run: how a case fails ----------------------------------------
# run_case ID FILE LINE: `zinc spec run FILE` exits 1 and prints LINE (a
# grep -x pattern) for the file's one case, then "spec: 0 passed, 1 failed"
run_case() {
  id=$1; f=$2; line=$3
  "$ZINC" spec run "$f" >"$T/out" 2>&1
  rc=$?
  if [ $rc = 1 ] && [ "$(wc -l <"$T/out")" = 2 ] && grep -qx -- "$line" "$T/out" && grep -qx "spec: 0 passed, 1 failed" "$T/out"; then ok "$id"
  else bad "$id" "exit $rc: $(cat "$T/out")"; fi
}
mkdir -p "$T/c"
C='"model": "mlp:6,8,4", "steps": 3, "world": 2'
MB='"train_micro_batch_size_per_gpu": 4'
NUM='-\{0,1\}[0-9.e+-]*'
# spec: Z-ENG-010 with accumulation stages 1 and 2 are not bitwise equal: the case names the first parameter element that differs
printf '{"id": "ga-bitwise", %s, "grad_accum": 2, "config": {%s}, "runs": [{"stage": 1}, {"stage": 2}], "expect": {"bitwise": true}}\n' "$C" "$MB" >"$T/c/a.json"
run_case "Z-ENG-010 bitwise case across families fails on a parameter" "$T/c/a.json" \
  "FAIL ga-bitwise \[$T/c/a.json\]: run 1: parameter element [0-9]* is $NUM, run 0 has $NUM"
# spec: Z-ENG-010 ... and with a parameter tolerance of 0 a "close" case fails on that element
printf '{"id": "ga-close", %s, "grad_accum": 2, "config": {%s}, "runs": [{"stage": 1}, {"stage": 2}], "expect": {"close": {"loss_rtol": 1}}}\n' "$C" "$MB" >"$T/c/b.json"
run_case "Z-ENG-010 close case with param_atol 0 fails on a parameter" "$T/c/b.json" \
  "FAIL ga-close \[$T/c/b.json\]: run 1: parameter element [0-9]*: $NUM vs $NUM beyond atol 0"
# spec: Z-PREC-007 fp16 is close to fp32, not equal: a bitwise case and a loss_rtol 0 case fail at the first step's loss
printf '{"id": "fp16-bitwise", %s, "stage": 1, "config": {%s}, "runs": [{}, {"config": {"fp16": {"enabled": true}}}], "expect": {"bitwise": true}}\n' "$C" "$MB" >"$T/c/c.json"
run_case "Z-PREC-007 fp16 against fp32 bitwise fails at step 1's loss" "$T/c/c.json" \
  "FAIL fp16-bitwise \[$T/c/c.json\]: run 1 step 1: loss [0-9.]* != run 0's [0-9.]*"
printf '{"id": "fp16-close", %s, "stage": 1, "config": {%s}, "runs": [{}, {"config": {"fp16": {"enabled": true}}}], "expect": {"close": {"loss_rtol": 0, "param_atol": 1}}}\n' "$C" "$MB" >"$T/c/d.json"
run_case "Z-PREC-007 fp16 against fp32 with loss_rtol 0 fails at step 1" "$T/c/d.json" \
  "FAIL fp16-close \[$T/c/d.json\]: run 1 step 1: loss [0-9.]* vs [0-9.]* beyond rtol 0"
# spec: Z-ENG-009 stages 0 and 3 agree bit for bit, so a case expecting a difference fails
printf '{"id": "same", %s, "config": {%s}, "runs": [{"stage": 0}, {"stage": 3}], "expect": {"differs_from_first": true}}\n' "$C" "$MB" >"$T/c/e.json"
run_case "Z-ENG-009 differs_from_first fails on bitwise-equal stages" "$T/c/e.json" \
  "FAIL same \[$T/c/e.json\]: run 1 has exactly run 0's parameters; expected a difference"
# spec: Z-SCALE-005 init 2^8, window 2: the third clean step doubles S, so
# 256, 256, 256 fails at step 3; an expected sequence longer than the run fails past its end
FP='"fp16": {"enabled": true, "initial_scale_power": 8, "loss_scale_window": 2, "hysteresis": 1}'
printf '{"id": "scale", %s, "stage": 1, "config": {%s, %s}, "expect": {"scale_after": [256, 256, 256]}}\n' "$C" "$MB" "$FP" >"$T/c/f.json"
run_case "Z-SCALE-005 scale_after: the third step doubles S" "$T/c/f.json" \
  "FAIL scale \[$T/c/f.json\]: run 0 step 3: loss scale after the step is 512, expected 256"
printf '{"id": "scale4", %s, "stage": 1, "config": {%s, %s}, "expect": {"scale_after": [256, 256, 512, 512]}}\n' "$C" "$MB" "$FP" >"$T/c/g.json"
run_case "Z-SCALE-005 scale_after longer than the run" "$T/c/g.json" \
  "FAIL scale4 \[$T/c/g.json\]: run 0 step 4: loss scale after the step is -1, expected 512"
# spec: Z-PREC-004 an fp16 step with an inf gradient (Z-PREC-006) is skipped: a case expecting no skipped step fails at it
printf '{"id": "skip", %s, "stage": 1, "config": {%s, %s}, "inject": {"rank": 1, "steps": [2]}, "expect": {"skipped": []}}\n' "$C" "$MB" "$FP" >"$T/c/h.json"
run_case "Z-PREC-004 skipped: the overflow step is skipped" "$T/c/h.json" \
  "FAIL skip \[$T/c/h.json\]: run 0 step 2: skipped=1, expected 0"
# spec: Z-PREC-008 bf16 with check_grad_overflow false lets a NaN reach the
# weights; with the check on, a -inf step is skipped and the weights stay finite
printf '{"id": "fin", %s, "stage": 1, "config": {%s, "bf16": {"enabled": true, "check_grad_overflow": false}}, "inject": {"rank": 0, "steps": [2], "value": "nan"}, "expect": {"finite": true}}\n' "$C" "$MB" >"$T/c/i.json"
run_case "Z-PREC-008 unchecked bf16 NaN: parameters not finite" "$T/c/i.json" \
  "FAIL fin \[$T/c/i.json\]: run 0: parameters are not finite"
printf '{"id": "fin2", %s, "stage": 1, "config": {%s, "bf16": {"enabled": true}}, "inject": {"rank": 0, "steps": [2], "value": "-inf"}, "expect": {"skipped": [2], "finite": false}}\n' "$C" "$MB" >"$T/c/j.json"
run_case "Z-PREC-008 checked bf16 -inf: step skipped, parameters finite" "$T/c/j.json" \
  "FAIL fin2 \[$T/c/j.json\]: run 0: parameters are finite"
# spec: Z-COMM-001 holds without accumulation only: stage 2 with GA 2 reduces every micro-step (Z-ENG-010) and sends more than 2Ψ(N-1)/N per step
printf '{"id": "comm", %s, "stage": 2, "grad_accum": 2, "config": {%s}, "expect": {"comm_volume": true}}\n' "$C" "$MB" >"$T/c/k.json"
run_case "Z-COMM-001 comm_volume with accumulation on stage 2" "$T/c/k.json" \
  "FAIL comm \[$T/c/k.json\]: rank 0 sent 1656 bytes for gradients and parameters in 3 steps, expected 1104 (2Ψ(N-1)/N, Ψ=92, N=2)"
# spec: Z-MEM-010 is the fp32 table: an fp16 run holds 2-byte working parameters
printf '{"id": "mem", %s, "stage": 0, "config": {%s, "fp16": {"enabled": true}}, "expect": {"memory": true}}\n' "$C" "$MB" >"$T/c/l.json"
run_case "Z-MEM-010 memory formula is fp32's" "$T/c/l.json" \
  "FAIL mem \[$T/c/l.json\]: rank 0 holds 184 bytes of params16, the stage-0 formula says 368"
# spec: Z-CANON-004 the extra gradient buffers are canonical mode's: a (default, default) pair fails the cost check
printf '{"id": "canon", %s, "stage": 1, "grad_accum": 2, "config": {%s}, "runs": [{}, {}], "expect": {"canonical_cost": true}}\n' "$C" "$MB" >"$T/c/m.json"
run_case "Z-CANON-004 canonical_cost without canonical mode" "$T/c/m.json" \
  "FAIL canon \[$T/c/m.json\]: rank 0: canonical mode holds 0 extra gradient bytes, expected 2 levels x 46 = 368"
# spec: Z-CLI-004 a triad the world size satisfies is no error; one it does
# not is a usage error (exit 2) naming train_batch_size: cases expecting otherwise fail
printf '{"id": "errok", %s, "train_batch_size": 16, "config": {%s}, "expect": {"error": "train_batch_size"}}\n' "$C" "$MB" >"$T/c/n.json"
run_case "Z-CLI-004 a valid triad is no error" "$T/c/n.json" \
  "FAIL errok \[$T/c/n.json\]: run 0 succeeded, expected an error containing 'train_batch_size'"
TRIAD="case-config: train_batch_size 18 != train_micro_batch_size_per_gpu 4 \* gradient_accumulation_steps 2 \* world size 2 (= 16) (inferred: train_batch_size 18 // train_micro_batch_size_per_gpu 4 // world size 2)"
printf '{"id": "errsub", %s, "train_batch_size": 18, "config": {%s}, "expect": {"error": "grad_accum"}}\n' "$C" "$MB" >"$T/c/o.json"
run_case "Z-CLI-004 the triad error names its values" "$T/c/o.json" \
  "FAIL errsub \[$T/c/o.json\]: run 0: error '$TRIAD' does not contain 'grad_accum'"
printf '{"id": "errexit", %s, "train_batch_size": 18, "config": {%s}, "expect": {"error": "train_batch_size", "exit": 1}}\n' "$C" "$MB" >"$T/c/p.json"
run_case "Z-CLI-004 the triad error is exit 2, not 1" "$T/c/p.json" \
  "FAIL errexit \[$T/c/p.json\]: run 0: error '$TRIAD' has the wrong exit status (expected 1)"
# spec: Z-CLI-005 a bad model spec in a case that expects no error fails it with the message
printf '{"id": "runfail", "model": "mlp:4,x", "steps": 3, "world": 2, "config": {%s}}\n' "$MB" >"$T/c/q.json"
run_case "Z-CLI-005 a case whose run fails" "$T/c/q.json" \
  "FAIL runfail \[$T/c/q.json\]: run 0 failed: model spec 'mlp:4,x': 'x' is not a positive integer"
# spec: Z-CLI-005 ... a run's own "model" replaces the case's: a bad one fails that run only
printf '{"id": "runmodel", %s, "config": {%s}, "runs": [{"stage": 0}, {"stage": 1, "model": "mlp:6,y"}]}\n' "$C" "$MB" >"$T/c/q2.json"
run_case "Z-CLI-005 a run's own bad model" "$T/c/q2.json" \
  "FAIL runmodel \[$T/c/q2.json\]: run 1 failed: model spec 'mlp:6,y': 'y' is not a positive integer"
# spec: Z-CLI-005 ... also in a checkpoint case's uninterrupted and saving runs
printf '{"id": "ck-base", "model": "mlp:6,x", "steps": 3, "world": 2, "stage": 2, "config": {%s}, "checkpoint": {"save_at": 2, "resume": [{}]}}\n' "$MB" >"$T/c/r.json"
run_case "Z-CLI-005 checkpoint case: uninterrupted run fails" "$T/c/r.json" \
  "FAIL ck-base \[$T/c/r.json\]: uninterrupted run: model spec 'mlp:6,x': 'x' is not a positive integer"
printf '{"id": "ck-save", "model": "mlp:6,8,4", "steps": 3, "world": 2, "stage": 2, "config": {%s}, "checkpoint": {"save_at": 2, "save": {"model": "mlp:6,x"}, "resume": [{}]}}\n' "$MB" >"$T/c/s.json"
run_case "Z-CLI-005 checkpoint case: saving run fails" "$T/c/s.json" \
  "FAIL ck-save \[$T/c/s.json\]: saving run: model spec 'mlp:6,x': 'x' is not a positive integer"
printf '{"id": "ck-resume", "model": "mlp:6,8,4", "steps": 3, "world": 2, "stage": 2, "config": {%s}, "checkpoint": {"save_at": 2, "resume": [{"model": "mlp:6,z"}]}}\n' "$MB" >"$T/c/s2.json"
run_case "Z-CLI-005 checkpoint case: a resume run's bad model" "$T/c/s2.json" \
  "FAIL ck-resume \[$T/c/s2.json\]: resume 0: model spec 'mlp:6,z': 'z' is not a positive integer"
# spec: Z-CKPT-007 resuming into another model is refused, naming the parameter and both shapes
printf '{"id": "ck-model", "model": "mlp:6,8,4", "steps": 4, "world": 2, "stage": 1, "config": {%s}, "checkpoint": {"save_at": 2, "resume": [{"model": "mlp:6,9,4"}]}}\n' "$MB" >"$T/c/t.json"
run_case "Z-CKPT-007 checkpoint case: resume into another model" "$T/c/t.json" \
  "FAIL ck-model \[$T/c/t.json\]: resume 0: rank 0: /tmp/zinc-ckpt-[A-Za-z0-9]*/global_step2/manifest.json: parameter 0 is 'layers.0.weight' \[8 x 6\] in the checkpoint (model mlp:6,8,4) but 'layers.0.weight' \[9 x 6\] in this model"
# spec: Z-CKPT-004 only canonical mode promises bits when the world size
# (hence GA) changes at resume: stage 2 from world 2 (GA 3) to world 1 (GA 6)
# ends on another digest (universal checkpoint too), and over more steps on another loss
printf '{"id": "ck-world", "model": "mlp:6,8,4", "steps": 8, "world": 2, "stage": 2, "train_batch_size": 24, "micro_batch": 4, "checkpoint": {"save_at": 2, "universal": true, "resume": [{"world": 1, "universal": true}]}}\n' >"$T/c/u.json"
run_case "Z-CKPT-004 non-canonical reshard: digest differs" "$T/c/u.json" \
  "FAIL ck-world \[$T/c/u.json\]: resume 0 (world 1, GA 6, stage 2, universal): digest [0-9a-f]\{16\}, uninterrupted [0-9a-f]\{16\}"
printf '{"id": "ck-loss", "model": "mlp:6,8,4", "steps": 12, "world": 2, "stage": 2, "train_batch_size": 24, "micro_batch": 4, "checkpoint": {"save_at": 2, "resume": [{"world": 1}]}}\n' >"$T/c/v.json"
run_case "Z-CKPT-004 non-canonical reshard: a loss differs" "$T/c/v.json" \
  "FAIL ck-loss \[$T/c/v.json\]: resume 0 (world 1, GA 6, stage 2) step [0-9]*: loss [0-9.]*, uninterrupted [0-9.]*"
printf '{"id": "ck-world2", "model": "mlp:6,8,4", "steps": 5, "world": 2, "stage": 2, "train_batch_size": 16, "micro_batch": 4, "checkpoint": {"save_at": 2, "resume": [{"world": 1}]}}\n' >"$T/c/u2.json"
run_case "Z-CKPT-004 non-canonical reshard (sharded checkpoint): digest differs" "$T/c/u2.json" \
  "FAIL ck-world2 \[$T/c/u2.json\]: resume 0 (world 1, GA 4, stage 2): digest [0-9a-f]\{16\}, uninterrupted [0-9a-f]\{16\}"
printf '{"id": "ck-loss2", "model": "mlp:6,8,4", "steps": 12, "world": 2, "stage": 2, "train_batch_size": 24, "micro_batch": 4, "checkpoint": {"save_at": 2, "universal": true, "resume": [{"world": 1, "universal": true}]}}\n' >"$T/c/v2.json"
run_case "Z-CKPT-004 non-canonical reshard (universal checkpoint): a loss differs" "$T/c/v2.json" \
  "FAIL ck-loss2 \[$T/c/v2.json\]: resume 0 (world 1, GA 6, stage 2, universal) step [0-9]*: loss [0-9.]*, uninterrupted [0-9.]*"
# spec: Z-ENG-011 (the loss of an lr-0 run does not fall): a loss_falls case
# fails with the first and last loss and ln C, and no later expectation runs
printf '{"id": "no-fall", %s, "stage": 2, "config": {%s, "optimizer": {"type": "Adam", "params": {"lr": 0}}}, "expect": {"loss_falls": {"first_near_lnC": 0.5, "ratio": 0.9}, "scale_after": [2], "skipped": [1], "lr_follows_schedule": true, "finite": false, "comm_volume": true, "memory": true}}\n' "$C" "$MB" >"$T/c/w.json"
run_case "Z-ENG-011 loss_falls fails when lr is 0" "$T/c/w.json" \
  "FAIL no-fall \[$T/c/w.json\]: run 0: loss went [0-9.]* -> [0-9.]* (ln C = 1.3863): expected to start near ln C and fall below 0.90 of the first"

# spec: Z-DRY-003 the dry run matches runs of 0 or 1 steps: a dry_run case of 3 steps fails saying so
printf '{"id": "dry3", %s, "stage": 1, "config": {%s}, "expect": {"dry_run": true}}\n' "$C" "$MB" >"$T/c/x1.json"
run_case "Z-DRY-003 dry_run on a run of 3 steps" "$T/c/x1.json" "FAIL dry3 \[$T/c/x1.json\]: dry_run: a run of 0 or 1 steps"
# spec: Z-SPEC-001 "runs" holds 1 to 32 runs: none, or 33, is "bad 'runs'";
# runs compared with run 0 must have its steps and size; a case without "id" is "?"
printf '{"id": "noruns", %s, "config": {%s}, "runs": []}\n' "$C" "$MB" >"$T/c/x2.json"
run_case "Z-SPEC-001 a case of no runs" "$T/c/x2.json" "FAIL noruns \[$T/c/x2.json\]: bad 'runs'"
printf '{"id": "runs33", %s, "config": {%s}, "runs": [%s{}]}\n' "$C" "$MB" "$(for i in $(seq 32); do printf '{}, '; done)" >"$T/c/x3.json"
run_case "Z-SPEC-001 a case of 33 runs" "$T/c/x3.json" "FAIL runs33 \[$T/c/x3.json\]: bad 'runs'"
printf '{"id": "shape", %s, "config": {%s}, "runs": [{"stage": 0}, {"stage": 0, "steps": 2}], "expect": {"bitwise": true}}\n' "$C" "$MB" >"$T/c/x4.json"
run_case "Z-SPEC-001 runs of other lengths" "$T/c/x4.json" "FAIL shape \[$T/c/x4.json\]: run 1 has a different shape than run 0"
printf '{%s, "config": {%s}, "runs": []}\n' "$C" "$MB" >"$T/c/x5.json"
run_case "Z-SPEC-001 a failing case without id" "$T/c/x5.json" "FAIL ? \[$T/c/x5.json\]: bad 'runs'"
printf '{%s, "stage": 1, "config": {%s}}\n' "$C" "$MB" >"$T/c/x6.json"
"$ZINC" spec run "$T/c/x6.json" >"$T/out" 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "ok   ?
spec: 1 passed, 0 failed" ]; then ok "Z-SPEC-001 a passing case without id"
else bad "Z-SPEC-001 a passing case without id" "exit $rc: $(cat "$T/out")"; fi
# spec: Z-SPEC-004 a run without "resume" starts after step 0: a case expecting first_step 2 fails
printf '{"id": "first", %s, "stage": 1, "config": {%s}, "expect": {"first_step": 2}}\n' "$C" "$MB" >"$T/c/x7.json"
run_case "Z-SPEC-004 first_step of a run that did not resume" "$T/c/x7.json" "FAIL first \[$T/c/x7.json\]: run 0 started after step 0, expected 2"
# spec: Z-ENG-011 a first loss further than first_near_lnC from ln C fails loss_falls, however loose the ratio
printf '{"id": "lnc", %s, "stage": 1, "config": {%s}, "expect": {"loss_falls": {"first_near_lnC": 0, "ratio": 2}}}\n' "$C" "$MB" >"$T/c/x8.json"
run_case "Z-ENG-011 loss_falls: first loss not ln C" "$T/c/x8.json" \
  "FAIL lnc \[$T/c/x8.json\]: run 0: loss went [0-9.]* -> [0-9.]* (ln C = 1.3863): expected to start near ln C and fall below 2.00 of the first"
# spec: Z-SPEC-004 a resume with "error" that succeeds fails the case; one
# refused with another message (here: a tag that names no folder) fails quoting it
printf '{"id": "ck-noerr", %s, "stage": 1, "config": {%s}, "checkpoint": {"save_at": 2, "resume": [{"error": "no such tag"}]}}\n' "$C" "$MB" >"$T/c/x9.json"
run_case "Z-SPEC-004 a resume expected to fail succeeds" "$T/c/x9.json" \
  "FAIL ck-noerr \[$T/c/x9.json\]: resume 0 succeeded, expected an error containing 'no such tag'"
printf '{"id": "ck-other", %s, "stage": 1, "config": {%s}, "checkpoint": {"save_at": 2, "resume": [{"tag": "global_step9", "error": "parameter 0"}]}}\n' "$C" "$MB" >"$T/c/x10.json"
run_case "Z-SPEC-004 a resume refused with another message" "$T/c/x10.json" \
  "FAIL ck-other \[$T/c/x10.json\]: resume 0: error 'rank 0: --checkpoint-tag: the tag 'global_step9' names no checkpoint folder (/tmp/zinc-ckpt-[A-Za-z0-9]*/global_step9: No such file or directory)', expected one containing 'parameter 0'"
# spec: Z-DSCK-009 resuming DeepSpeed's folder keeps Z-CKPT-004: stage 2 from world 2 (GA 3) to world 1 (GA 6) ends on another digest
printf '{"id": "ck-ds", "model": "mlp:6,8,4", "steps": 8, "world": 2, "stage": 2, "train_batch_size": 24, "config": {%s}, "checkpoint": {"save_at": 2, "deepspeed": true, "resume": [{"world": 1, "deepspeed": true}]}}\n' "$MB" >"$T/c/x11.json"
run_case "Z-DSCK-009 non-canonical reshard from DeepSpeed's folder: digest differs" "$T/c/x11.json" \
  "FAIL ck-ds \[$T/c/x11.json\]: resume 0 (world 1, GA 6, stage 2, deepspeed): digest [0-9a-f]\{16\}, uninterrupted [0-9a-f]\{16\}"

# ---- zinc spec run: files and folders ---------------------------------------
# spec: Z-SPEC-001 a file may hold an array of cases: each runs and is reported by its id
printf '[{"id": "arr-a", %s, "stage": 0, "config": {%s}}, {"id": "arr-b", %s, "stage": 3, "config": {%s}}]\n' "$C" "$MB" "$C" "$MB" >"$T/arr.json"
"$ZINC" spec run "$T/arr.json" >"$T/out" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "ok   arr-a
ok   arr-b
spec: 2 passed, 0 failed" ]; then ok "Z-SPEC-001 a file holding an array of cases"
else bad "Z-SPEC-001 array file" "exit $rc: $(cat "$T/out")"; fi
# spec: Z-SPEC-001 a folder runs its .json files only; an empty folder runs none
mkdir -p "$T/only/sub" "$T/empty"
cp spec/cases/cli/Z-CLI-005-error-bad-model.json "$T/only/sub/"
echo 'not a case' >"$T/only/README.md"
echo '{' >"$T/only/sub/x.jsonl"
"$ZINC" spec run "$T/only" >"$T/out" 2>&1; rc=$?
"$ZINC" spec run "$T/empty" >"$T/out2" 2>&1; rc2=$?
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "ok   error-bad-model
spec: 1 passed, 0 failed" ] && [ $rc2 = 0 ] && [ "$(cat "$T/out2")" = "spec: 0 passed, 0 failed" ]; then
  ok "Z-SPEC-001 a folder runs its .json files, an empty folder none"
else bad "Z-SPEC-001 folder filter" "exit $rc/$rc2: $(cat "$T/out" "$T/out2")"; fi
# spec: Z-SPEC-002 a folder whose listing runs out of memory (an allocation
# of the listing fails: tests/failmalloc.c fails the k-th allocation after
# main) is one error on stderr that says so, exit 2. Skipped where the shim is not built or zinc
# runs under ASan (which replaces malloc).
SHIM="$(dirname "$ZINC")/tests/libfailmalloc.so"
if [ -f "$SHIM" ] && ! ldd "$ZINC" 2>/dev/null | grep -q libasan; then
  SHIM="$(cd "$(dirname "$SHIM")" && pwd)/libfailmalloc.so"
  mkdir -p "$T/list/a"
  cp spec/cases/cli/Z-CLI-005-error-bad-model.json "$T/list/a/"
  for k in 1 2 3 4 5; do
    env ZN_FAIL_ALLOC=$k LD_PRELOAD="$SHIM" "$ZINC" spec run "$T/list" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: out of host memory while listing the cases of $T/list" ]; then
      ok "Z-SPEC-002 a folder that cannot be listed (allocation $k fails)"
    else bad "Z-SPEC-002 listing failure $k" "exit $rc: $(cat "$T/out" "$T/err")"; fi
  done
  # no argument: spec/cases, with the hint to run from the repository root
  env ZN_FAIL_ALLOC=1 LD_PRELOAD="$SHIM" "$ZINC" spec run >"$T/out" 2>"$T/err"
  rc=$?
  if [ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: out of host memory while listing the cases of spec/cases" ]; then
    ok "Z-SPEC-002 spec/cases cannot be listed"
  else bad "Z-SPEC-002 default folder listing failure" "exit $rc: $(cat "$T/out" "$T/err")"; fi
  # a file, then a folder that cannot be listed: nothing runs
  env ZN_FAIL_ALLOC=3 LD_PRELOAD="$SHIM" "$ZINC" spec run spec/cases/cli/Z-CLI-005-error-bad-model.json "$T/list" >"$T/out" 2>"$T/err"
  rc=$?
  if [ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: out of host memory while listing the cases of $T/list" ]; then
    ok "Z-SPEC-002 a file, then a folder that cannot be listed"
  else bad "Z-SPEC-002 file then folder listing failure" "exit $rc: $(cat "$T/out" "$T/err")"; fi
else echo "skip Z-SPEC-002 listing failure: no $SHIM, or an ASan build"; fi
# spec: Z-SPEC-002 a case file whose parse runs out of memory says so
# (not "not JSON"); JSON that is not an object or an array of objects is
# "not a case"; the other files still run
if [ -f "$SHIM" ] && ! ldd "$ZINC" 2>/dev/null | grep -q libasan; then
  mem_ok=0
  for k in 6 7 8 9 10; do   # allocations within the parse of the one case
    env ZN_FAIL_ALLOC=$k LD_PRELOAD="$SHIM" "$ZINC" spec run spec/cases/cli/Z-CLI-005-error-bad-model.json >"$T/out" 2>&1
    grep -qx "FAIL spec/cases/cli/Z-CLI-005-error-bad-model.json: out of host memory" "$T/out" && mem_ok=$((mem_ok + 1))
    grep -q "not JSON" "$T/out" && mem_ok=-99
  done
  if [ $mem_ok -ge 1 ]; then ok "Z-SPEC-002 a parse out of memory is named so ($mem_ok of 5 points)"
  else bad "Z-SPEC-002 parse out of memory" "$(cat "$T/out")"; fi
fi
printf '42' >"$T/num.json"
printf '"x"' >"$T/str.json"
"$ZINC" spec run "$T/num.json" "$T/str.json" spec/cases/cli/Z-CLI-005-error-bad-model.json >"$T/out" 2>&1; rc=$?
if [ $rc = 1 ] && grep -qx "FAIL $T/num.json: not a case (a case file holds an object or an array of objects)" "$T/out" && \
   grep -qx "FAIL $T/str.json: not a case (a case file holds an object or an array of objects)" "$T/out" && \
   grep -qx "spec: 1 passed, 2 failed" "$T/out"; then ok "Z-SPEC-002 JSON that is not a case"
else bad "Z-SPEC-002 not a case" "rc $rc: $(cat "$T/out")"; fi

# ---- zinc spec coverage -------------------------------------------------------
# spec: Z-SPEC-003 run outside the repository root: no SPEC.md, or no
# spec/cases, is one error line and exit 2
A=Z-QX   # ids are put together here, so that this file names none of them
Z=$ZINC; case "$Z" in /*) ;; *) Z="$(pwd)/$Z" ;; esac
mkdir -p "$T/t1" "$T/t2/spec"
printf -- "- **$A-001** x\n" >"$T/t2/spec/SPEC.md"
(cd "$T/t1" && "$Z" spec coverage) >"$T/out" 2>"$T/err"; rc=$?
(cd "$T/t2" && "$Z" spec coverage) >"$T/out" 2>"$T/err2"; rc2=$?
if [ $rc = 2 ] && [ "$(cat "$T/err")" = "zinc: error: cannot read spec/SPEC.md (run from the repository root)" ] &&
   [ $rc2 = 2 ] && [ "$(cat "$T/err2")" = "zinc: error: cannot list the cases of spec/cases (run from the repository root)" ]; then
  ok "Z-SPEC-003 spec coverage outside the repository root"
else bad "Z-SPEC-003 outside root" "exit $rc/$rc2: $(cat "$T/err" "$T/err2")"; fi
# spec: Z-SPEC-003 ids are Z-AREA-NNN: a mention in prose is no definition,
# four digits or a lower-case area are no id; a tree where every clause is
# named, by a case or by a test in tests/fuzz, passes (exit 0); a folder in tests/ is skipped
mkdir -p "$T/t3/spec/cases/a" "$T/t3/tests/fuzz" "$T/t3/tests/data"
printf -- "- **$A-001** one (see $A-002)\n- **$A-002** two\n" >"$T/t3/spec/SPEC.md"
printf '{"id": "x", "clauses": ["%s"]}\n' "$A-001" >"$T/t3/spec/cases/a/x.json"
printf '/* spec: %s; not ids: %s, %s, %s */\n' "$A-002" "$A-0021" "Z-qx-003" "${A}_004" >"$T/t3/tests/fuzz/f.c"
(cd "$T/t3" && "$Z" spec coverage) >"$T/out" 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "spec coverage: 2 clauses, 2 covered, 0 uncovered, 0 unknown ids" ]; then
  ok "Z-SPEC-003 spec coverage passes when every clause is named"
else bad "Z-SPEC-003 all covered" "exit $rc: $(cat "$T/out")"; fi

# spec: Z-SPEC-003 an unknown id alone, or a clause defined twice alone, makes spec coverage exit 1
mkdir -p "$T/t4/spec/cases" "$T/t4/tests" "$T/t5/spec/cases" "$T/t5/tests"
printf -- "- **$A-001** one\n" >"$T/t4/spec/SPEC.md"
printf '/* spec: %s %s %s */\n' "$A-001" "$A-007" "$A-001" >"$T/t4/tests/t.c"
printf -- "- **$A-001** one\n- **$A-001** one again\n" >"$T/t5/spec/SPEC.md"
printf '/* spec: %s */\n' "$A-001" >"$T/t5/tests/t.c"
(cd "$T/t4" && "$Z" spec coverage) >"$T/out" 2>&1; rc=$?
(cd "$T/t5" && "$Z" spec coverage) >"$T/out2" 2>&1; rc2=$?
if [ $rc = 1 ] && [ "$(cat "$T/out")" = "unknown   $A-007 (named by a test or case, not defined in SPEC.md)
spec coverage: 1 clauses, 1 covered, 0 uncovered, 1 unknown ids" ] &&
   [ $rc2 = 1 ] && [ "$(cat "$T/out2")" = "defined twice $A-001
spec coverage: 1 clauses, 1 covered, 0 uncovered, 0 unknown ids" ]; then
  ok "Z-SPEC-003 an unknown id alone, a twice-defined clause alone: exit 1"
else bad "Z-SPEC-003 unknown/twice alone" "exit $rc/$rc2: $(cat "$T/out" "$T/out2")"; fi

finish clicover
