#!/bin/sh
# make bench-gpu: measured side by side, never asserted. The fused Adam
# kernel against a device-to-device copy (build/tests/bench_gpu), then
# PyTorch's fused AdamW and an MLP step against zinc's (tests/bench_torch.py,
# skipped when torch is missing).
B=${1:-build}
"$B"/tests/gpu_probe || exit 1
"$B"/tests/bench_gpu || exit 1
if python3 -c 'import torch' 2>/dev/null; then
  python3 tests/bench_torch.py --zinc "$B/zinc"
else
  echo "bench-gpu: PyTorch not installed, torch comparison skipped"
fi
