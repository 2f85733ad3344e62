#!/usr/bin/env python3
"""bench_torch.py: PyTorch side of make bench-gpu (never asserted).

1. torch.optim.AdamW(fused=True) step time on 1e8, 3e8, 1e9 fp32 parameters
   (set with p.grad), to put next to build/tests/bench_gpu's Adam numbers.
2. One training step of a 4096-wide, 8-layer ReLU MLP in bf16 eager
   (forward, cross-entropy, backward, fused AdamW), batch 4096, against
   zinc's step on the same shape: `zinc train --backend cuda` with an
   mlp:4096x8 model, bf16, reporting the median time_ms of its step lines.
   (The model-spec and flag spellings follow zinc train's CLI; adjust
   --zinc-model if the CLI names the shape differently.)
"""
import argparse, re, statistics, subprocess, time
import torch

def timed(fn, reps=5):
    fn(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best

def bench_adamw(n):
    p = torch.zeros(n, device="cuda", requires_grad=True)
    p.grad = torch.randn(n, device="cuda")
    opt = torch.optim.AdamW([p], lr=1e-3, fused=True)
    t = timed(opt.step)
    # same bytes as zinc's count without the working copy: p g m v read, p m v written
    print(f"torch fused AdamW n={n:.0e}: {t*1e3:.3f} ms, {28*n/t/1e9:.0f} GB/s")
    del p, opt; torch.cuda.empty_cache()
    return t

def bench_mlp(width, layers, batch, classes):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods, torch.nn.Linear(width, classes)).cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x = torch.randn(batch, width, device="cuda", dtype=torch.bfloat16)
    y = torch.randint(0, classes, (batch,), device="cuda")
    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x).float(), y).backward()
        opt.step()
    t = timed(step)
    print(f"torch MLP {width}x{layers} bf16 eager batch {batch}: {t*1e3:.2f} ms/step")
    return t

def zinc_step_ms(zinc, model, batch):
    cmd = [zinc, "train", "--backend", "cuda", "--dtype", "bf16", "--steps", "6", "--model", model,
           "--micro-batch", str(batch)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    ms = [float(m) for m in re.findall(r"time_ms=([0-9.]+)", out.stdout)][1:]   # first step warms up
    if out.returncode or not ms:
        print(f"zinc step: could not run {' '.join(cmd)}: {out.stderr.strip()[:300]}")
        return None
    return statistics.median(ms)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("--zinc-model", default="mlp:4096x8")
    a = ap.parse_args()
    for n in (100_000_000, 300_000_000, 1_000_000_000):
        bench_adamw(n)
    t = bench_mlp(4096, 8, 4096, 4096)
    z = zinc_step_ms(a.zinc, a.zinc_model, 4096)
    if z is not None:
        print(f"zinc MLP step: {z:.2f} ms/step; zinc/torch time = {z / (t * 1e3):.2f} (goal <= 1)")

if __name__ == "__main__":
    main()
