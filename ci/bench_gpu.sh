#!/bin/sh
# make bench-gpu: measured side by side, never asserted. tests/bench_torch.py
# runs build/tests/bench_gpu (the fused Adam kernel against a device-to-device
# copy) and puts PyTorch's fused AdamW, GPT-2 124M and MLP steps beside zinc's;
# without PyTorch only bench_gpu runs.
B=${1:-build}
"$B"/tests/gpu_probe || exit 1
if python3 -c 'import torch' 2>/dev/null; then
  PYTHONUNBUFFERED=1 python3 tests/bench_torch.py --zinc "$B/zinc"
else
  "$B"/tests/bench_gpu || exit 1
  echo "bench-gpu: PyTorch not installed, torch comparison skipped"
fi
