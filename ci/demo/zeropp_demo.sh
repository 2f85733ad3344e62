#!/bin/sh
# ZeRO++ loss curves: GPT-2 tiny on the bundled text, bf16, stage 3, 4
# simulated ranks on 2 nodes of 2, 200 steps, the same seed, with no ZeRO++
# key, with each of hpZ, qwZ and qgZ, and with all three. hpZ prints stage
# 3's digest (it moves the same bytes from elsewhere); the quantized runs
# follow within a few percent.
# Usage: sh ci/demo/zeropp_demo.sh [OUTDIR]   (zinc built at build/zinc)
set -e
Z=${ZINC:-build/zinc}
D=${1:-/tmp/zinc-zeropp-demo}
rm -rf "$D"
mkdir -p "$D"
run() {  # name, extra zero_optimization keys
  printf '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "optimizer": {"type": "Adam", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 3%s}}\n' "$2" >"$D/$1.json"
  "$Z" train --config "$D/$1.json" --model gpt2-tiny --data text:tests/data/gpl-3.txt --world-size 4 --ranks-per-node 2 \
       --steps 200 --steps-per-print 0 --log "$D/$1.csv" | grep '^digest=' | sed "s/^/$1: /"
}
run stage3 ""
run hpZ ', "zero_hpz_partition_size": 2'
run qwZ ', "zero_quantized_weights": true'
run qgZ ', "zero_quantized_gradients": true'
run hpZ+qwZ+qgZ ', "zero_hpz_partition_size": 2, "zero_quantized_weights": true, "zero_quantized_gradients": true'
"$Z" plot "$D/stage3.csv" "$D/hpZ.csv" "$D/qwZ.csv" "$D/qgZ.csv" "$D/hpZ+qwZ+qgZ.csv" -o "$D/loss.svg" \
     --title "ZeRO++ on GPT-2 tiny: 4 ranks on 2 nodes, bf16, same seed"
echo "plot: $D/loss.svg"
