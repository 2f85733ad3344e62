#!/bin/sh
# The capacity-planning picture of the README: GPT-3 175B (GPT-2's
# architecture at n_layer 96, n_embd 12288, 96 heads, 2048 positions) on
# 4096 ranks, 512 DGX H100 nodes, stage 3, bf16, activation checkpointing,
# micro-batch 1: the device's memory per phase by category and the step's
# timeline, from one dry run (zinc plan; about a second on a laptop).
# Usage: sh ci/demo/plan_demo.sh [OUT.svg]   (zinc built at build/zinc)
set -e
Z=${ZINC:-build/zinc}
OUT=${1:-ci/demo/plan_175b.svg}
CFG=$(mktemp)
trap 'rm -f "$CFG"' EXIT
cat >"$CFG" <<'JSON'
{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "overlap_comm": true},
 "activation_checkpointing": {"partition_activations": false}}
JSON
"$Z" plan --config "$CFG" --world-size 4096 --model gpt2:n_layer=96,n_embd=12288,n_head=96,n_positions=2048 \
     --seq-len 2048 --steps 1 --machine dgx-h100 --svg "$OUT" | grep 'predicted'
echo "picture: $OUT"
