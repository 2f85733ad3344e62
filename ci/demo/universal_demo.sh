#!/bin/sh
# The Universal Checkpoint demo (seed 001), rewritten for zinc: train 200
# steps on 4 simulated ranks with a checkpoint at step 100; resume on 4 from
# the sharded checkpoint; convert it to a universal checkpoint and resume on
# 4, on 2 with gradient accumulation doubled and on 8 with it halved. In
# canonical mode every resumed run prints the uninterrupted run's digest.
# Usage: sh ci/demo/universal_demo.sh [OUTDIR]   (zinc built at build/zinc)
set -e
Z=${ZINC:-build/zinc}
D=${1:-/tmp/zinc-uc-demo}
rm -rf "$D"
mkdir -p "$D"
COMMON="--canonical --stage 2 --train-batch-size 256 --micro-batch 32 --steps 200 --steps-per-print 0"
run() {  # name, args...
  name=$1; shift
  "$Z" train $COMMON --log "$D/$name.csv" "$@" | grep '^digest=' | sed "s/^/$name: /"
}
run baseline --world-size 4 --checkpoint-dir "$D/ckpt" --checkpoint-interval 100
run resume_no_uc --world-size 4 --checkpoint-dir "$D/ckpt" --resume --checkpoint-tag global_step100
"$Z" ckpt to-universal --input-folder "$D/ckpt/global_step100" --output-folder "$D/ckpt/global_step100_universal" --num-workers 4
run resume_uc_4gpu --world-size 4 --checkpoint-dir "$D/ckpt" --resume --universal-checkpoint --checkpoint-tag global_step100_universal
run resume_uc_2gpu_ga2x --world-size 2 --checkpoint-dir "$D/ckpt" --resume --universal-checkpoint --checkpoint-tag global_step100_universal
run resume_uc_8gpu_ga_half --world-size 8 --checkpoint-dir "$D/ckpt" --resume --universal-checkpoint --checkpoint-tag global_step100_universal
"$Z" plot "$D/baseline.csv" "$D/resume_no_uc.csv" "$D/resume_uc_4gpu.csv" "$D/resume_uc_2gpu_ga2x.csv" \
     "$D/resume_uc_8gpu_ga_half.csv" -o "$D/loss.svg" --title "universal checkpoint: resumed runs track the baseline"
echo "plot: $D/loss.svg"
