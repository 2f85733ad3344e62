#!/bin/sh
# CLI checks of the command-line layer's edges: the flags and paths of
# `zinc calibrate`, `zinc launch`, `zinc sample`, `zinc plot`, `zinc
# estimate`, `zinc plan` and `zinc train` that a user gets wrong (a missing
# or malformed value, an unknown flag, a folder where a file goes, a file
# under a regular file, a name too long), and the top-level command line.
# Exact messages and exit statuses; tiny models, few steps, no fixed ports
# (the two-node calibration meets through a file). Each check names its
# spec clause. Prints "climore: N passed, N failed".
ZINC=${ZINC:-build/zinc}
. tests/lib.sh
case $ZINC in /*) Z=$ZINC ;; *) Z=$PWD/$ZINC ;; esac
TO="timeout 60"
M="--model mlp:4,4 --world-size 2"
L300=$(printf '%0300d' 0)   # one path component longer than NAME_MAX (255)

# one_line ID STATUS LINE -- zinc args...: exit STATUS, stderr exactly the
# one line LINE, nothing on stdout
one_line() {
  id=$1; want=$2; line=$3; shift 4
  $TO "$Z" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$id" "exit $rc, expected $want ($(head -c 300 "$T/err"))"; return; fi
  if [ "$(wc -l <"$T/err")" -ne 1 ] || [ "$(cat "$T/err")" != "$line" ]; then
    bad "$id" "stderr '$(head -c 300 "$T/err")', expected '$line'"; return
  fi
  if [ -s "$T/out" ]; then bad "$id" "stdout not empty: $(head -c 200 "$T/out")"; return; fi
  ok "$id"
}

# last_err ID STATUS LINE -- zinc args...: exit STATUS, the last line of
# stderr exactly LINE and the only "zinc: error:" line (a run prints its
# header on stdout first)
last_err() {
  id=$1; want=$2; line=$3; shift 4
  $TO "$Z" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$id" "exit $rc, expected $want ($(head -c 300 "$T/err"))"; return; fi
  if [ "$(tail -n 1 "$T/err")" != "$line" ] || [ "$(grep -c '^zinc: error:' "$T/err")" -ne 1 ]; then
    bad "$id" "stderr '$(head -c 300 "$T/err")', expected '$line'"; return
  fi
  ok "$id"
}

# with_usage ID LINE USAGE -- zinc args...: exit 2, stderr LINE then the
# command's usage (its first line USAGE...), nothing on stdout
with_usage() {
  id=$1; line=$2; use=$3; shift 4
  $TO "$Z" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne 2 ]; then bad "$id" "exit $rc, expected 2 ($(head -c 300 "$T/err"))"; return; fi
  if [ "$(head -n 1 "$T/err")" != "$line" ] || ! sed -n 2p "$T/err" | grep -q "^$use"; then
    bad "$id" "stderr '$(head -c 300 "$T/err")', expected '$line' and the usage"; return
  fi
  if [ -s "$T/out" ]; then bad "$id" "stdout not empty: $(head -c 200 "$T/out")"; return; fi
  ok "$id"
}

# ---- zinc: the command line itself --------------------------------------
# spec: Z-CLI-015 no command: the usage on stderr, exit 2; version; help
"$Z" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && [ ! -s "$T/out" ] && grep -q '^usage: zinc \[--verbose\] <command> \[flags\]$' "$T/err" &&
  ok "Z-CLI-015 zinc alone: usage on stderr, exit 2" || bad "Z-CLI-015 zinc alone" "exit $rc: $(head -n 3 "$T/err")"
v1=$("$Z" version); rc1=$?; v2=$("$Z" --version); rc2=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ "$v1" = "$v2" ] && echo "$v1" | grep -qx 'zinc [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*' &&
  ok "Z-CLI-015 zinc version, zinc --version" || bad "Z-CLI-015 version" "'$v1' ($rc1), '$v2' ($rc2)"
"$Z" --help >"$T/h1" 2>"$T/err"; rc1=$?; "$Z" -h >"$T/h2"; rc2=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ ! -s "$T/err" ] && cmp -s "$T/h1" "$T/h2" && grep -q '^usage: zinc ' "$T/h1" &&
  ok "Z-CLI-015 zinc --help, -h: usage on stdout" || bad "Z-CLI-015 --help" "exit $rc1/$rc2"
one_line "Z-CLI-015 unknown command" 2 "zinc: error: unknown command 'trian' (try 'zinc help')" -- trian --steps 1
# spec: Z-FILE-005 a malformed ZINC_FAULT stops zinc before any command runs (exit 2)
# (the variable is set for the one command: a shell function would keep it in bash's posix mode)
for fv in op=x op=3,bogus op=0 op=; do
  env ZINC_FAULT=$fv "$Z" version >"$T/out" 2>"$T/err"; rc=$?
  [ $rc = 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "zinc: error: ZINC_FAULT='$fv' is not op=N[,sticky][,crash]" ] &&
    ok "Z-FILE-005 ZINC_FAULT=$fv refused" || bad "Z-FILE-005 ZINC_FAULT=$fv" "exit $rc: $(cat "$T/err" "$T/out")"
done
ZINC_FAULT=op=3,sticky,crash "$Z" version >"$T/out" 2>&1 && [ "$(cat "$T/out")" = "$v1" ] &&
  ok "Z-FILE-005 ZINC_FAULT sticky,crash is well formed" || bad "Z-FILE-005 sticky,crash" "$(cat "$T/out")"
# spec: Z-FILE-005 crash at op 1 (calibrate's machine file): exit 77, no file, no temporary
ZINC_FAULT=op=1,crash "$Z" calibrate --quick -o "$T/crash.json" >"$T/out" 2>&1; rc=$?
[ $rc = 77 ] && [ -z "$(ls "$T" | grep crash)" ] && ok "Z-FILE-005 ZINC_FAULT crash: exit 77, nothing written" ||
  bad "Z-FILE-005 crash" "exit $rc: $(ls "$T" | grep crash) $(cat "$T/out")"

# ---- zinc calibrate -------------------------------------------------------
CU="usage: zinc calibrate"
# spec: Z-CAL-003 refusals: a value missing, a bad --threads, a backend zinc does not know or calibrate does not run on
with_usage "Z-CAL-003 -o without a value" "zinc calibrate: a value is missing after -o" "$CU" -- calibrate --quick -o
with_usage "Z-CAL-003 --name without a value" "zinc calibrate: a value is missing after --name" "$CU" -- calibrate -o "$T/m.json" --name
with_usage "Z-CAL-003 --rendezvous without a value" "zinc calibrate: a value is missing after --rendezvous" "$CU" -- calibrate -o "$T/m.json" --rendezvous
with_usage "Z-CAL-003 --threads 0" "zinc calibrate: --threads: expected 1..256, got 0" "$CU" -- calibrate --threads 0 -o "$T/m.json"
with_usage "Z-CAL-003 --threads word" "zinc calibrate: --threads: expected 1..256, got abc" "$CU" -- calibrate --threads abc -o "$T/m.json"
with_usage "Z-CAL-003 --world-size word" "zinc calibrate: --world-size: expected 1..4096, got 2x" "$CU" -- calibrate --world-size 2x -o "$T/m.json"
with_usage "Z-CAL-003 --world-size overflow" "zinc calibrate: --world-size: expected 1..4096, got 99999999999999999999" "$CU" -- calibrate --world-size 99999999999999999999 -o "$T/m.json"
with_usage "Z-CAL-003 --backend unknown" "zinc calibrate: --backend: expected sim, cuda, tcp, mpi or nccl, got 'gloo'" "$CU" -- calibrate --backend gloo -o "$T/m.json"
with_usage "Z-CAL-003 --backend cuda" "zinc calibrate: --backend: calibrate runs on sim, tcp or mpi, not cuda" "$CU" -- calibrate --backend cuda -o "$T/m.json"
# spec: Z-CAL-003 a --name the machine file cannot hold is refused before
# anything is measured: a control character, or more than 63 bytes (it was
# cut to 63 bytes after the measuring)
with_usage "Z-CAL-003 --name with a tab" "zinc calibrate: --name: expected 1 to 63 bytes of printable UTF-8, got 'a	b'" "$CU" -- calibrate --quick --name "a	b" -o "$T/m.json"
N64=$(printf '%064d' 0)
with_usage "Z-CAL-003 --name of 64 bytes" "zinc calibrate: --name: expected 1 to 63 bytes of printable UTF-8, got '$N64'" "$CU" -- calibrate --quick --name "$N64" -o "$T/m.json"
with_usage "Z-CAL-003 --name empty" "zinc calibrate: --name: expected 1 to 63 bytes of printable UTF-8, got ''" "$CU" -- calibrate --quick --name "" -o "$T/m.json"
[ ! -e "$T/m.json" ] && ok "Z-CAL-003 no machine file after the refusals" || bad "Z-CAL-003 no file" "$T/m.json exists"
# spec: Z-CAL-002 --name of 63 bytes, --threads, 2 ranks: the file holds the name whole
N63=$(printf 'n%062d' 0)
"$Z" calibrate --quick --world-size 2 --threads 2 --name "$N63" -o "$T/m.json" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ ! -s "$T/err" ] && grep -q "^zinc calibrate: 2 sim ranks: GEMM .* -> $T/m.json\$" "$T/out" &&
  grep -qx "  \"name\": \"$N63\"," "$T/m.json" && grep -qx '  "gpus_per_node": 2,' "$T/m.json" &&
  ok "Z-CAL-002 --name of 63 bytes, --threads 2" || bad "Z-CAL-002 --name" "exit $rc: $(cat "$T/err" "$T/out")"
# spec: Z-CAL-002 an -o without a folder: the probe and the file in the current folder
mkdir "$T/cwd"
(cd "$T/cwd" && "$Z" calibrate --quick -o here.json) >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q '^zinc calibrate: 1 sim rank: .* -> here.json$' "$T/out" && [ "$(ls -A "$T/cwd")" = here.json ] &&
  grep -qx '  "name": "calibrated-sim-1",' "$T/cwd/here.json" &&
  ok "Z-CAL-002 -o FILE in the current folder" || bad "Z-CAL-002 cwd" "exit $rc: $(cat "$T/err") $(ls -A "$T/cwd")"
# spec: Z-CAL-004 Z-FILE-002 an -o under a regular file (the probe cannot be made), an
# -o that is a directory (the rename fails), a file name over NAME_MAX: exit
# 1 naming the path and the reason, nothing left behind
one_line "Z-CAL-004 -o under a regular file" 1 "zinc: error: rank 0: calibrate: cannot create a file in '/etc/passwd': Not a directory" -- calibrate --quick -o /etc/passwd/m.json
mkdir "$T/isdir"
one_line "Z-CAL-004 -o a directory" 1 "zinc: error: $T/isdir: rename failed: Is a directory" -- calibrate --quick -o "$T/isdir"
[ -z "$(ls -A "$T/isdir")" ] && [ -z "$(ls "$T" | grep '^isdir.')" ] && ok "Z-CAL-004 -o a directory: nothing left" ||
  bad "Z-CAL-004 leftovers" "$(ls -A "$T" "$T/isdir")"
$TO "$Z" calibrate --quick -o "$T/$L300.json" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && [ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" = 1 ] &&
  grep -qx "zinc: error: $T/$L300.json: cannot create temporary $T/$L300.json.tmp.[0-9]*: File name too long" "$T/err" &&
  ok "Z-CAL-004 -o name too long" || bad "Z-CAL-004 too long" "exit $rc: $(cut -c1-120 "$T/err")"
# spec: Z-CAL-004 --backend tcp without a launcher: exit 2 with the process backend's error
one_line "Z-CAL-004 --backend tcp without a launcher" 2 "zinc: error: --backend tcp: no launcher environment (RANK and WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS or PMI_*); start the ranks with zinc launch, torchrun, srun or mpirun" -- calibrate --backend tcp -o "$T/m.json"
# spec: Z-NODE-007 Z-CAL-001 two launcher nodes of 2 tcp ranks, met through a
# file (--rendezvous file:): both links measured, the node's size in the
# file, the line names them; the other ranks print nothing
cal="$T/nodes.json"
( ZINC_RDV_TIMEOUT=30 $TO "$Z" launch --nproc-per-node 2 --nnodes 2 --node-rank 1 -- zinc calibrate --backend tcp \
    --rendezvous "file:$T/rdv" --quick --name two-nodes -o "$cal" >"$T/n1" 2>&1 ) &
n1=$!
ZINC_RDV_TIMEOUT=30 $TO "$Z" launch --nproc-per-node 2 --nnodes 2 --node-rank 0 -- zinc calibrate --backend tcp \
  --rendezvous "file:$T/rdv" --quick --name two-nodes -o "$cal" >"$T/n0" 2>&1; rc0=$?
wait $n1; rc1=$?
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ ! -s "$T/n1" ] && [ "$(wc -l <"$T/n0")" = 1 ] &&
   grep -q "^\[rank0\]: zinc calibrate: 4 tcp ranks: GEMM .* beta [0-9.]* GB/s in a node of 2, alpha [0-9.]* us beta [0-9.]* GB/s between 2 nodes, disk [0-9.]* GB/s -> $cal\$" "$T/n0" &&
   grep -qx '  "name": "two-nodes",' "$cal" && grep -qx '  "gpus_per_node": 2,' "$cal" &&
   grep -q '^  "inter_node": {"latency_us": [0-9.e+-]*, "bandwidth_gbps": [0-9.e+-]*},$' "$cal"; then
  ok "Z-NODE-007 calibrate across 2 launcher nodes (file rendezvous)"
else bad "Z-NODE-007 calibrate 2 nodes" "exit $rc0/$rc1: $(cat "$T/n0" "$T/n1")"; fi

# ---- zinc launch ----------------------------------------------------------
# spec: Z-LAUNCH-001 a flag without its value (also when '--' follows), an
# unknown flag (with the usage), an empty --master-addr, a bad count
one_line "Z-LAUNCH-001 --master-addr without a value" 2 "zinc: error: zinc launch: --master-addr needs a value" -- launch --master-addr
one_line "Z-LAUNCH-001 --master-addr before --" 2 "zinc: error: zinc launch: --master-addr needs a value" -- launch --master-addr -- true
one_line "Z-LAUNCH-001 --master-addr empty" 2 "zinc: error: zinc launch: --master-addr: expected a host name or address, got ''" -- launch --master-addr "" -- true
with_usage "Z-LAUNCH-001 unknown flag" "zinc: error: zinc launch: unknown flag '--nprocs'" "usage: zinc launch" -- launch --nprocs 2 -- true
one_line "Z-LAUNCH-001 --nproc-per-node 0" 2 "zinc: error: --nproc-per-node: expected an integer in 1..1024, got '0'" -- launch --nproc-per-node 0 -- true
one_line "Z-LAUNCH-001 --nnodes word" 2 "zinc: error: --nnodes: expected an integer in 1..65536, got 'two'" -- launch --nnodes two -- true
one_line "Z-LAUNCH-001 --node-rank -1" 2 "zinc: error: --node-rank: expected an integer in 0..65535, got '-1'" -- launch --node-rank -1 -- true
# spec: Z-LAUNCH-001 --master-addr and --master-port reach the ranks as MASTER_ADDR and MASTER_PORT
$TO "$Z" launch --master-addr 10.1.2.3 --master-port 4242 -- sh -c 'echo "$MASTER_ADDR:$MASTER_PORT $GROUP_RANK"' >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/out")" = "[rank0]: 10.1.2.3:4242 0" ] && ok "Z-LAUNCH-001 --master-addr, --master-port" ||
  bad "Z-LAUNCH-001 master" "exit $rc: $(cat "$T/out" "$T/err")"
# spec: Z-LAUNCH-004 --backend mpi across nodes is refused, pointing to mpirun or srun
one_line "Z-LAUNCH-004 mpi across nodes" 2 "zinc: error: zinc launch: --backend mpi across nodes: start it with mpirun or srun (MPI's runtime places the ranks)" -- launch --nnodes 2 --nproc-per-node 2 -- zinc train --backend mpi
# spec: Z-LAUNCH-007 a last line without a newline is written with its
# prefix; a line over 8192 bytes is cut into prefixed pieces of 8192
$TO "$Z" launch -- printf 'no newline' >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/out")" = "[rank0]: no newline" ] && ok "Z-LAUNCH-007 last line without a newline" ||
  bad "Z-LAUNCH-007 no newline" "exit $rc: $(cat "$T/out")"
$TO "$Z" launch -- sh -c 'head -c 9000 /dev/zero | tr "\0" a; echo' >"$T/out" 2>&1; rc=$?
a808=$(head -c 808 /dev/zero | tr '\0' a)
if [ $rc = 0 ] && [ "$(wc -l <"$T/out")" = 2 ] && [ "$(head -n 1 "$T/out" | wc -c)" = $((9 + 8192 + 1)) ] &&
   [ "$(sed -n 2p "$T/out")" = "[rank0]: $a808" ]; then ok "Z-LAUNCH-007 a 9000-byte line: 8192 + 808"
else bad "Z-LAUNCH-007 long line" "exit $rc: $(wc -l <"$T/out") lines"; fi
# spec: Z-LAUNCH-003 a rank that fails without a 'zinc: error:' line is named with its exit code; the others' exit 0 is no failure
$TO "$Z" launch --nproc-per-node 2 -- sh -c 'exit $((RANK * 3))' >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && [ "$(cat "$T/err")" = "zinc launch: rank 1 failed (exit code 3)" ] && ok "Z-LAUNCH-003 rank 1 exits 3, rank 0 exits 0" ||
  bad "Z-LAUNCH-003 exit code" "exit $rc: $(cat "$T/err")"

# spec: Z-LAUNCH-005 SIGHUP to the launcher reaches the ranks (each a sleep
# of 10 s, which bounds the check); the launcher reports the signal, exit 1
"$Z" launch --nproc-per-node 2 -- sh -c 'echo up; exec sleep 10' >"$T/hup" 2>"$T/hup.err" &
lp=$!
i=0; while [ "$(grep -c up "$T/hup")" != 2 ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done
kill -HUP $lp; wait $lp; rc=$?
[ $rc = 1 ] && grep -qx 'zinc launch: rank [01] failed (killed by signal 1 (Hangup))' "$T/hup.err" &&
  ok "Z-LAUNCH-005 SIGHUP forwarded" || bad "Z-LAUNCH-005 SIGHUP" "exit $rc: $(cat "$T/hup" "$T/hup.err")"

# ---- zinc train: paths and flags -----------------------------------------
# spec: Z-CLI-007 a log that cannot be opened names the path and the reason (exit 1)
last_err "Z-CLI-007 --log a directory" 1 "zinc: error: cannot open log file '$T/isdir': Is a directory" -- train $M --steps 1 --log "$T/isdir"
last_err "Z-CLI-007 --log under a regular file" 1 "zinc: error: cannot open log file '/etc/passwd/x.csv': Not a directory" -- train $M --steps 1 --log /etc/passwd/x.csv
# spec: Z-CLI-007 a log whose writes fail (a full disk) fails the run, exit 1
last_err "Z-CLI-007 --log on a full disk" 1 "zinc: error: writing log file '/dev/full' failed" -- train $M --steps 2 --log /dev/full
# spec: Z-REP-004 a trace that cannot be written names the path and the reason
last_err "Z-REP-004 --trace under a regular file" 1 "zinc: error: cannot write trace file '/etc/passwd/t.json': Not a directory" -- train $M --steps 3 --steps-per-print 1 --trace /etc/passwd/t.json
# ... before the training, not after it: no step ran
if grep -q '^step=\|^digest=' "$T/out"; then bad "Z-REP-004 --trace checked first" "$(cat "$T/out")"
else ok "Z-REP-004 --trace checked before the first step"; fi
# spec: Z-FILE-007 Z-CKPT-001 a checkpoint folder under a regular file, or
# with a component too long, fails the first save naming the path (exit 1)
last_err "Z-FILE-007 --checkpoint-dir under a regular file" 1 "zinc: error: rank 0: /etc/passwd: exists and is not a directory" -- train $M --steps 0 --checkpoint-dir /etc/passwd/ck
last_err "Z-FILE-007 --checkpoint-dir component too long" 1 "zinc: error: rank 0: $T/$L300: mkdir failed: File name too long" -- train $M --steps 2 --checkpoint-interval 1 --checkpoint-dir "$T/$L300/ck"
# spec: Z-CLI-006 out-of-range and malformed values of train's flags
one_line "Z-CLI-006 --lr overflow" 2 "zinc: error: --lr: expected a number >= 0, got '1e400'" -- train --lr 1e400
one_line "Z-CLI-006 --lr inf" 2 "zinc: error: --lr: expected a number >= 0, got 'inf'" -- train --lr inf
one_line "Z-CLI-006 --dtype fp8" 2 "zinc: error: --dtype: expected fp32, fp16 or bf16, got 'fp8'" -- train --dtype fp8
one_line "Z-CLI-006 --device-memory no value" 2 "zinc: error: --device-memory needs a value" -- train --device-memory
# spec: Z-OFF-008 a malformed --device-memory (below a byte, too big, an unknown unit) quotes it
one_line "Z-OFF-008 --device-memory half a byte" 2 "zinc: error: --device-memory: expected a size such as 80GB, 40GiB or 1000000 (bytes), got '0.5'" -- train --device-memory 0.5
one_line "Z-OFF-008 --device-memory 1e19" 2 "zinc: error: --device-memory: expected a size such as 80GB, 40GiB or 1000000 (bytes), got '1e19'" -- train --device-memory 1e19
one_line "Z-OFF-008 --device-memory 5XB" 2 "zinc: error: --device-memory: expected a size such as 80GB, 40GiB or 1000000 (bytes), got '5XB'" -- train --device-memory 5XB
one_line "Z-OFF-008 --device-memory -5GB" 2 "zinc: error: --device-memory: expected a size such as 80GB, 40GiB or 1000000 (bytes), got '-5GB'" -- train --device-memory -5GB
one_line "Z-OFF-008 --device-memory GB" 2 "zinc: error: --device-memory: expected a size such as 80GB, 40GiB or 1000000 (bytes), got 'GB'" -- train --device-memory GB
# spec: Z-SEQ-002 a malformed --test-repeat-layer RANK:LAYER
one_line "Z-SEQ-002 --test-repeat-layer no layer" 2 "zinc: error: --test-repeat-layer: expected RANK:LAYER (0..4095:0..63), got '1:'" -- train --test-repeat-layer 1:
one_line "Z-SEQ-002 --test-repeat-layer overflow" 2 "zinc: error: --test-repeat-layer: expected RANK:LAYER (0..4095:0..63), got '99999999999999999999:1'" -- train --test-repeat-layer 99999999999999999999:1
one_line "Z-SEQ-002 --test-repeat-layer trailing" 2 "zinc: error: --test-repeat-layer: expected RANK:LAYER (0..4095:0..63), got '1:2x'" -- train --test-repeat-layer 1:2x
# spec: Z-GRP-002 --ranks-per-node is the simulator's: refused with a process backend
one_line "Z-GRP-002 --ranks-per-node with tcp" 2 "zinc: error: --ranks-per-node sets the simulator's nodes; processes take theirs from the launcher (LOCAL_WORLD_SIZE: zinc launch --nproc-per-node P --nnodes M)" -- train --backend tcp --ranks-per-node 2
# spec: Z-PROC-004 --trace records the simulator's ranks: refused with ranks in processes
ZINC_RDV_TIMEOUT=20 $TO "$Z" launch -- zinc train --backend tcp --rendezvous "file:$T/rdv1" --model mlp:4,4 --steps 1 --trace "$T/t.json" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -qx "zinc launch: rank 0 failed (exit code 2): zinc: error: --trace records the simulator's ranks; with ranks in separate processes it is not available" "$T/err" && [ ! -e "$T/t.json" ] &&
  ok "Z-PROC-004 --trace refused with tcp ranks" || bad "Z-PROC-004 --trace" "exit $rc: $(cat "$T/err")"
# spec: Z-CFG-014 a train_batch_size "auto" whose product overflows is refused
printf '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4611686018427387904, "gradient_accumulation_steps": 4}\n' >"$T/tb.json"
one_line "Z-CFG-014 auto train_batch_size overflows" 2 "zinc: error: $T/tb.json: train_batch_size: \"auto\" overflows" -- train $M --config "$T/tb.json" --steps 0
# spec: Z-CFG-035 bf16_optimizer_states at stage 0
printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 0}, "bf16": {"enabled": true, "bf16_optimizer_states": true}}\n' >"$T/bf.json"
one_line "Z-CFG-035 bf16_optimizer_states at stage 0" 2 "zinc: error: $T/bf.json: bf16.bf16_optimizer_states: only supported with ZeRO stage 1, 2 or 3" -- train $M --config "$T/bf.json" --steps 0
# spec: Z-CFG-049 zero_quantized_nontrainable_weights and mics_hierarchical_params_gather alone: one warning each, the run goes on
printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3, "zero_quantized_nontrainable_weights": true, "mics_hierarchical_params_gather": true}}\n' >"$T/zq.json"
"$Z" train $M --config "$T/zq.json" --steps 0 >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q '^digest=' "$T/out" && [ "$(cat "$T/err")" = "zinc: warning: $T/zq.json: zero_optimization.zero_quantized_nontrainable_weights: every parameter of a zinc model trains; no effect
zinc: warning: $T/zq.json: zero_optimization.mics_hierarchical_params_gather: applies with mics_shard_size > 0; ignored" ] &&
  ok "Z-CFG-049 two warnings, the run goes on" || bad "Z-CFG-049 warnings" "exit $rc: $(cat "$T/err")"
# spec: Z-OPT-020 zinc.weight_decay_exclude: at most 16 substrings, none empty
printf '{"train_micro_batch_size_per_gpu": 2, "zinc": {"weight_decay_exclude": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}}\n' >"$T/wd.json"
one_line "Z-OPT-020 17 substrings" 2 "zinc: error: $T/wd.json: zinc.weight_decay_exclude: at most 16 substrings" -- train $M --config "$T/wd.json" --steps 0
printf '{"train_micro_batch_size_per_gpu": 2, "zinc": {"weight_decay_exclude": ["bias", ""]}}\n' >"$T/wd.json"
one_line "Z-OPT-020 an empty substring" 2 "zinc: error: $T/wd.json: zinc.weight_decay_exclude[1]: expected a non-empty string of at most 63 characters" -- train $M --config "$T/wd.json" --steps 0
# spec: Z-CFG-051 "yes" for a boolean of zero_optimization: taken as true, with one warning
printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "overlap_comm": "Yes"}}\n' >"$T/yes.json"
"$Z" train $M --config "$T/yes.json" --steps 0 >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/err")" = "zinc: warning: $T/yes.json: zero_optimization.overlap_comm: \"Yes\" taken as true, as DeepSpeed's pydantic reads it" ] &&
  ok "Z-CFG-051 \"Yes\" taken as true" || bad "Z-CFG-051 yes" "exit $rc: $(cat "$T/err")"

# ---- zinc plan: machine files and the picture ---------------------------
P="plan --model mlp:4,4 --world-size 2"
# spec: Z-MACH-007 a wrong type is named (true, an array, an object), a bad name, gpus_per_node out of range
printf '{"preset": "dgx-h100", "device_tflops": true}' >"$T/m1.json"
last_err "Z-MACH-007 a boolean figure" 2 "zinc: error: $T/m1.json: device_tflops: expected a number, got true" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "intra_node": {"latency_us": [1], "bandwidth_gbps": 1}}' >"$T/m1.json"
last_err "Z-MACH-007 an array figure" 2 "zinc: error: $T/m1.json: intra_node.latency_us: expected a number, got an array" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "nvme_gbps": {"a": 1}}' >"$T/m1.json"
last_err "Z-MACH-007 an object figure" 2 "zinc: error: $T/m1.json: nvme_gbps: expected a number, got an object" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "name": "a\\u0001b"}' >"$T/m1.json"
last_err "Z-MACH-007 a control character in the name" 2 "zinc: error: $T/m1.json: name: expected a string of 1 to 63 bytes of printable UTF-8, got \"a\\x01b\"" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "gpus_per_node": -3}' >"$T/m1.json"
last_err "Z-MACH-007 gpus_per_node -3" 2 "zinc: error: $T/m1.json: gpus_per_node: expected an integer from 1 to 4096, got -3" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "gpus_per_node": 123456789}' >"$T/m1.json"
last_err "Z-MACH-007 gpus_per_node too big" 2 "zinc: error: $T/m1.json: gpus_per_node: expected an integer from 1 to 4096, got 123456789" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "device_tflops": false}' >"$T/m1.json"
last_err "Z-MACH-007 false for a figure" 2 "zinc: error: $T/m1.json: device_tflops: expected a number, got false" -- $P --machine "$T/m1.json"
printf '{"preset": "dgx-h100", "overlap": 1}' >"$T/m1.json"
last_err "Z-MACH-007 overlap 1" 2 "zinc: error: $T/m1.json: overlap: expected true or false, got 1" -- $P --machine "$T/m1.json"
printf '{"name": "x", "gpus_per_node": 8, "device_tflops": 1, "device_mem_gbps": 1, "device_memory_gib": 1, "intra_node": {"latency_us": 1, "bandwidth_gbps": 1}, "host_device_gbps": 1, "host_adam_gelems": 1, "nvme_gbps": 1}' >"$T/m1.json"
last_err "Z-MACH-007 inter_node missing without a preset" 2 "zinc: error: $T/m1.json: inter_node: missing (a machine file without \"preset\" gives every key)" -- $P --machine "$T/m1.json"
# spec: Z-CAP-001 nodes that are not the default machine's: no step time, a line says so
"$Z" plan --model mlp:4,4 --world-size 4 --ranks-per-node 2 --steps 1 >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ ! -s "$T/err" ] && grep -qx "\[zinc\] plan: no step time: the run's nodes are not dgx-h100's; give --machine" "$T/out" &&
  ! grep -q 'step_s\|step time [0-9]' "$T/out" && ok "Z-CAP-001 no step time on nodes of 2" || bad "Z-CAP-001 no step time" "exit $rc: $(cat "$T/err")"
# spec: Z-CAP-005 an --svg that cannot be written fails the plan after its report (exit 1) naming the path
$TO "$Z" $P --svg /etc/passwd/p.svg >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q '^\[zinc\] dry run: rank 0 of 2' "$T/out" && [ "$(wc -l <"$T/err")" = 1 ] &&
  grep -qx "zinc: error: /etc/passwd/p.svg: cannot create temporary /etc/passwd/p.svg.tmp.[0-9]*: Not a directory" "$T/err" &&
  ok "Z-CAP-005 --svg under a regular file" || bad "Z-CAP-005 --svg" "exit $rc: $(cat "$T/err")"

# spec: Z-DRY-005 the dry run's header names the offload devices (optimizer
# on nvme, parameters on the cpu); at stage 0 there is no estimator line
# and no gathered-parameter peak, the step's points are there
printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "%s"}, "offload_param": {"device": "cpu"}}}\n' "$T" >"$T/off.json"
"$Z" train $M --dry-run --steps 1 --config "$T/off.json" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ ! -s "$T/err" ] && grep -qx '\[zinc\] dry run: rank 0 of 2 (2 per node), stage 3, 20 parameters (20 padded), partition 10 elements, offload optimizer nvme, offload param cpu' "$T/out" &&
  ok "Z-DRY-005 header: offload optimizer nvme, offload param cpu" || bad "Z-DRY-005 offload header" "exit $rc: $(cat "$T/err")"
"$Z" train $M --dry-run --steps 1 --stage 0 >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -qx '\[zinc\] dry run: rank 0 of 2 (2 per node), stage 0, 20 parameters (20 padded), partition 20 elements, offload optimizer none, offload param none' "$T/out" &&
  grep -q '^\[zinc\] dry run \[rank 0\] device at ' "$T/out" && ! grep -q 'DeepSpeed estimate\|gathered params' "$T/out" &&
  ok "Z-DRY-005 stage 0: no estimator, no gathered peak" || bad "Z-DRY-005 stage 0" "exit $rc: $(head -n 3 "$T/out")"

# ---- zinc sample ----------------------------------------------------------
"$Z" train --model gpt2:n_layer=1,n_head=1,n_embd=4,vocab_size=256,n_positions=4 --data text:tests/data/gpl-3.txt \
  --world-size 1 --steps 0 --checkpoint-dir "$T/g" >/dev/null 2>&1 || bad "sample: the checkpoint" "train failed"
SU="usage: zinc sample"
# spec: Z-SAMPLE-006 a temperature below 0, above 10000 or empty; an empty or overflowing count
one_line "Z-SAMPLE-006 --temperature -1" 2 "zinc: error: --temperature: expected a number in [0, 10000], got '-1'" -- sample --checkpoint-dir "$T/g" --prompt ab --temperature -1
one_line "Z-SAMPLE-006 --temperature 1e5" 2 "zinc: error: --temperature: expected a number in [0, 10000], got '1e5'" -- sample --checkpoint-dir "$T/g" --prompt ab --temperature 1e5
one_line "Z-SAMPLE-006 --temperature empty" 2 "zinc: error: --temperature: expected a number in [0, 10000], got ''" -- sample --checkpoint-dir "$T/g" --prompt ab --temperature ""
one_line "Z-SAMPLE-006 --max-new-tokens empty" 2 "zinc: error: --max-new-tokens: expected an integer in 0..1048576, got ''" -- sample --checkpoint-dir "$T/g" --prompt ab --max-new-tokens ""
one_line "Z-SAMPLE-006 --max-new-tokens overflow" 2 "zinc: error: --max-new-tokens: expected an integer in 0..1048576, got '99999999999999999999999'" -- sample --checkpoint-dir "$T/g" --prompt ab --max-new-tokens 99999999999999999999999
"$Z" train --model gpt2:n_layer=1,n_head=1,n_embd=4,vocab_size=300,n_positions=4 --data text:tests/data/gpl-3.txt \
  --world-size 1 --steps 0 --checkpoint-dir "$T/v300" >/dev/null 2>&1 || bad "sample: the v300 checkpoint" "train failed"
# spec: Z-SAMPLE-005 token ids below 0 or beyond a long are named
one_line "Z-SAMPLE-005 a negative id" 2 "zinc: error: --prompt: token 1 ('-1') is not an id in 0..299 (a vocabulary of 300 reads comma-separated token ids)" -- sample --checkpoint-dir "$T/v300" --prompt 1,-1
one_line "Z-SAMPLE-005 an id beyond a long" 2 "zinc: error: --prompt: token 0 ('99999999999999999999') is not an id in 0..299 (a vocabulary of 300 reads comma-separated token ids)" -- sample --checkpoint-dir "$T/v300" --prompt 99999999999999999999
with_usage "Z-SAMPLE-006 --prompt missing" "zinc: error: zinc sample needs --checkpoint-dir and --prompt" "$SU" -- sample --checkpoint-dir "$T/g"
with_usage "Z-SAMPLE-006 --checkpoint-dir too long" "zinc: error: --checkpoint-dir: path too long" "$SU" -- sample --checkpoint-dir "/$(printf '%05000d' 0)" --prompt ab
# spec: Z-SAMPLE-007 Z-FILE-002 --logits that cannot be written: exit 1 naming the path, nothing generated, nothing left behind
one_line "Z-SAMPLE-007 --logits a directory" 1 "zinc: error: $T/isdir: rename failed: Is a directory" -- sample --checkpoint-dir "$T/g" --prompt ab --max-new-tokens 2 --logits "$T/isdir"
[ -z "$(ls -A "$T/isdir")" ] && [ -z "$(ls "$T" | grep '^isdir.')" ] && ok "Z-SAMPLE-007 nothing left behind" || bad "Z-SAMPLE-007 leftovers" "$(ls -A "$T")"
# spec: Z-SAMPLE-007 a prompt longer than n_positions: the window's T = 4 rows of 256 logits (a safetensors file of 4096 bytes of data)
"$Z" sample --checkpoint-dir "$T/g" --prompt abcdef --max-new-tokens 2 --logits "$T/l.st" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ ! -s "$T/err" ] && [ "$(head -c 6 "$T/out")" = abcdef ] &&
  python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; h=json.loads(b[8:8+n]); e=h["logits"]; sys.exit(0 if e["dtype"]=="F32" and e["shape"]==[4,256] and e["data_offsets"]==[0,4096] and len(b)==8+n+4096 else 1)' "$T/l.st" &&
  ok "Z-SAMPLE-007 --logits of a window cut to n_positions" || bad "Z-SAMPLE-007 window" "exit $rc: $(cat "$T/err")"

# ---- zinc plot ------------------------------------------------------------
printf 'step,loss\n1,2.5\n2,1.5\n3,1.0\n' >"$T/a.csv"
# spec: Z-PLOT-001 --names whose count differs from the files' (both ways); an output that is an input by another path
one_line "Z-PLOT-001 --names one for two files" 2 "zinc: error: --names: 1 name for 2 files" -- plot "$T/a.csv" "$T/a.csv" --names only -o "$T/x.svg"
one_line "Z-PLOT-001 --names two for one file" 2 "zinc: error: --names: 2 names for 1 file" -- plot "$T/a.csv" --names a,b -o "$T/x.svg"
one_line "Z-PLOT-001 -o the input by another path" 2 "zinc: error: output '$T/./a.csv' is also an input file" -- plot "$T/a.csv" -o "$T/./a.csv"
one_line "Z-PLOT-001 --metric without a value" 2 "zinc: error: --metric needs a value" -- plot "$T/a.csv" --metric
[ ! -e "$T/x.svg" ] && ok "Z-PLOT-001 no picture after the refusals" || bad "Z-PLOT-001 no file" "$T/x.svg exists"
# spec: Z-PLOT-003 spaces and tabs around fields are trimmed (header and rows)
printf ' step\t, loss \n1 , 2.5\n2,\t1.5 \n' >"$T/sp.csv"
"$Z" plot "$T/sp.csv" -o "$T/sp.svg" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/out")" = "zinc plot: wrote $T/sp.svg (1 run, loss)" ] && [ "$(grep -c '<path class="run" data-run="sp"' "$T/sp.svg")" = 1 ] &&
  ok "Z-PLOT-003 fields trimmed" || bad "Z-PLOT-003 trimmed" "exit $rc: $(cat "$T/err")"
# spec: Z-PLOT-004 a value too long to be a number is quoted cut at 40 characters; a header without step
printf 'step,loss\n1,%0200d\n' 9 >"$T/long.csv"
one_line "Z-PLOT-004 a 200-character value" 2 "zinc: error: $T/long.csv:2: column 'loss' (field 2): not a number: '$(printf '%040d' 0)...'" -- plot "$T/long.csv" -o "$T/x.svg"
printf 'iter,loss\n1,2\n' >"$T/nostep.csv"
one_line "Z-PLOT-004 no step column" 2 "zinc: error: $T/nostep.csv:1: the header has no 'step' column (header: 'iter,loss')" -- plot "$T/nostep.csv" -o "$T/x.svg"
# spec: Z-PLOT-008 Z-PLOT-009 axes that cannot be drawn name the axis: a span that overflows (x and y), a log axis beyond 1e300
printf 'step,loss\n-1e308,1\n1e308,2\n' >"$T/wide.csv"
one_line "Z-PLOT-008 x axis too wide" 2 "zinc: error: x axis (step): axis range -1e+308..1e+308 is too wide to draw" -- plot "$T/wide.csv" -o "$T/x.svg"
printf 'step,loss\n1,-1e308\n2,1e308\n' >"$T/wide.csv"
one_line "Z-PLOT-008 y axis too wide" 2 "zinc: error: y axis (loss): axis range -1e+308..1e+308 is too wide to draw" -- plot "$T/wide.csv" -o "$T/x.svg"
printf 'step,loss\n1,1e301\n2,1\n' >"$T/big.csv"
one_line "Z-PLOT-009 log axis beyond 1e300" 2 "zinc: error: y axis (loss): values 1..1e+301 are out of range for a log axis" -- plot "$T/big.csv" --logy -o "$T/x.svg"
# spec: Z-PLOT-016 an output under a regular file, or a directory: exit 2, no temporary left
one_line "Z-PLOT-016 -o under a regular file" 2 "zinc: error: cannot write '/etc/passwd/x.svg.tmp': Not a directory" -- plot "$T/a.csv" -o /etc/passwd/x.svg
one_line "Z-PLOT-016 -o a directory" 2 "zinc: error: cannot rename '$T/isdir.tmp' to '$T/isdir': Is a directory" -- plot "$T/a.csv" -o "$T/isdir"
[ -z "$(ls "$T" | grep '^isdir.')" ] && ok "Z-PLOT-016 no temporary left" || bad "Z-PLOT-016 leftovers" "$(ls "$T")"
# spec: Z-PLOT-016 an output without a folder is written in the current one
(cd "$T/cwd" && "$Z" plot ../a.csv -o rel.svg) >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/out")" = "zinc plot: wrote rel.svg (1 run, loss)" ] && [ -s "$T/cwd/rel.svg" ] && [ -z "$(ls "$T/cwd" | grep tmp)" ] &&
  ok "Z-PLOT-016 -o in the current folder" || bad "Z-PLOT-016 cwd" "exit $rc: $(cat "$T/out")"

# ---- zinc estimate --------------------------------------------------------
# spec: Z-EST-009 the command prints the tables, exit 0, the note on stderr
"$Z" estimate --params 1B --stage 3 --offload none >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$(head -n 1 "$T/out")" = "DeepSpeed estimate_zero3_model_states_mem_needs_all_cold (ZeRO stage 3):" ] &&
  grep -qx '    0.00GB |  16.76GB | offload_param=none, offload_optimizer=none, zero_init=1' "$T/out" &&
  [ "$(grep -c 'offload_param=' "$T/out")" = 2 ] &&
  [ "$(cat "$T/err")" = "zinc estimate: note: --largest-layer not given: stage 3 counts 0 for the largest layer, so its GPU figures are lower bounds" ] &&
  ok "Z-EST-009 zinc estimate --stage 3 --offload none" || bad "Z-EST-009 estimate" "exit $rc: $(cat "$T/err" "$T/out")"
# spec: Z-EST-008 an exponent of three digits; Z-EST-011 a buffer factor that is not a finite number > 0
one_line "Z-EST-008 --params 1e123" 2 "zinc: error: --params: expected a parameter count such as 350M, 7.5B or 2851e6, got '1e123'" -- estimate --params 1e123
one_line "Z-EST-011 --buffer-factor inf" 2 "zinc: error: --buffer-factor: expected a finite number > 0, got 'inf'" -- estimate --params 1B --buffer-factor inf
one_line "Z-EST-011 --buffer-factor 0" 2 "zinc: error: --buffer-factor: expected a finite number > 0, got '0'" -- estimate --params 1B --buffer-factor 0

# ---- zinc train: the run's reports and logs at their edges -------------------
# spec: Z-CLI-006 a float flag past the double range is the flag's message, exit 2
one_line "Z-CLI-006 train --lr overflow" 2 "zinc: error: --lr: expected a number >= 0, got '1e400'" -- train $M --lr 1e400
# spec: Z-CLI-006 --grad-accum alone leaves the built-in config without a batch: DeepSpeed's message
one_line "Z-CLI-006 train --grad-accum alone" 2 "zinc: error: built-in config: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided" -- train $M --grad-accum 2
# spec: Z-CAP-002 an unknown --machine that is no file either names the presets, exit 1
last_err "Z-CAP-002 dry run --machine unknown" 1 "zinc: error: $T/nosuch: open failed: No such file or directory (not a machine preset either: dgx-h100, dgx-a100)" -- train $M --dry-run --machine "$T/nosuch"
# spec: Z-REP-007 a short CSV name (no .jsonl) is a CSV with its header; a log
# whose writes fail (a full disk) fails the run at its end, exit 1
(cd "$T" && $TO "$Z" train $M --steps 2 --log a.csv >/dev/null 2>&1)
if [ "$(head -n 1 "$T/a.csv" | cut -d, -f1-8)" = "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms" ] &&
   [ "$(wc -l <"$T/a.csv")" -eq 3 ]; then ok "Z-REP-007 log a.csv"; else bad "Z-REP-007 log a.csv" "$(head -c 300 "$T/a.csv")"; fi
if [ -w /dev/full ]; then
  last_err "Z-REP-007 log to a full disk" 1 "zinc: error: writing log file '/dev/full' failed" -- train $M --steps 2 --log /dev/full
fi
# spec: Z-REP-003 wall_clock_breakdown prints every steps_per_print steps: 3 steps at 2 print once per rank
printf '{"train_micro_batch_size_per_gpu": 4, "wall_clock_breakdown": true, "steps_per_print": 2}\n' >"$T/wc.json"
$TO "$Z" train $M --config "$T/wc.json" --steps 3 >"$T/out" 2>"$T/err"
if [ "$(grep -c '^\[Rank 0\] time (ms) | fwd_microstep: ' "$T/out")" -eq 1 ] && [ "$(grep -c '^\[Rank 1\] time (ms)' "$T/out")" -eq 1 ] &&
   [ "$(grep -c '^step=' "$T/out")" -eq 1 ]; then ok "Z-REP-003 breakdown every steps_per_print"
else bad "Z-REP-003 breakdown every steps_per_print" "$(head -c 400 "$T/out")"; fi
# spec: Z-REP-005 a run of 0 steps has no run averages to print
$TO "$Z" train $M --steps 0 --comm-report >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && ! grep -q 'comm run' "$T/out" && grep -q '^digest=' "$T/out"; then ok "Z-REP-005 comm report of 0 steps"
else bad "Z-REP-005 comm report of 0 steps" "$(head -c 400 "$T/out")"; fi
# spec: Z-CKPT-002 --resume without a checkpoint: the rank's error, exit 1
last_err "Z-CKPT-002 resume with no checkpoint" 1 "zinc: error: rank 0: no checkpoint to resume (latest): $T/ck/latest: open failed: No such file or directory" -- train $M --steps 2 --checkpoint-dir "$T/ck" --resume
# spec: Z-REP-005 a resumed run's averages are over the steps it took (2 of
# 4 here), so they equal an unbroken run's; Z-GRP-003 likewise the node's
# egress with --ranks-per-node 1
RUN0="[zinc] comm run rank 0: grad_reduce 40 B/step, param_gather 40 B/step (forward 0, backward 0, after the step 40), total 80 B/step = 2.00psi(N-1)/N; ZeRO paper 3psi(N-1)/N = 120 B/step (psi=20 with padding, 4 B/element)"
NODE="[zinc] comm inter-node: node 0 sends 80 B/step = 2.0000M (forward gather 0.0000M, backward gather 0.0000M, after the step 1.0000M, gradient reduction 1.0000M; M = 40 B, the 16-bit model)"
$TO "$Z" train $M --steps 2 --checkpoint-dir "$T/ck" --checkpoint-interval 2 >/dev/null 2>&1
$TO "$Z" train $M --steps 4 --checkpoint-dir "$T/ck" --resume --comm-report --ranks-per-node 1 >"$T/out" 2>"$T/err"
if [ "$(grep -F 'comm run rank 0:' "$T/out")" = "$RUN0" ] && [ "$(grep -F 'node 0 sends' "$T/out")" = "$NODE" ]; then
  ok "Z-REP-005 resumed run's averages"; else bad "Z-REP-005 resumed run's averages" "$(grep -F 'comm' "$T/out" | head -c 600)"; fi
# spec: Z-HF-008 only a fresh run of 0 steps saves global_step0: a resumed one saves nothing and keeps the weights
$TO "$Z" train $M --steps 0 --checkpoint-dir "$T/ck" --resume >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && [ ! -e "$T/ck/global_step0" ] && [ "$(cat "$T/ck/latest")" = global_step2 ] &&
   grep -qx 'digest=d832d9e366a0bf2f' "$T/out"; then ok "Z-HF-008 resumed 0 steps saves nothing"
else bad "Z-HF-008 resumed 0 steps saves nothing" "$(ls "$T/ck") $(cat "$T/out" "$T/err")"; fi
# spec: Z-OFF-008 --device-memory in a dry run: the fit says where it overflows
$TO "$Z" train $M --dry-run --device-memory 1KB >"$T/out" 2>"$T/err"
if grep -qxF '[zinc] plan: device memory 0.98 KiB overflows first in init (peak 1.86 GiB)' "$T/out" &&
   grep -qxF '[zinc] plan: largest micro-batch that fits: none (micro-batch 1 does not fit)' "$T/out"; then ok "Z-OFF-008 dry run fit of 1KB"
else bad "Z-OFF-008 dry run fit of 1KB" "$(grep plan: "$T/out" | head -c 400)"; fi

finish climore
