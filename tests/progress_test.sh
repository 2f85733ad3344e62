#!/bin/sh
# Progress a person can watch (spec Z-CLI-010, Z-CLI-011): a run's step lines
# reach a file while it runs, a killed run loses no printed line, and GPT-2's
# step lines carry tokens/s and the time left. Prints "progress: N passed, N failed".
. tests/lib.sh
ZINC=${ZINC:-build/zinc}
TXT="--model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32 --world-size 2"

# spec: Z-CLI-010 a running run's log holds its lines as they are printed:
# when the first step line shows in the file (stdout alone), it shows with at
# most a few others; a block-buffered stdout shows them 4 KiB (about 40 step
# lines) at a time. Step lines come every 2000 steps, a fraction of a second
# in an optimized build, a few seconds in the coverage build.
"$ZINC" train --steps 10000000 --steps-per-print 2000 --world-size 1 >"$T/m" 2>/dev/null &
pid=$!
for _ in $(seq 1 1200); do grep -q '^step=' "$T/m" && break; sleep 0.05; done   # up to 60 s
n=$(grep -c '^step=' "$T/m")
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ "$n" -ge 1 ] && [ "$n" -le 10 ]; then ok "Z-CLI-010 step lines reach the file as printed ($n at first sight)"
else bad Z-CLI-010-live "$n step lines when the file first held one (a burst means buffering)"; fi

# spec: Z-CLI-010 step lines appear while the run goes on, and a killed run's file ends with a whole line
"$ZINC" train $TXT --steps 100000 --steps-per-print 1 >"$T/log" 2>&1 &
pid=$!
n=0
for _ in $(seq 1 300); do   # up to 30 s for 3 step lines (the coverage build is slow)
  n=$(grep -c '^step=' "$T/log")
  [ "$n" -ge 3 ] && break
  sleep 0.1
done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
if [ "$n" -ge 3 ]; then ok "Z-CLI-010 $n step lines in the file of a run still running"
else bad Z-CLI-010-steps "after 30 s the file held: $(head -c 300 "$T/log")"; fi
if [ -z "$(tail -c 1 "$T/log" | tr -d '\n')" ] && tail -n 1 "$T/log" | grep -q '^step=.* eta_s=[0-9]*$'; then
  ok "Z-CLI-010 a killed run's last line is whole"
else bad Z-CLI-010-whole "last line: '$(tail -n 1 "$T/log")'"; fi

# spec: Z-CLI-011 tokens/s from the step's samples and time; the ETA falls to 0
"$ZINC" train $TXT --steps 4 --steps-per-print 1 --micro-batch 2 >"$T/g" 2>&1
if awk '/^step=/ { n++; for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         want = 4 * 32 / (v["time_ms"] / 1000); d = v["tokens_per_s"] - want; if (d < 0) d = -d
         if (v["tokens_per_s"] == "" || d > 0.01 * want + 1) bad = 1; last = v["eta_s"] }
       END { exit !(n == 4 && !bad && last == "0") }' "$T/g"; then
  ok "Z-CLI-011 tokens_per_s = samples x seq_len / time, eta_s 0 at the end"
else bad Z-CLI-011 "$(grep '^step=' "$T/g" | head -n 4)"; fi
# spec: Z-CLI-011 MLP step lines end at time_ms
if "$ZINC" train --steps 2 --steps-per-print 1 | grep '^step=' | grep -qv 'time_ms=[0-9.]*$'; then
  bad Z-CLI-011-mlp "an MLP step line goes on past time_ms"
else ok "Z-CLI-011 MLP step lines end at time_ms"; fi

finish progress
