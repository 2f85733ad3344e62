#!/bin/sh
# zinc launch stops each rank's whole process group (spec Z-LAUNCH-006): a
# rank that is a shell wrapper with a child of its own, when another rank
# fails. Prints "launchgroup: N passed, N failed".
. tests/lib.sh
ZINC=${ZINC:-build/zinc}
PORT=$((24000 + $$ % 900))
next_port
# rank 0: a wrapper whose child sleeps and holds the output pipe; rank 1 fails
W='if [ "$RANK" = 1 ]; then sleep 0.5; echo "zinc: error: rank 1 gives up" >&2; exit 3; fi; sleep 300 & echo "child $!"; wait'
t0=$(date +%s)
timeout -k 5 60 "$ZINC" launch --nproc-per-node 2 --master-port "$PORT" -- sh -c "$W" >"$T/out" 2>"$T/err"
rc=$?
dt=$(( $(date +%s) - t0 ))
child=$(sed -n 's/^\[rank0\]: child \([0-9]*\)$/\1/p' "$T/out")
# spec: Z-LAUNCH-006 the failed rank ends the run, the wrapper's child with it
if [ "$rc" = 1 ] && [ "$dt" -lt 15 ] && grep -q '^zinc launch: rank 1 failed (exit code 3): zinc: error: rank 1 gives up' "$T/err"; then
  ok "Z-LAUNCH-006 rank 1 failed, launch exit 1 in ${dt}s"
else bad Z-LAUNCH-006-exit "exit $rc after ${dt}s: $(tail -n 2 "$T/err")"; fi
# (a killed orphan is a zombie until init reaps it, and kill -0 still finds it)
for _ in $(seq 1 30); do [ -n "$child" ] && ! kill -0 "$child" 2>/dev/null && break; sleep 0.1; done
if [ -n "$child" ] && ! kill -0 "$child" 2>/dev/null; then ok "Z-LAUNCH-006 the wrapper's child is gone"
else bad Z-LAUNCH-006-child "child '$child' still running"; [ -n "$child" ] && kill "$child" 2>/dev/null; fi
finish launchgroup
