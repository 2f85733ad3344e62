#!/bin/sh
# Multi-process checks: ranks in separate processes under mpirun and under
# zinc launch (tcp backend, env and file rendezvous) give the simulator's
# digest; failures, mismatches and bad environments are reported, not hung.
# Each check names its spec clause. Prints "proc: N passed, N failed".
ZINC=${ZINC:-build/zinc}
case "$ZINC" in /*) ;; *) ZINC="$(pwd)/$ZINC" ;; esac
. tests/lib.sh
# every wait is bounded: a hang fails the check instead of the suite
TO="timeout 120"
export ZINC_RDV_TIMEOUT=30
# OpenMPI refuses root without these (CI runs as root); 2 cores: oversubscribe
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# under ASan, OpenMPI's own allocations at exit are not zinc's leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="mpirun --oversubscribe --bind-to none"
# below the kernel's ephemeral range (32768-60999 by default): no outgoing
# connection on this machine can hold it as its local port (Z-RDV-007).
# ci/run_tests.sh runs the parts side by side: proc takes 20001-23950 (about
# 20 ports from its start), launch_group_test.sh 24001-24900, fault_test.sh
# 25001-29050, test_store 10000-19999; the launcher's default 29500 is left to
# the README's commands
PORT=$((20000 + $$ % 3900))
# the processes whose command line this script looks up (pgrep -f) carry
# ZINC_PROC_RUN=zinc-proc-$$ in their environment (children inherit it), so
# no other run's processes on this machine (another part, another suite) match
run_tag="ZINC_PROC_RUN=zinc-proc-$$"
ours() {   # pids of this script's processes whose command line matches $1 (and
           # with a variable matching $2, a grep -x pattern, when given)
  for p in $(pgrep -f "$1" 2>/dev/null); do
    e=$( { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null) || continue
    printf '%s\n' "$e" | grep -qx "$run_tag" || continue
    [ -z "$2" ] || printf '%s\n' "$e" | grep -qx "$2" || continue
    echo "$p"
  done
}
show() { for p in "$@"; do echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"; done; }

digest() { sed -n 's/^\(\[rank0\]: \)\{0,1\}digest=\([0-9a-f]*\)$/\2/p' "$1" | tail -n 1; }
# same_digest RUN NAME [CHECK...]: ok NAME when the run whose output is in
# $T/RUN printed the digest of the simulator's run in $T/sim (and CHECK, a
# command, succeeds); else bad NAME with both digests and RUN's last lines
same_digest() {   # (_r, _n: names no caller uses, as two_nodes uses name)
  _r=$1; _n=$2; shift 2
  a=$(digest "$T/sim"); b=$(digest "$T/$_r")
  if [ -n "$a" ] && [ "$a" = "$b" ] && { [ $# -eq 0 ] || "$@"; }; then ok "$_n"
  else bad "$_n" "sim '$a' $_r '$b': $(tail -n 3 "$T/$_r")"; fi
}

# stage 3 with every parameter gathered and several buckets, so every
# collective path runs
cat >"$T/cfg.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.002}},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                       "stage3_max_reuse_distance": 0, "reduce_bucket_size": 600,
                       "allgather_bucket_size": 600}}
EOF
M="--config $T/cfg.json --model mlp:12,20,16,6 --steps 4"

# spec: Z-PROC-003 mpirun with 2, 3 and 4 processes prints the simulator's
# digest for every stage in fp32 and bf16, with and without accumulation
if command -v mpirun >/dev/null; then
  for W in 2 3 4; do
    for S in 0 1 2 3; do
      for D in fp32 bf16; do
        for GA in 1 2; do
          A="$M --stage $S --dtype $D --micro-batch 3 --grad-accum $GA"
          $TO "$ZINC" train $A --world-size $W >"$T/sim" 2>&1
          $TO $MPIRUN -np $W "$ZINC" train --backend mpi $A >"$T/mpi" 2>&1
          same_digest mpi "Z-PROC-003 mpi W=$W stage $S $D GA=$GA"
        done
      done
    done
  done

  # spec: Z-PROC-006 a checkpoint saved by 4 MPI processes resumes on 2
  # simulated ranks with the digest of the run that never stopped (canonical)
  C="$M --stage 2 --canonical --train-batch-size 16 --micro-batch 2"
  $TO "$ZINC" train $C --world-size 4 --steps 6 >"$T/full" 2>&1
  $TO $MPIRUN -np 4 "$ZINC" train --backend mpi $C --steps 3 --checkpoint-dir "$T/ck" --checkpoint-interval 3 >"$T/save" 2>&1
  $TO "$ZINC" train $C --world-size 2 --steps 6 --checkpoint-dir "$T/ck" --resume >"$T/resume" 2>&1
  a=$(digest "$T/full"); b=$(digest "$T/resume")
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ -f "$T/ck/global_step3/zero_pp_rank_3_optim_states.safetensors" ]; then
    ok "Z-PROC-006 checkpoint from 4 MPI ranks resumed on 2 simulated"
  else bad "Z-PROC-006" "full '$a' resumed '$b': $(tail -n 2 "$T/save") $(tail -n 2 "$T/resume")"; fi

  # spec: Z-SEQ-002 divergent control flow under MPI is reported, not hung
  cat >"$T/div.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0}}
EOF
  DV="--config $T/div.json --model mlp:6,8,5,4 --test-repeat-layer 1:0 --steps 2"
  $TO $MPIRUN -np 3 "$ZINC" train --backend mpi $DV >"$T/div" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "collective mismatch at call #.*rank 0 all_gather.*vs rank 1 all_gather" "$T/div"; then
    ok "Z-SEQ-002 divergent control flow under mpi"
  else bad "Z-SEQ-002 mpi" "rc=$rc $(grep -m1 error "$T/div")"; fi

  # spec: Z-RDV-009 under mpirun too: rank 1 stops itself before its second
  # loss gather (ZINC_COMM_PAUSE); rank 0's wait ends at --comm-timeout
  # naming the collective and the rank it waited for, and nobody hangs
  $TO $MPIRUN -np 2 env ZINC_COMM_PAUSE=1:loss:2 "$ZINC" train --backend mpi --model mlp:6,8,5,4 --steps 4 \
    --comm-timeout 1 >"$T/mpto" 2>&1
  rc=$?
  stopped=$(sed -n 's/.*stopping before .*, pid \([0-9]*\) (ZINC_COMM_PAUSE)$/\1/p' "$T/mpto")
  [ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
     grep -q "^zinc: error: rank 0: step 2: all_gather 'loss' (call 2): timed out after 1 s waiting for rank 1 (ZINC_COMM_TIMEOUT)$" "$T/mpto"; then
    ok "Z-RDV-009 a stopped rank under mpirun: rank 0's wait ends at --comm-timeout"
  else bad "Z-RDV-009 mpi" "rc=$rc $(grep -m 2 error "$T/mpto")"; fi

  # spec: Z-LAUNCH-004 zinc launch with --backend mpi starts the ranks through mpirun
  next_port
  $TO "$ZINC" launch --nproc-per-node 4 -- zinc train --backend mpi $M >"$T/launch" 2>&1
  $TO "$ZINC" train $M --world-size 4 >"$T/sim" 2>&1
  same_digest launch "Z-LAUNCH-004 launch --backend mpi" grep -q "^\[rank0\]: zinc train: .*(4 processes, backend mpi)" "$T/launch"

  # spec: Z-GRP-004 hpZ and qwZ groups over MPI ranks (one node) give the simulator's digest
  cat >"$T/zppm.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": true, "initial_scale_power": 8},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2,
   "zero_quantized_weights": true}}
EOF
  $TO $MPIRUN -np 4 "$ZINC" train --backend mpi --config "$T/zppm.json" --model mlp:24,40,40,8 --steps 3 >"$T/mpi" 2>&1
  $TO "$ZINC" train --config "$T/zppm.json" --model mlp:24,40,40,8 --steps 3 --world-size 4 >"$T/sim" 2>&1
  same_digest mpi "Z-GRP-004 hpZ + qwZ mpi"
else
  bad "Z-PROC-003" "mpirun not found (ci/setup.sh installs openmpi-bin)"
fi

# spec: Z-PROC-002 Z-LAUNCH-001 zinc launch starts 4 tcp ranks (env
# rendezvous at MASTER_ADDR:MASTER_PORT); every stage gives the simulator's digest
# tcp_vs_sim N NAME ARGS...: zinc launch starts N tcp ranks of `zinc train
# ARGS` (env rendezvous at the next free port), the simulator runs ARGS on N
# ranks, and the two digests must agree (same_digest)
tcp_vs_sim() {
  _np=$1; _nm=$2; shift 2
  next_port
  $TO "$ZINC" launch --nproc-per-node "$_np" --master-port $PORT -- zinc train --backend tcp "$@" >"$T/tcp" 2>&1
  $TO "$ZINC" train "$@" --world-size "$_np" >"$T/sim" 2>&1
  same_digest tcp "$_nm"
}
for S in 0 1 2 3; do
  tcp_vs_sim 4 "Z-PROC-002 tcp env rendezvous stage $S" $M --stage $S --dtype bf16 --micro-batch 2 --grad-accum 2
done

# spec: Z-GPT-010 GPT-2 in tcp processes at stage 3 (per-module gathers)
# gives the simulator's digest
tcp_vs_sim 3 "Z-GPT-010 gpt2 tcp stage 3" --model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 8 --steps 3 \
  --stage 3 --micro-batch 2

# spec: Z-GRP-002 Z-GRP-004 ZeRO++ over two launcher nodes of 2 tcp ranks
# each (zinc launch --nnodes 2): hpZ, qwZ and qgZ give the simulator's
# digest with --ranks-per-node 2, and the ranks report inter-node bytes
next_port
cat >"$T/zpp.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2,
   "zero_quantized_weights": true, "zero_quantized_gradients": true}}
EOF
# two launcher nodes of 2 tcp ranks each (node 1 in the background), then
# the simulator on 2 nodes of 2: NAME0, NAME1 and sim in $T
two_nodes() {   # name, train args...
  name=$1; shift
  $TO "$ZINC" launch --nproc-per-node 2 --nnodes 2 --node-rank 1 --master-port $PORT -- zinc train --backend tcp "$@" \
    >"$T/${name}1" 2>&1 &
  zp=$!
  $TO "$ZINC" launch --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-port $PORT -- zinc train --backend tcp "$@" \
    >"$T/${name}0" 2>&1
  wait $zp
  $TO "$ZINC" train "$@" --world-size 4 --ranks-per-node 2 >"$T/sim" 2>&1
}
two_nodes zpp --config "$T/zpp.json" --model mlp:24,40,40,8 --steps 3 --comm-report
same_digest zpp0 "Z-GRP-004 ZeRO++ tcp over 2 launcher nodes" grep -q "comm run rank 0 inter-node: grad_reduce [1-9]" "$T/zpp0"

# spec: Z-NODE-008 --comm-report's bytes on the wire are the transport's:
# over two launcher nodes with reads by reference off, what each rank's
# sockets carried to the other node between a 1-step and a 3-step run
# (ZINC_TCP_STATS) is, to the byte, what its report counted on the wire
# plus the transport's 24-byte header a message
export ZINC_TCP_CMA=0 ZINC_TCP_STATS=1
for st in 1 3; do next_port; two_nodes "w$st" --config "$T/zpp.json" --model mlp:24,40,40,8 --steps $st --comm-report; done
unset ZINC_TCP_CMA ZINC_TCP_STATS
# wire_acct FILE...: "rank sockets-bytes report-bytes messages" for each rank
wire_acct() {
  sed -n 's/^\[rank\([0-9]*\)\]: tcp rank [0-9]*: to other nodes \([0-9]*\) B.*/\1 s \2/p
          s/^\[rank\([0-9]*\)\]: .* on the wire: .*(\([0-9]*\) B in \([0-9]*\) messages and.*/\1 r \2 \3/p' "$@" |
    awk '$2 == "s" { s[$1] = $3 } $2 == "r" { r[$1] = $3; m[$1] = $4 } END { for (k in s) print k, s[k], r[k], m[k] }' | sort -n
}
wire_acct "$T/w10" "$T/w11" >"$T/acct1"; wire_acct "$T/w30" "$T/w31" >"$T/acct3"
if join "$T/acct1" "$T/acct3" | awk 'NF == 7 && $3 > 0 && $5 - $2 == ($6 - $3) + 24 * ($7 - $4) { n++ } END { exit n != 4 }'; then
  ok "Z-NODE-008 each of 4 ranks' sockets carried its --comm-report wire bytes + 24 B a message, to the byte"
else bad "Z-NODE-008 wire accounting" "1 step: $(tr '\n' ';' <"$T/acct1") 3 steps: $(tr '\n' ';' <"$T/acct3")"; fi

# spec: Z-MICS-002 MiCS with the hierarchical gather over two launcher
# nodes of 2 tcp ranks (a shard group of 4 spans both) gives the
# simulator's digest
next_port
cat >"$T/mics.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "mics_shard_size": 4,
   "mics_hierarchical_params_gather": true}}
EOF
two_nodes mics --config "$T/mics.json" --model mlp:24,40,40,8 --steps 3
same_digest mics0 "Z-MICS-002 MiCS hierarchical tcp over 2 launcher nodes"

# spec: Z-OFF-001 offload in tcp processes (each its own swap directory
# under one nvme_path) gives the simulator's digest without offload
next_port
mkdir -p "$T/nv"
cat >"$T/off.json" <<EOF
{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "sub_group_size": 200000,
   "offload_optimizer": {"device": "nvme", "nvme_path": "$T/nv"},
   "offload_param": {"device": "nvme", "nvme_path": "$T/nv", "max_in_cpu": 0}}}
EOF
A="--model mlp:256,1024,512 --steps 2"
$TO "$ZINC" launch --nproc-per-node 2 --master-port $PORT -- zinc train --backend tcp $A --config "$T/off.json" >"$T/tcp" 2>&1
$TO "$ZINC" train $A --world-size 2 --stage 3 --dtype bf16 --micro-batch 2 >"$T/sim" 2>&1
# the ranks swapped, and left nothing in the swap folder
swapped_clean() { grep -q "nvme swap: " "$T/tcp" && [ -z "$(ls -A "$T/nv")" ]; }
same_digest tcp "Z-OFF-001 nvme offload tcp" swapped_clean

# spec: Z-RDV-005 file rendezvous: rank 0 publishes its address in the file
next_port
$TO "$ZINC" launch --nproc-per-node 4 --master-port $PORT -- zinc train --backend tcp --rendezvous "file:$T/rdv" $M >"$T/file" 2>&1
$TO "$ZINC" train $M --world-size 4 >"$T/sim" 2>&1
same_digest file "Z-RDV-005 file rendezvous" grep -q "^zinc-rendezvous v1 " "$T/rdv"

# spec: Z-LAUNCH-002 every rank's lines carry its prefix; Z-PROC-004 rank 0
# alone prints the run's lines
if grep -q "^\[rank0\]: zinc train: .*4 processes, backend tcp" "$T/file" && ! grep -qv "^\[rank[0-3]\]: " "$T/file" \
   && ! grep -q "^\[rank[1-3]\]: \(zinc train\|step=\|digest=\)" "$T/file"; then
  ok "Z-LAUNCH-002 line prefixes"
else bad "Z-LAUNCH-002" "$(head -n 3 "$T/file")"; fi

# spec: Z-LAUNCH-003 a rank killed mid-run: the launcher stops the rest and
# exits non-zero within seconds, naming the rank
next_port
( env $run_tag $TO "$ZINC" launch --nproc-per-node 4 --master-port $PORT -- zinc train --backend tcp --steps 100000000 \
    --steps-per-print 0 >"$T/kill" 2>&1; echo $? >"$T/kill.rc" ) &
sub=$!
victim=""
for i in $(seq 1 100); do
  for p in $(ours "master-port $PORT"); do
    for c in $(pgrep -P "$p" 2>/dev/null); do
      if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx RANK=2; then victim=$c; fi
    done
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
sleep 1
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait $sub
t1=$(date +%s)
rc=$(cat "$T/kill.rc" 2>/dev/null)
if [ -n "$victim" ] && [ "$rc" = 1 ] && [ $((t1 - t0)) -le 10 ] && grep -q "zinc launch: rank 2 failed (killed by signal 9" "$T/kill"; then
  ok "Z-LAUNCH-003 killed rank stops the run in $((t1 - t0)) s"
else bad "Z-LAUNCH-003" "victim '$victim' rc '$rc' after $((t1 - t0)) s: $(tail -n 2 "$T/kill")"; fi
[ -z "$(ours "master-port $PORT")" ] && ok "Z-LAUNCH-003 no rank outlives the launcher" \
  || bad "Z-LAUNCH-003-orphans" "$(show $(ours "master-port $PORT"))"

# spec: Z-LAUNCH-005 SIGTERM to the launcher reaches every rank
next_port
env $run_tag "$ZINC" launch --nproc-per-node 2 --master-port $PORT -- zinc train --backend tcp --steps 100000000 \
  --steps-per-print 0 >"$T/term" 2>&1 &
lp=$!
sleep 1.5
kill -TERM $lp
wait $lp
rc=$?
sleep 0.2
if [ "$rc" -ne 0 ] && [ -z "$(ours "master-port $PORT")" ] && grep -q "failed (killed by signal 15" "$T/term"; then
  ok "Z-LAUNCH-005 SIGTERM forwarded"
else bad "Z-LAUNCH-005" "rc=$rc $(tail -n 2 "$T/term")"; fi

# spec: Z-SEQ-002 divergent control flow over tcp is reported, not hung
next_port
cat >"$T/div.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0}}
EOF
$TO "$ZINC" launch --nproc-per-node 3 --master-port $PORT -- zinc train --backend tcp --config "$T/div.json" \
  --model mlp:6,8,5,4 --test-repeat-layer 1:0 --steps 2 >"$T/div" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "zinc launch: rank [0-2] failed (exit code 1): zinc: error: rank [0-2]: step 1: collective mismatch at call #[0-9]*: rank 0 all_gather fp32 n=42 'param_gather' vs rank 1 all_gather fp32 n=48 'param_gather'" "$T/div"; then
  ok "Z-SEQ-002 divergent control flow over tcp"
else bad "Z-SEQ-002 tcp" "rc=$rc $(tail -n 2 "$T/div")"; fi

# spec: Z-PROC-005 ranks with different configurations are refused before training
next_port
$TO "$ZINC" launch --nproc-per-node 2 --master-port $PORT -- sh -c "\"$ZINC\" train --backend tcp --steps \$((3 + RANK))" >"$T/cfgmm" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "rank 1 runs a different configuration than rank 0" "$T/cfgmm" && ! grep -q "step=" "$T/cfgmm"; then
  ok "Z-PROC-005 config mismatch refused"
else bad "Z-PROC-005" "rc=$rc $(tail -n 2 "$T/cfgmm")"; fi

# spec: Z-RDV-001 identity from Slurm's variables (two processes by hand);
# Z-RDV-003 the Slurm variables are used when no torchrun variable is set
next_port
for r in 0 1; do
  SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r MASTER_PORT=$PORT $TO "$ZINC" train --backend tcp $M >"$T/sl$r" 2>&1 &
done
wait
$TO "$ZINC" train $M --world-size 2 >"$T/sim" 2>&1
a=$(digest "$T/sim"); b=$(digest "$T/sl0")
if [ -n "$a" ] && [ "$a" = "$b" ] && [ ! -s "$T/sl1" ]; then ok "Z-RDV-001 Slurm environment"
else bad "Z-RDV-001 slurm" "sim '$a' slurm '$b': $(cat "$T/sl1")"; fi

# expect_fail ID STATUS SUBSTRING -- command...
expect_fail() {
  id=$1; want=$2; sub=$3; shift 4
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$id" "exit $rc, expected $want ($(cat "$T/err"))"; return; fi
  if ! grep -qF -- "$sub" "$T/err"; then bad "$id" "stderr '$(cat "$T/err")' lacks '$sub'"; return; fi
  ok "$id"
}
# spec: Z-RDV-002 malformed or contradictory launcher variables
expect_fail Z-RDV-002-range 2 "RANK=5 is outside 0..3" -- env RANK=5 WORLD_SIZE=4 "$ZINC" train --backend tcp
expect_fail Z-RDV-002-int 2 "WORLD_SIZE='four'" -- env RANK=0 WORLD_SIZE=four "$ZINC" train --backend tcp
expect_fail Z-RDV-002-half 2 "RANK is set but WORLD_SIZE is not" -- env RANK=0 "$ZINC" train --backend tcp
expect_fail Z-RDV-002-none 2 "no launcher environment" -- env -u RANK -u WORLD_SIZE "$ZINC" train --backend tcp
expect_fail Z-RDV-002-world 2 "--world-size 3, but the launcher started 1 ranks" -- env RANK=0 WORLD_SIZE=1 "$ZINC" train --backend tcp --world-size 3
# spec: Z-RDV-004 --rendezvous forms
expect_fail Z-RDV-004-form 2 "expected env, tcp://HOST:PORT or file:PATH" -- env RANK=0 WORLD_SIZE=1 "$ZINC" train --backend tcp --rendezvous udp://x
expect_fail Z-RDV-004-port 2 "PORT in 1..65535" -- env RANK=0 WORLD_SIZE=1 "$ZINC" train --backend tcp --rendezvous tcp://localhost:0
expect_fail Z-RDV-004-sim 2 "--rendezvous applies to --backend tcp" -- "$ZINC" train --rendezvous env
expect_fail Z-PROC-001-backend 2 "--backend: expected sim, cuda, tcp, mpi or nccl" -- "$ZINC" train --backend gloo
# spec: Z-RDV-006 a rank that never comes is reported at the deadline
next_port
expect_fail Z-RDV-006 1 "1 of 2 ranks joined within 1 s (missing: 1" -- env ZINC_RDV_TIMEOUT=1 RANK=0 WORLD_SIZE=2 MASTER_PORT=$PORT "$ZINC" train --backend tcp
# spec: Z-RDV-009 a frozen rank (SIGSTOP): the rank waiting on it ends at its
# --comm-timeout naming the collective (op, tag, call number), the step (none
# where the freeze lands in the engine's set-up, as it can under the
# sanitizers) and the rank it waited for; the launcher ends the rest; nobody hangs
next_port
env $run_tag $TO "$ZINC" launch --nproc-per-node 3 --master-port $PORT -- zinc train --backend tcp --world-size 3 --stage 3 \
  --steps 100000000 --steps-per-print 0 --comm-timeout 2 >"$T/frz" 2>&1 &
lp=$!
FRZ="zinc train --backend tcp --world-size 3 --stage 3 --steps 100000000"
# the 3 ranks, then rank 0's first line (printed once all have joined and
# agreed on the configuration, so the freeze comes in training, not in the
# rendezvous, however loaded the machine)
i=0
while [ $i -lt 300 ] && { [ "$(ours "$FRZ" 'RANK=[0-9]*' | wc -l)" -lt 3 ] || ! grep -q '^\[rank0\]: zinc train: ' "$T/frz"; }; do
  sleep 0.1; i=$((i + 1))
done
sleep 1
victim=$(ours "$FRZ" RANK=2)
kill -STOP "$victim" 2>/dev/null
t0=$(date +%s)
wait $lp
rc=$?
t1=$(date +%s)
kill -CONT "$victim" 2>/dev/null
if [ "$rc" = 1 ] && [ $((t1 - t0)) -le 20 ] &&
   grep -qE "^\[rank[0-9]\]: zinc: error: rank [0-9]: (step [0-9]+: )?[a-z_]+ '[a-z_]+' \(call [0-9]+\): timed out after 2 s waiting for rank [0-9] \(ZINC_COMM_TIMEOUT\)$" "$T/frz"; then
  ok "Z-RDV-009 a frozen rank ends the run in $((t1 - t0)) s, the collective named"
else bad Z-RDV-009 "exit $rc after $((t1 - t0)) s: $(tail -n 3 "$T/frz")"; fi
# spec: Z-RDV-009 the config's zinc.comm_timeout bounds the waits where
# neither --comm-timeout nor ZINC_COMM_TIMEOUT does; the variable beats it
# (rank 1 stops itself before its second loss gather: ZINC_COMM_PAUSE)
echo '{"train_micro_batch_size_per_gpu": 2, "zinc": {"comm_timeout": 2}}' >"$T/cto.json"
for env in "" ZINC_COMM_TIMEOUT=1; do
  next_port
  env $env ZINC_COMM_PAUSE=1:loss:2 $TO "$ZINC" launch --nproc-per-node 2 --master-port $PORT -- zinc train --backend tcp \
    --config "$T/cto.json" --steps 5 >"$T/cto" 2>&1
  s=2; [ -n "$env" ] && s=1
  if grep -q "^\[rank0\]: zinc: error: rank 0: step 2: all_gather 'loss' (call 2): timed out after $s s waiting for rank 1 (ZINC_COMM_TIMEOUT)$" "$T/cto"; then
    ok "Z-RDV-009 zinc.comm_timeout 2${env:+ under $env}: the wait ends after $s s"
  else bad "Z-RDV-009-config${env:+-env}" "$(grep -m 2 error "$T/cto")"; fi
done
expect_fail Z-RDV-009-config-range 2 "zinc.comm_timeout: expected a number >= 1, got 0.5" -- \
  sh -c "echo '{\"zinc\": {\"comm_timeout\": 0.5}}' >'$T/cto.json' && exec '$ZINC' train --config '$T/cto.json'"
# spec: Z-RDV-009 --comm-timeout takes seconds, at least 1
expect_fail Z-RDV-009-flag 2 "--comm-timeout" -- "$ZINC" train --comm-timeout 0.5

# spec: Z-SPEC-005 the conformance cases with each rank in its own process
# over tcp give the simulator's results bit for bit (losses, parameters,
# counters, memory): here one case per stage and of offload (host, NVMe),
# ZeRO++ (hpZ, qgZ on 2 nodes), MiCS (hierarchical), GA, fp16, bf16, a
# checkpoint, GPT-2, a dry run, canonical mode and an error in the ranks;
# make coverage runs them all (coverage/run.sh)
SUB="comm/Z-COMM-001-comm-volume-s0-w4 comm/Z-COMM-001-comm-volume-s1-w4 comm/Z-COMM-001-comm-volume-s2-w4
  comm/Z-COMM-001-comm-volume-s3-w4 memory/Z-MEM-010-memory-s3-w4 engine/Z-ENG-001-stages-bitwise-fp32-w4
  engine/Z-ENG-010-stages-ga2-pairs-w2-01 offload/Z-OFF-001-offload-ga2-fp16-s3-w3 offload/Z-OFF-001-offload-nvme-bf16-w2
  zeropp/Z-ZPP-002-hpz-bitwise-bf16-w4-ga2 zeropp/Z-ZPP-006-qgz-close-bf16-w4-n2 mics/Z-MICS-003-mics-bitwise-fp32-w4-s2
  mics/Z-MICS-002-mics-hierarchical-bf16-w8 precision/Z-PREC-004-scaler-some-overflow
  precision/Z-PREC-001-bf16-stages-bitwise-w4 checkpoint/Z-CKPT-001-resume-exact-bf16-s3-w4 gpt2/Z-GPT-011-loss-falls
  dryrun/Z-DRY-003-dry-equals-run-nvme-steps1 scaler/Z-SCALE-009-scaler-error-at-minimum
  canonical/Z-CANON-004-canonical-cost-bf16"
cases=""; n=0
for c in $SUB; do cases="$cases spec/cases/$c.json"; n=$((n + 1)); done
# shellcheck disable=SC2086 # the paths have no spaces
$TO "$ZINC" spec run --backend tcp $cases >"$T/stcp" 2>&1
rc=$?
if [ "$rc" = 0 ] && tail -n 1 "$T/stcp" | grep -qx "spec: $n passed, 0 failed, 0 skipped (tcp)"; then
  ok "Z-SPEC-005 $n conformance cases with ranks in processes give the simulator's results"
else bad Z-SPEC-005 "exit $rc: $(grep -v '^ok ' "$T/stcp" | tail -n 5)"; fi
# spec: Z-SPEC-005 a rank whose process dies fails its run at once, named
# with its signal; its peers are killed, not waited for
t0=$(date +%s)
ZINC_SPEC_KILL=1 $TO "$ZINC" spec run --backend tcp spec/cases/comm/Z-COMM-001-comm-volume-s3-w4.json >"$T/skill" 2>&1
rc=$?; t1=$(date +%s)
if [ "$rc" = 1 ] && [ $((t1 - t0)) -le 20 ] && grep -qx "FAIL comm-volume-s3-w4 \[spec/cases/comm/Z-COMM-001-comm-volume-s3-w4.json\]: run 0 failed: the simulator succeeded, ranks in processes failed: rank 1's process was killed by signal 9 (Killed) before it sent its result" "$T/skill" &&
   tail -n 1 "$T/skill" | grep -qx "spec: 0 passed, 1 failed, 0 skipped (tcp)"; then
  ok "Z-SPEC-005 a killed rank fails the case in $((t1 - t0)) s, named with its signal"
else bad Z-SPEC-005-kill "exit $rc after $((t1 - t0)) s: $(tail -n 2 "$T/skill")"; fi
# spec: Z-SPEC-005 a run that hangs (rank 1 frozen before its second loss
# gather: ZINC_COMM_PAUSE) is killed after ZINC_SPEC_TIMEOUT seconds, naming
# the ranks still running
t0=$(date +%s)
ZINC_SPEC_TIMEOUT=2 ZINC_COMM_PAUSE=1:loss:2 $TO "$ZINC" spec run --backend tcp \
  spec/cases/comm/Z-COMM-001-comm-volume-s3-w4.json >"$T/shang" 2>&1
rc=$?; t1=$(date +%s)
if [ "$rc" = 1 ] && [ $((t1 - t0)) -le 20 ] &&
   grep -q "ranks in processes failed: ranks 0, 1, 2, 3 did not finish within 2 s (ZINC_SPEC_TIMEOUT): the ranks were killed$" "$T/shang"; then
  ok "Z-SPEC-005 a hanging run is killed after ZINC_SPEC_TIMEOUT, its ranks named"
else bad Z-SPEC-005-timeout "exit $rc after $((t1 - t0)) s: $(tail -n 2 "$T/shang")"; fi
# spec: Z-SPEC-005 "tcp_skip": skipped with its reason under --backend tcp,
# run (here: refused, no batch size) without it, whose closing line is unchanged
echo '{"id": "skip-me", "world": 2, "steps": 1, "tcp_skip": "needs the simulator"}' >"$T/skip.json"
"$ZINC" spec run --backend tcp "$T/skip.json" >"$T/skip.tcp" 2>&1; rt=$?
"$ZINC" spec run "$T/skip.json" >"$T/skip.sim" 2>&1; rs=$?
if [ "$rt" = 0 ] && [ "$(cat "$T/skip.tcp")" = "skip skip-me: needs the simulator
spec: 0 passed, 0 failed, 1 skipped (tcp)" ] && [ "$rs" = 1 ] && tail -n 1 "$T/skip.sim" | grep -qx "spec: 0 passed, 1 failed"; then
  ok "Z-SPEC-005 tcp_skip: skipped with its reason over tcp, run on the simulator"
else bad Z-SPEC-005-skip "tcp exit $rt: $(cat "$T/skip.tcp"); sim exit $rs: $(tail -n 1 "$T/skip.sim")"; fi

# a case of 2 ranks, 2 steps, for the checks below
printf '{"id": "tiny", "model": "mlp:6,8,4", "steps": 2, "world": 2, "stage": 1, "config": {"train_micro_batch_size_per_gpu": 4}}\n' >"$T/tiny.json"
# spec: Z-SPEC-005 ZINC_SPEC_KILL empty or not a number kills no rank: the case passes
for v in "" 1x; do
  ZINC_SPEC_KILL=$v $TO "$ZINC" spec run --backend tcp "$T/tiny.json" >"$T/nokill" 2>&1; rc=$?
  if [ $rc = 0 ] && [ "$(cat "$T/nokill")" = "ok   tiny
spec: 1 passed, 0 failed, 0 skipped (tcp)" ]; then ok "Z-SPEC-005 ZINC_SPEC_KILL='$v' kills no rank"
  else bad "Z-SPEC-005-nokill '$v'" "exit $rc: $(cat "$T/nokill")"; fi
done
# spec: Z-SPEC-005 ranks that fail to join (a malformed ZINC_COMM_PAUSE,
# which the simulator does not read) fail the run on that side only, the
# error named with its rank
ZINC_COMM_PAUSE=bad $TO "$ZINC" spec run --backend tcp "$T/tiny.json" >"$T/join" 2>&1; rc=$?
if [ $rc = 1 ] && [ "$(cat "$T/join")" = "FAIL tiny [$T/tiny.json]: run 0 failed: the simulator succeeded, ranks in processes failed: rank 0: ZINC_COMM_PAUSE='bad' is not RANK:TAG:N (N counting from 1)
spec: 0 passed, 1 failed, 0 skipped (tcp)" ]; then ok "Z-SPEC-005 ranks that cannot join: rank 0's error"
else bad Z-SPEC-005-join "exit $rc: $(cat "$T/join")"; fi
# spec: Z-SPEC-005 a pipe that cannot be made (no file descriptor left) fails
# the run naming its rank and the reason; the ranks started are killed
( exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n 5
  $TO "$ZINC" spec run --backend tcp "$T/tiny.json" ) >"$T/pipe" 2>&1; rc=$?
if [ $rc = 1 ] && grep -qx "FAIL tiny \[$T/tiny.json\]: run 0 failed: the simulator succeeded, ranks in processes failed: pipe for rank [1-9]: Too many open files" "$T/pipe"; then
  ok "Z-SPEC-005 a pipe that cannot be made"
else bad Z-SPEC-005-pipe "exit $rc: $(cat "$T/pipe")"; fi
# spec: Z-SPEC-005 where both sides fail, the run's error is the lowest rank's
# that is not a lost peer: rank 1, whose optimizer file is gone, not rank 0,
# which loses it (and the simulator's the same)
$TO "$ZINC" train --model mlp:6,8,4 --steps 2 --world-size 2 --stage 1 --micro-batch 4 --checkpoint-dir "$T/ck" \
  --checkpoint-interval 2 >/dev/null 2>&1
rm -f "$T/ck/global_step2/zero_pp_rank_1_optim_states.safetensors"
printf '{"id": "lost1", "model": "mlp:6,8,4", "steps": 3, "world": 2, "stage": 1, "config": {"train_micro_batch_size_per_gpu": 4}, "resume": "%s", "expect": {"error": "rank 1: %s: open failed: No such file or directory", "exit": 1}}\n' \
  "$T/ck" "$T/ck/global_step2/zero_pp_rank_1_optim_states.safetensors" >"$T/lost1.json"
$TO "$ZINC" spec run --backend tcp "$T/lost1.json" >"$T/lost1" 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(cat "$T/lost1")" = "ok   lost1
spec: 1 passed, 0 failed, 0 skipped (tcp)" ]; then ok "Z-SPEC-005 both fail: the error of rank 1, not of its lost peer"
else bad Z-SPEC-005-both "exit $rc: $(cat "$T/lost1")"; fi

# spec: Z-LAUNCH-001 usage errors
expect_fail Z-LAUNCH-001-cmd 2 "give the command after '--'" -- "$ZINC" launch --nproc-per-node 2
expect_fail Z-LAUNCH-001-n 2 "--nproc-per-node: expected an integer" -- "$ZINC" launch --nproc-per-node 0 -- zinc train
expect_fail Z-LAUNCH-001-node 2 "--node-rank 2 outside 0..1" -- "$ZINC" launch --nnodes 2 --node-rank 2 -- zinc train
expect_fail Z-LAUNCH-001-exec 1 "cannot run 'no-such-program-zinc'" -- "$ZINC" launch --nproc-per-node 1 -- no-such-program-zinc
expect_fail Z-LAUNCH-001-max 2 "--nproc-per-node: expected an integer in 1..1024, got '1025'" -- "$ZINC" launch --nproc-per-node 1025 -- zinc train
# spec: Z-LAUNCH-001 -h and --help print the usage on stdout, exit 0, start nothing
for h in -h --help; do
  "$ZINC" launch $h -- no-such-program-zinc >"$T/lh" 2>&1; rc=$?
  if [ "$rc" = 0 ] && head -n 1 "$T/lh" | grep -q '^usage: zinc launch --nproc-per-node N' && ! grep -q 'cannot run' "$T/lh"; then
    ok "Z-LAUNCH-001 launch $h"
  else bad "Z-LAUNCH-001-help$h" "exit $rc: $(head -n 2 "$T/lh")"; fi
done

# spec: Z-LAUNCH-004 Z-LAUNCH-003 a stand-in mpirun first on PATH: the
# launcher calls it with -np N, --tag-output and its own binary for "zinc",
# maps the tagged lines to "[rankR]: ", mpirun's own to "[mpirun]: ", and
# names mpirun's failure with the first rank's error line
mkdir -p "$T/fakempi"
cat >"$T/fakempi/mpirun" <<'EOF_MPI'
#!/bin/sh
echo "[1,0]<stdout>:args $*"
echo "[1,1]<stderr>:zinc: error: rank 1: boom" >&2
echo "mpirun: process rank 1 exited" >&2
exit 3
EOF_MPI
chmod +x "$T/fakempi/mpirun"
PATH="$T/fakempi:$PATH" $TO "$ZINC" launch --nproc-per-node 2 -- zinc train --backend mpi >"$T/fm.out" 2>"$T/fm.err"; rc=$?
zself=$(readlink -f "$ZINC")
if [ "$rc" = 1 ] && grep -qF -- "[rank0]: args -np 2 " "$T/fm.out" && grep -qF -- "--oversubscribe --bind-to none --tag-output $zself train --backend mpi" "$T/fm.out" &&
   grep -qxF "[rank1]: zinc: error: rank 1: boom" "$T/fm.err" && grep -qxF "[mpirun]: mpirun: process rank 1 exited" "$T/fm.err" &&
   grep -qxF "zinc launch: mpirun failed (exit code 3); first error: zinc: error: rank 1: boom" "$T/fm.err"; then
  ok "Z-LAUNCH-004 mpirun's tags mapped, its failure named"
else bad Z-LAUNCH-004-fake "exit $rc: $(cat "$T/fm.out" "$T/fm.err" | tail -n 5)"; fi

finish proc
