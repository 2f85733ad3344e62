#!/bin/sh
# make test-nodes (spec Z-NODE-001..009): a small cluster on this machine.
# Each "node" is a network namespace; a switch namespace holds a bridge that
# joins them through veth pairs on private test addresses (10.231.0.0/24),
# and each node's link is shaped with tbf. Nothing leaves the machine: the
# namespaces have no route out, and every one of them, with its links, is
# removed at exit, also when a check fails or the script is killed.
#
# Checked: zinc launch (tcp) across 2 and 3 nodes prints the simulator's
# digest for the same world and ranks per node, for every stage, dtype and
# ZeRO++/MiCS/offload variant; ranks of different nodes talk over the link
# only (the veth counters carry at least the transport's own count of
# inter-node bytes); a frozen node and a link taken down mid-run end every
# surviving rank with the timeout's error line, within the timeout, and no
# rank hangs; the run then resumes from its last checkpoint to the
# uninterrupted digest. Needs root and network namespaces; without them it
# prints one line saying so and exits 0.
. tests/lib.sh
ZINC=$(readlink -f "${ZINC:-build/zinc}")
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "test-nodes: skipped: needs root, ip and tc (network namespaces)"; exit 0
fi
P=zn$$                       # the prefix of every name made here (namespaces and links)
if ! ip netns add "${P}sw" 2>/dev/null; then
  echo "test-nodes: skipped: cannot create a network namespace here"; exit 0
fi
RATE=${NODES_RATE:-200mbit}
cleanup() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
sw() { ip netns exec "${P}sw" "$@"; }
sw ip link add br0 type bridge
sw ip link set br0 up
sw ip link set lo up

# node I: namespace ${P}nI, eth0 at 10.231.0.(I+1), its egress shaped to RATE
add_node() {
  ip netns add "${P}n$1"
  ip link add "${P}e$1" type veth peer name "${P}s$1"
  ip link set "${P}e$1" netns "${P}n$1"
  ip link set "${P}s$1" netns "${P}sw"
  sw ip link set "${P}s$1" master br0
  sw ip link set "${P}s$1" up
  ip netns exec "${P}n$1" ip link set "${P}e$1" name eth0
  ip netns exec "${P}n$1" ip addr add "10.231.0.$(($1 + 1))/24" dev eth0
  ip netns exec "${P}n$1" ip link set eth0 up
  ip netns exec "${P}n$1" ip link set lo up
  ip netns exec "${P}n$1" tc qdisc add dev eth0 root tbf rate "$RATE" burst 256kb latency 100ms
}
for i in 0 1 2; do add_node $i; done
node() { n=$1; shift; ip netns exec "${P}n$n" "$@"; }
tx() { node "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
echo "test-nodes: 3 nodes (network namespaces ${P}n0..2) on a bridge, links shaped to $RATE by tbf"

PORT=29600
TO="timeout -k 5 300"
# run NODES PPN ARGS...: zinc launch on nodes 0..NODES-1 (node 0 holds the
# store), every node's output in $T/outI; returns the worst exit status
run() {
  nn=$1 ppn=$2; shift 2
  next_port
  i=$((nn - 1)); pids=""
  while [ $i -ge 0 ]; do
    node $i env ZINC_COMM_TIMEOUT="${NODES_TIMEOUT:-60}" ZINC_TCP_STATS=1 ${CMA:+ZINC_TCP_CMA=$CMA} $TO "$ZINC" launch --nproc-per-node "$ppn" --nnodes "$nn" \
      --node-rank $i --master-addr 10.231.0.1 --master-port $PORT -- "$ZINC" train --backend tcp "$@" >"$T/out$i" 2>&1 &
    pids="$pids $!"
    i=$((i - 1))
  done
  worst=0
  for p in $pids; do wait "$p" || worst=$?; done
  return $worst
}
# zinc launch prefixes each rank's lines with "[rankR]: "
digest() { sed -n 's/^\[rank[0-9]*\]: \(digest=.*\)/\1/p' "$1" | head -n 1; }

cfg() {   # a config file: stage $1, then extra zero_optimization keys $2, then extra top-level keys $3
  f="$T/c$(echo "$1$2$3" | cksum | cut -d' ' -f1).json"
  printf '{"train_batch_size": 48, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": %s%s}%s}\n' \
    "$1" "$2" "$3" >"$f"
  echo "$f"
}
wait_exit() {   # wait_exit PID BOUND: seconds until PID exited (BOUND + 1: it did not)
  k=0
  # (a child not yet reaped is a zombie: exited)
  while [ -n "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ] && [ $k -le $(($2 * 10)) ]; do
    sleep 0.1; k=$((k + 1))
  done
  echo $((k / 10))
}
# a model whose messages pass 64 KiB (reads by reference, Z-PROC-008)
W2="--model gpt2:n_layer=2,n_embd=128,n_head=2,vocab_size=256,n_positions=32 --data text:tests/data/gpl-3.txt --seq-len 32 --steps 2 --steps-per-print 0"
# NODES_PARTS picks parts (digests, mpi, wire, zeropp, plan, faults, drills; default all)
part() { case " ${NODES_PARTS:-digests mpi wire zeropp plan faults drills} " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- digests across nodes (Z-NODE-001) -------------------------------------
if part digests; then
M="--model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32 --steps 4 --steps-per-print 0"
check_digest() {   # NAME NODES PPN CONFIG
  name=$1 nn=$2 ppn=$3 c=$4
  want=$("$ZINC" train $M --config "$c" --world-size $((nn * ppn)) --ranks-per-node "$ppn" 2>&1 | grep '^digest=')
  run "$nn" "$ppn" $M --config "$c"
  got=$(digest "$T/out0")
  # spec: Z-NODE-001 across nodes, the simulator's digest
  if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "Z-NODE-001 $name on $nn nodes x $ppn: $got"
  else bad "Z-NODE-001-$name" "$nn nodes x $ppn: $got, simulator $want; $(tail -n 3 "$T/out0" | tr '\n' ' ')"; fi
}
check_digest stage0 2 2 "$(cfg 0)"
check_digest stage1 2 2 "$(cfg 1)"
check_digest stage2-bf16 2 2 "$(cfg 2 '' ', "bf16": {"enabled": true}')"
check_digest stage3 2 2 "$(cfg 3 ', "stage3_param_persistence_threshold": 0')"
check_digest stage3-fp16 3 2 "$(cfg 3 ', "stage3_param_persistence_threshold": 0' ', "fp16": {"enabled": true}')"
check_digest hpz-qwz-qgz 2 2 "$(cfg 3 ', "stage3_param_persistence_threshold": 0, "zero_hpz_partition_size": 2, "zero_quantized_weights": true, "zero_quantized_gradients": true')"
check_digest mics 2 2 "$(cfg 3 ', "mics_shard_size": 2')"
check_digest mics-hier 2 2 "$(cfg 3 ', "mics_shard_size": 4, "mics_hierarchical_params_gather": true')"
check_digest offload 2 2 "$(cfg 3 ', "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}')"
check_digest stage2-3nodes 3 1 "$(cfg 2)"
fi

# ---- mpirun across the nodes (Z-NODE-005) ------------------------------------
# OpenMPI starts its daemon on a remote node through an "rsh agent" (ssh by
# default); here the agent runs it inside the node's namespace, with its own
# hostname (a UTS namespace) so that OpenMPI sees two hosts and joins them
# over TCP on eth0, not through shared memory.
if part mpi; then
  if command -v mpirun >/dev/null && command -v unshare >/dev/null; then
    cat >"$T/agent" <<AGENT
#!/bin/sh
host=\$1; shift
i=\$(( \${host##*.} - 1 ))
exec ip netns exec ${P}n\$i unshare --uts sh -c "hostname ${P}node\$i; exec \$*"
AGENT
    chmod +x "$T/agent"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for st in 2 3; do
      c=$(cfg $st ', "stage3_param_persistence_threshold": 0')
      want=$("$ZINC" train $M --config "$c" --world-size 4 --ranks-per-node 2 2>&1 | grep '^digest=')
      a0=$(tx 0)
      node 0 unshare --uts sh -c "hostname ${P}node0; $TO mpirun --mca plm_rsh_agent $T/agent \
        --host 10.231.0.1:2,10.231.0.2:2 -np 4 --mca btl tcp,self,vader --mca btl_tcp_if_include eth0 \
        --mca oob_tcp_if_include eth0 $ZINC train --backend mpi $M --config $c" >"$T/mpi" 2>&1
      a1=$(tx 0)
      got=$(grep '^digest=' "$T/mpi")
      # spec: Z-NODE-005 mpirun's daemons start inside the nodes' namespaces
      if [ -n "$want" ] && [ "$got" = "$want" ] && [ $((a1 - a0)) -gt 100000 ]; then
        ok "Z-NODE-005 mpirun across 2 nodes x 2, stage $st: $got, $((a1 - a0)) B on node 0's link"
      else bad "Z-NODE-005-stage$st" "mpirun: $got, simulator $want, $((a1 - a0)) B on the link: $(tail -n 3 "$T/mpi" | tr '\n' ' ')"; fi
    done
    # a frozen node under mpirun: the ranks left time out (ZINC_COMM_TIMEOUT,
    # passed on with -x) and name the rank they waited for; mpirun ends the job
    ck="$T/ck_mpi"
    node 0 unshare --uts sh -c "hostname ${P}node0; exec timeout -k 5 120 mpirun --mca plm_rsh_agent $T/agent \
      --host 10.231.0.1:2,10.231.0.2:2 -np 4 --mca btl tcp,self,vader --mca btl_tcp_if_include eth0 \
      --mca oob_tcp_if_include eth0 -x ZINC_COMM_TIMEOUT=3 $ZINC train --backend mpi \
      --model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32 --steps 100000 --steps-per-print 0 \
      --config $(cfg 2) --checkpoint-dir $ck --checkpoint-interval 20" >"$T/mpif" 2>&1 &
    mpid=$!
    k=0
    while [ ! -f "$ck/latest" ] && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
    ip netns pids "${P}n1" | xargs -r kill -STOP
    # node 0's ranks must be gone (mpirun itself then waits on the frozen
    # node's OpenMPI daemon: that wait is OpenMPI's, and ends with the kill)
    k=0
    while [ -n "$(ip netns pids "${P}n0" | xargs -r ps -o args= -p 2>/dev/null | grep '^[^ ]*zinc train')" ] &&
      [ $k -le 300 ]; do sleep 0.1; k=$((k + 1)); done
    secs=$((k / 10))
    ip netns pids "${P}n1" | xargs -r kill -9
    kill -9 $mpid 2>/dev/null
    wait $mpid 2>/dev/null
    # spec: Z-NODE-003 mpi's waits are bounded too
    if [ "$secs" -le 15 ] && grep -q "timed out after 3 s waiting for rank [23] (ZINC_COMM_TIMEOUT)" "$T/mpif"; then
      ok "Z-NODE-003 mpi, frozen node: node 0's ranks exited ${secs} s after the freeze, naming the rank they waited for"
    else bad Z-NODE-003-mpi "after ${secs} s: $(grep -h -m 2 error "$T/mpif")"; fi
  else echo "test-nodes: mpi part skipped: no mpirun or unshare"; fi
fi

# ---- the link carries the inter-node bytes (Z-NODE-002) ---------------------
if part wire; then
# every tcp rank prints what it handed its sockets for ranks of other nodes
# (ZINC_TCP_STATS); node 0's eth0 must have carried at least that, and not
# more than that with TCP/IP's headers (66 B a segment of up to 1448), the
# acknowledgements of what it received and the rendezvous (64 KiB)
# (a model whose messages pass 64 KiB, the size from which ranks of one
# node read each other's memory)
c=$(cfg 3 ', "stage3_param_persistence_threshold": 0')
a0=$(tx 0)
run 2 2 $W2 --config "$c"
a1=$(tx 0)
sent=$(sed -n 's/^\[rank[0-9]*\]: tcp rank [0-9]*: to other nodes \([0-9]*\) B.*/\1/p' "$T/out0" | awk '{s += $1} END {print s + 0}')
wire=$((a1 - a0))
echo "test-nodes: node 0's link carried $wire B; its ranks' sockets took $sent B for node 1"
# spec: Z-NODE-002 the inter-node bytes travel on the link
if [ "$sent" -gt 0 ] && [ "$wire" -ge "$sent" ] && [ "$wire" -le $((sent * 115 / 100 + 65536)) ]; then
  ok "Z-NODE-002 the link carried the transport's inter-node bytes ($wire B for $sent B)"
else bad Z-NODE-002 "the link carried $wire B, the transport counted $sent B to other nodes"; fi

# the same run with every byte through the sockets (ZINC_TCP_CMA=0) puts as
# many bytes on the link: reads by reference never cross nodes
a0=$(tx 0)
CMA=0 run 2 2 $W2 --config "$c"
a1=$(tx 0)
nocma=$((a1 - a0))
echo "test-nodes: with ZINC_TCP_CMA=0 node 0's link carried $nocma B"
# spec: Z-NODE-002 process_vm_readv stays inside a node
if [ $((wire * 100)) -ge $((nocma * 97)) ] && [ $((wire * 100)) -le $((nocma * 103)) ]; then
  ok "Z-NODE-002 reads by reference stay inside a node ($wire B on the link, $nocma B without them)"
else bad Z-NODE-002-cma "the link carried $wire B, and $nocma B with ZINC_TCP_CMA=0"; fi
fi

# ---- ZeRO's 3M and ZeRO++'s 0.75M on the wire (Z-NODE-006) -------------------
# bf16, GA 1, every parameter gathered (persistence 0), 2 nodes x 2: per
# step node 0's link carries, in M = the 16-bit model's bytes, about 3M for
# stage 3 (forward gather, backward gather, gradient reduce-scatter, each
# M from a node to the other in the transport's all-to-all exchange) and
# about 0.75M with hpZ + qwZ + qgZ (the backward gather inside the node,
# the forward gather in int8, the gradients in int4). Per step: the
# difference between a 6-step and a 2-step run, over 4.
# the link slowed for these two parts (SLOW_RATE), where ZeRO++ is for
shape() { for i in 0 1 2; do node $i tc qdisc change dev eth0 root tbf rate "$1" burst 256kb latency 100ms; done; }
SLOW=${NODES_SLOW_RATE:-50mbit}
part zeropp || part plan && shape "$SLOW"
if part zeropp; then
  G="--model gpt2:n_layer=2,n_embd=128,n_head=2,vocab_size=256,n_positions=32 --data text:tests/data/gpl-3.txt --seq-len 32 --steps-per-print 0"
  M16=$((2 * $("$ZINC" plan $G --world-size 4 --steps 0 2>/dev/null | sed -n 's/.* \([0-9,]*\) parameters.*/\1/p' | head -n 1 | tr -d ,)))
  # wire_sum: what node 0's ranks' --comm-report says they sent to other
  # nodes in the whole run, on the wire, and in the ring's model
  wire_sum() { sed -n 's/.* on the wire: to other nodes [0-9]* B\/step in [0-9]* messages, .*(\([0-9]*\) B in \([0-9]*\) messages and .*/\1 \2/p' "$T/out0" | awk '{ s += $1; m += $2 } END { print s + 0, m + 0 }'; }
  ring_sum() { sed -n 's/.* comm run rank [0-9]* inter-node: grad_reduce \([0-9]*\) B\/step, param_gather \([0-9]*\) B\/step.*/\1 \2/p' "$T/out0" | awk '{ s += $1 + $2 } END { print s + 0 }'; }
  per_step() {   # per_step CONFIG: a step's bytes on node 0's link, seconds, --comm-report's wire bytes and messages, the ring's bytes
    c_=$1
    b0=$(tx 0); t0=$(date +%s.%N); run 2 2 $G --config "$c_" --steps 2 --comm-report; t1=$(date +%s.%N); b1=$(tx 0)
    set -- $(wire_sum); w2=$1 m2=$2
    run 2 2 $G --config "$c_" --steps 6 --comm-report; t2=$(date +%s.%N); b2=$(tx 0)
    set -- $(wire_sum)
    echo "$(( (b2 - b1 - (b1 - b0)) / 4 )) $(echo "$t0 $t1 $t2" | awk '{printf "%.4f", (($3 - $2) - ($2 - $1)) / 4}') $(( ($1 - w2) / 4 )) $(( ($2 - m2) / 4 )) $(ring_sum)"
  }
  base='"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}'
  plain="$T/plain.json"; zpp="$T/zpp.json"
  echo "{$base, \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0, \"stage3_max_reuse_distance\": 0}}" >"$plain"
  echo "{$base, \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0, \"stage3_max_reuse_distance\": 0, \"zero_hpz_partition_size\": 2, \"zero_quantized_weights\": true, \"zero_quantized_gradients\": true}}" >"$zpp"
  set -- $(per_step "$plain"); pb=$1 pt=$2 pw=$3 pm=$4 pr=$5
  set -- $(per_step "$zpp"); zb=$1 zt=$2 zw=$3 zm=$4 zr=$5
  # the link against --comm-report's bytes on the wire: each message to a
  # rank of the other node adds the transport's 24-byte header and one
  # Ethernet + IPv4 + TCP header with timestamps (14 + 20 + 32 = 66 B: veth
  # hands whole sends to the counter, the exchange's symmetry carries the
  # ACKs on data); held within 5 %. The ring's model, which NCCL's rings
  # follow, printed beside.
  for v in "stage 3:$pb:$pw:$pm:$pr" "hpZ + qwZ + qgZ:$zb:$zw:$zm:$zr"; do
    IFS=: read -r name lb rw rm rr <<EOT
$v
EOT
    est=$((rw + 90 * rm))
    r=$(echo "$lb $est" | awk '{printf "%.3f", $2 ? $1 / $2 : 0}')
    echo "test-nodes: $name a step: node 0's link $lb B; --comm-report on the wire $rw B in $rm messages, + 90 B a message = $est B (link/that $r); the ring's model $rr B"
    # spec: Z-NODE-008 the link carries --comm-report's bytes on the wire
    if [ "$rw" -gt 0 ] && awk -v r="$r" 'BEGIN { exit !(r >= 0.95 && r <= 1.05) }'; then
      ok "Z-NODE-008 $name: the link carries --comm-report's bytes to other nodes and 90 B a message, within 5 % ($r)"
    else bad "Z-NODE-008-$name" "the link carried $lb B a step, --comm-report says $rw B in $rm messages ($r)"; fi
  done
  echo "test-nodes: M = $M16 B; a step on node 0's link ($SLOW): stage 3 $pb B = $(echo "$pb $M16" | awk '{printf "%.2f", $1 / $2}')M in $pt s, hpZ + qwZ + qgZ $zb B = $(echo "$zb $M16" | awk '{printf "%.2f", $1 / $2}')M in $zt s, speed-up $(echo "$pt $zt" | awk '{printf "%.2f", $1 / $2}')x"
  # spec: Z-NODE-006 3M and 0.75M a step on the wire
  if [ "$M16" -gt 0 ] && [ $((pb * 100)) -ge $((M16 * 290)) ] && [ $((pb * 100)) -le $((M16 * 340)) ]; then
    ok "Z-NODE-006 stage 3 puts 3M a step on the link ($pb B, M = $M16 B)"
  else bad Z-NODE-006-plain "stage 3: $pb B a step on the link, M = $M16 B"; fi
  if [ "$M16" -gt 0 ] && [ $((zb * 100)) -ge $((M16 * 60)) ] && [ $((zb * 100)) -le $((M16 * 95)) ]; then
    ok "Z-NODE-006 hpZ + qwZ + qgZ put 0.75M a step on the link ($zb B)"
  else bad Z-NODE-006-zeropp "hpZ + qwZ + qgZ: $zb B a step on the link, M = $M16 B"; fi
fi

# ---- the planner against a measured run (Z-NODE-007) ------------------------
# zinc calibrate across the nodes (tcp) measures both links into a machine
# file; zinc plan with it predicts the step of plain stage 3 and of hpZ +
# qwZ + qgZ on the slow link; each is held to the median time_ms of steps
# 3..12 of the same run across the nodes: within 30 % (the aim is 20 %;
# the margin is this shared 2-core machine's noise)
if part plan; then
  cal="$T/cal.json"
  next_port
  for i in 1 0; do
    node $i $TO "$ZINC" launch --nproc-per-node 2 --nnodes 2 --node-rank $i --master-addr 10.231.0.1 \
      --master-port $PORT -- "$ZINC" calibrate --backend tcp -o "$cal" >"$T/cal$i" 2>&1 &
  done
  wait
  sed -n 's/^\[rank0\]: //p' "$T/cal0" | grep "^zinc calibrate"
  G8="--model gpt2:n_layer=2,n_embd=128,n_head=2,vocab_size=256,n_positions=32 --data text:tests/data/gpl-3.txt --seq-len 32"
  for v in plain zpp; do
    c="$T/$v.json"
    [ -f "$c" ] || { echo "test-nodes: plan part needs the zeropp part's configs"; break; }
    pred=$("$ZINC" plan $G8 --config "$c" --world-size 4 --machine "$cal" --json 2>/dev/null |
      python3 -c 'import json, sys; print("%.1f" % (json.load(sys.stdin)["time"]["step_s"] * 1000))')
    run 2 2 $G8 --config "$c" --steps 12 --steps-per-print 1
    meas=$(sed -n 's/^\[rank0\]: step=\([0-9]*\) .*time_ms=\([0-9.]*\).*/\1 \2/p' "$T/out0" |
      awk '$1 >= 3 && $1 <= 12 { print $2 }' | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", (v[5] + v[6]) / 2 }')
    r=$(echo "$pred $meas" | awk '{ printf "%.2f", $1 / $2 }')
    echo "test-nodes: plan $v: predicted $pred ms a step, measured $meas ms, predicted/measured $r"
    eval "pred_$v=$pred meas_$v=$meas"
    # spec: Z-NODE-007 the plan's step within 30 % of the measured one
    if awk -v r="$r" 'BEGIN { exit !(r >= 0.7 && r <= 1.3) }'; then ok "Z-NODE-007 plan $v within 30 % ($r)"
    else bad "Z-NODE-007-$v" "predicted $pred ms, measured $meas ms ($r)"; fi
  done
  echo "test-nodes: ZeRO++ over plain stage 3 on the $SLOW link: measured $(echo "$meas_plain $meas_zpp" | awk '{printf "%.2f", $1 / $2}')x, predicted $(echo "$pred_plain $pred_zpp" | awk '{printf "%.2f", $1 / $2}')x"
fi

shape "$RATE"

# ---- faults: a frozen node, a link taken down, a node killed (Z-NODE-003, Z-NODE-004)
# A 2-node run checkpointing every 20 steps; once its first checkpoint is
# in, the fault. Every rank that can still speak must exit non-zero within
# the timeout (3 s here) with the line naming the collective and the rank
# and node it waited for; `latest` must name a complete checkpoint; with the
# fault gone, --resume must reach the uninterrupted run's digest.
FM="--model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32 --steps 300 --steps-per-print 0"
fc=$(cfg 2)
fwant=$("$ZINC" train $FM --config "$fc" --world-size 4 --ranks-per-node 2 2>&1 | grep '^digest=')
start_bg() {   # start_bg CKDIR: the run, each node's launcher pid in $T/pidI
  next_port
  for i in 1 0; do
    node $i env ZINC_COMM_TIMEOUT=3 "$ZINC" launch --nproc-per-node 2 --nnodes 2 --node-rank $i \
      --master-addr 10.231.0.1 --master-port $PORT -- "$ZINC" train --backend tcp $FM --config "$fc" \
      --checkpoint-dir "$1" --checkpoint-interval 20 >"$T/out$i" 2>&1 &
    echo $! >"$T/pid$i"
  done
}
fault() {   # fault NAME ACTION UNDO SURVIVORS
  name=$1 act=$2 undo=$3 survivors=$4 ck="$T/ck_$1"
  start_bg "$ck"
  k=0
  while [ ! -f "$ck/latest" ] && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
  eval "$act"
  secs=0
  for i in $survivors; do
    s=$(wait_exit "$(cat "$T/pid$i")" 20)
    [ "$s" -gt "$secs" ] && secs=$s
    [ -n "${NODES_DEBUG:-}" ] && { echo "node $i exited after $s s"; ip netns pids "${P}n$i" | xargs -r ps -o pid,stat,wchan:20,args -p; }
  done
  # (the timeout lines of every survivor's ranks)
  # (one line a node: its launcher stops the node's other ranks when one fails)
  lines=$(cat $(for i in $survivors; do echo "$T/out$i"; done) | grep -c "^zinc launch: rank [0-9]* failed (exit code 1): .*${WANT:-timed out after 3 s waiting for rank [0-9]* on node [0-9] (ZINC_COMM_TIMEOUT)}")
  eval "$undo"
  for i in 0 1; do kill -9 "$(cat "$T/pid$i")" 2>/dev/null; done
  for ns in "${P}n0" "${P}n1"; do ip netns pids "$ns" | xargs -r kill -9 2>/dev/null; done
  wait 2>/dev/null
  nnodes=$(echo $survivors | wc -w)
  # spec: Z-NODE-003 no rank hangs: every surviving rank names what it waited for
  if [ "$secs" -le 10 ] && [ "$lines" -eq "$nnodes" ]; then
    ok "Z-NODE-003 $name: every rank left exited within ${secs} s; each node's launcher names the collective, the rank and node waited for"
  else bad "Z-NODE-003-$name" "after ${secs} s, $lines of $nnodes nodes' timeout lines: $(grep -h error "$T/out0" | head -n 2)"; fi
  # spec: Z-NODE-004 no checkpoint half-written, and the run resumes exactly
  if "$ZINC" ckpt inspect "$ck/$(cat "$ck/latest")" >"$T/insp" 2>&1; then ok "Z-NODE-004 $name: latest names a complete checkpoint"
  else bad "Z-NODE-004-$name-ckpt" "$(tail -n 2 "$T/insp")"; fi
  NODES_TIMEOUT=30 run 2 2 $FM --config "$fc" --checkpoint-dir "$ck" --checkpoint-interval 20 --resume
  got=$(digest "$T/out0")
  if [ -n "$got" ] && [ "$got" = "$fwant" ]; then ok "Z-NODE-004 $name: --resume reaches the uninterrupted digest ($got)"
  else bad "Z-NODE-004-$name-resume" "$got, uninterrupted $fwant: $(tail -n 2 "$T/out0")"; fi
}
if part faults; then
# a link too slow for the timeout (32 kbit, a 3 s bound, messages of hundreds
# of KB): the same clean error, never a wait without end
for i in 0 1 2; do node $i tc qdisc change dev eth0 root tbf rate 32kbit burst 16kb latency 100ms; done
next_port
for i in 1 0; do
  node $i env ZINC_COMM_TIMEOUT=3 "$ZINC" launch --nproc-per-node 2 --nnodes 2 --node-rank $i \
    --master-addr 10.231.0.1 --master-port $PORT -- "$ZINC" train --backend tcp $W2 --config "$(cfg 3)" >"$T/out$i" 2>&1 &
  echo $! >"$T/pid$i"
done
s0=$(wait_exit "$(cat "$T/pid0")" 40); s1=$(wait_exit "$(cat "$T/pid1")" 40)
for i in 0 1; do kill -9 "$(cat "$T/pid$i")" 2>/dev/null; done
for ns in "${P}n0" "${P}n1"; do ip netns pids "$ns" | xargs -r kill -9 2>/dev/null; done
wait 2>/dev/null
shape "$RATE"
# spec: Z-NODE-003 a link too slow for the timeout ends in the error
if [ "$s0" -le 30 ] && [ "$s1" -le 30 ] && grep -q "timed out after 3 s \(waiting for\|sending to\) rank [0-9]* on node [01] (ZINC_COMM_TIMEOUT)" "$T/out0" "$T/out1"; then
  ok "Z-NODE-003 slow link: both nodes ended in ${s0} and ${s1} s with the timeout's line"
else bad Z-NODE-003-slow "after $s0 and $s1 s: $(grep -h -m 2 error "$T/out0" "$T/out1")"; fi
fault frozen-node 'ip netns pids ${P}n1 | xargs -r kill -STOP' 'ip netns pids ${P}n1 | xargs -r kill -CONT' "0"
fault link-down 'node 1 ip link set eth0 down' 'node 1 ip link set eth0 up' "0 1"
# a node killed whole: its sockets close, so the others know at once
WANT="connections\{0,1\} to rank [0-9]*.* lost" fault node-killed 'ip netns pids ${P}n1 | xargs -r kill -9' ':' "0"
fi

# ---- a fault at every phase of the step (Z-NODE-009) -----------------------
# Rank 2 (node 1) stops itself as it enters a chosen collective
# (ZINC_COMM_PAUSE, found in the simulator's trace of the same run by
# tests/drill_call.py): the forward's parameter gather and the backward's
# gradient reduce-scatter of step 8, the optimizer step's norm, the
# checkpoint save after step 10. There: the rank stays frozen; or its whole
# node is frozen; or node 1's link goes down and the rank goes on. Every
# rank that can still speak ends within 10 s naming that very collective
# (op, tag, call number) and step; `latest` names step 5's complete save and
# no later one is left; with the fault undone, --resume reaches the digest
# of the run without it.
if part drills; then
  DM="--model gpt2-tiny --data text:tests/data/gpl-3.txt --seq-len 32 --steps 12 --steps-per-print 0"
  dc=$(cfg 3 ', "stage3_param_persistence_threshold": 0')
  dwant=$("$ZINC" train $DM --config "$dc" --world-size 4 --ranks-per-node 2 --checkpoint-dir "$T/dsim" \
    --checkpoint-interval 5 --trace "$T/drill.json" 2>&1 | grep '^digest=')
  drill() {   # drill FAULT PHASE
    fault=$1 phase=$2 step=8
    [ "$phase" = checkpoint ] && step=10
    set -- $(python3 tests/drill_call.py "$T/drill.json" 2 "$phase" $step)
    dtag=$1 dcall=$2 ck="$T/dk_${fault}_$phase"
    next_port
    for i in 1 0; do
      node $i env ZINC_COMM_TIMEOUT=3 ZINC_COMM_PAUSE="2:$dtag:$dcall" "$ZINC" launch --nproc-per-node 2 --nnodes 2 \
        --node-rank $i --master-addr 10.231.0.1 --master-port $PORT -- "$ZINC" train --backend tcp $DM \
        --config "$dc" --checkpoint-dir "$ck" --checkpoint-interval 5 >"$T/out$i" 2>&1 &
      echo $! >"$T/pid$i"
    done
    k=0
    while ! grep -q "stopping before .* '$dtag' (call $dcall)" "$T/out1" && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
    pid=$(sed -n 's/.*stopping before .*, pid \([0-9]*\) (ZINC_COMM_PAUSE)/\1/p' "$T/out1")
    case $fault in
      frozen-rank) survivors="0 1" ;;
      frozen-node) survivors="0"; ip netns pids "${P}n1" | xargs -r kill -STOP ;;
      link-down) survivors="0 1"; node 1 ip link set eth0 down; kill -CONT "$pid" ;;
    esac
    secs=0
    for i in $survivors; do
      s=$(wait_exit "$(cat "$T/pid$i")" 20)
      [ "$s" -gt "$secs" ] && secs=$s
    done
    lines=$(cat $(for i in $survivors; do echo "$T/out$i"; done) |
      grep -c "^zinc launch: rank [0-9]* failed (exit code 1): .*step $step: \\(saving global_step$step: \\)\\{0,1\\}[a-z_]* '$dtag' (call $dcall): timed out after 3 s \(waiting for\|sending to\) rank [0-9]*")
    node 1 ip link set eth0 up
    ip netns pids "${P}n1" | xargs -r kill -CONT
    for i in 0 1; do kill -9 "$(cat "$T/pid$i")" 2>/dev/null; done
    for ns in "${P}n0" "${P}n1"; do ip netns pids "$ns" | xargs -r kill -9 2>/dev/null; done
    wait 2>/dev/null
    nn=$(echo $survivors | wc -w)
    # spec: Z-NODE-009 a fault at a chosen phase: every rank left names that collective
    if [ -n "$pid" ] && [ "$secs" -le 10 ] && [ "$lines" -eq "$nn" ]; then
      ok "Z-NODE-009 $fault at $phase ('$dtag' call $dcall, step $step): every rank left exited within ${secs} s naming it"
    else bad "Z-NODE-009-$fault-$phase" "pid '$pid', after ${secs} s $lines of $nn nodes' lines: $(grep -h -m 2 "error\|ZINC_COMM_PAUSE" "$T/out0" "$T/out1" | tr '\n' ' ')"; fi
    # spec: Z-NODE-009 step 5's save is the latest and verifies; step 10's, cut short, has no manifest
    if [ "$(cat "$ck/latest" 2>/dev/null)" = global_step5 ] && [ ! -e "$ck/global_step10/manifest.json" ] &&
       "$ZINC" ckpt inspect "$ck/global_step5" >"$T/insp" 2>&1; then :
    else bad "Z-NODE-009-$fault-$phase-ckpt" "latest '$(cat "$ck/latest" 2>/dev/null)': $(ls "$ck" "$ck/global_step10" 2>&1 | tr '\n' ' ')$(tail -n 1 "$T/insp")"; fi
    NODES_TIMEOUT=30 run 2 2 $DM --config "$dc" --checkpoint-dir "$ck" --checkpoint-interval 5 --resume
    got=$(digest "$T/out0")
    if [ -n "$got" ] && [ "$got" = "$dwant" ]; then ok "Z-NODE-009 $fault at $phase: step 5's save complete, --resume reaches $got"
    else bad "Z-NODE-009-$fault-$phase-resume" "$got, without the fault $dwant: $(tail -n 2 "$T/out0")"; fi
  }
  for f in frozen-rank frozen-node link-down; do
    for ph in forward-gather backward-reduce step checkpoint; do drill $f $ph; done
  done
fi

finish nodes
