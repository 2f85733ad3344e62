#!/usr/bin/env python3
"""bench_torch.py: make bench-gpu's side-by-side figures (measured, never asserted).

Every ratio is taken from timings made in this one run, on this one GPU:

1. Adam: zinc's fused Adam kernel (build/tests/bench_gpu, which also times a
   device-to-device copy of the same bytes) against torch.optim.AdamW(fused=True)
   on the same element counts (fp32 parameters, gradients set with p.grad).
2. GPT-2 124M, one training step (forward, loss, backward, AdamW) on one GPU:
   `zinc train --backend cuda --model gpt2` (stage 0, world size 1, the median
   time_ms of its steps after the first) against Hugging Face's
   GPT2LMHeadModel in PyTorch eager with fused AdamW, same batch and sequence
   length; fp32 (TF32 off on both sides) and bf16 (zinc's mixed precision
   against torch.autocast(bfloat16) over fp32 weights).
3. With --mlp, the MLP step of the earlier bench: 4096 wide, 8 hidden layers,
   bf16 (zinc's side limited to 60 s).

A side that cannot run prints why and the rest goes on.
"""
import argparse, os, re, statistics, subprocess, sys, time
import torch

def timed(fn, reps=5):
    fn(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best

def zinc_adam(bench_gpu):
    """{n: (adam ms, adam/copy %)} from bench_gpu's lines 'adam n=1e+08: 0.123 ms, ...; adam/copy = 95.1%'."""
    out = subprocess.run([bench_gpu], capture_output=True, text=True, timeout=300)
    sys.stdout.write(out.stdout); sys.stderr.write(out.stderr)
    res = {}
    for m in re.finditer(r"adam n=([0-9.e+]+): ([0-9.]+) ms.*adam/copy = ([0-9.]+)%", out.stdout):
        res[int(float(m.group(1)))] = (float(m.group(2)), float(m.group(3)))
    return res

def torch_adamw_ms(n):
    p = torch.zeros(n, device="cuda", requires_grad=True)
    p.grad = torch.randn(n, device="cuda")
    opt = torch.optim.AdamW([p], lr=1e-3, fused=True)
    t = timed(opt.step)
    del p, opt; torch.cuda.empty_cache()
    return t * 1e3

def zinc_step_ms(zinc, args, steps=4, limit=120):
    cmd = [zinc, "train", "--backend", "cuda", "--steps", str(steps), "--steps-per-print", "1"] + args
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        print(f"zinc: no answer in {limit} s: {' '.join(cmd)}"); return None
    print(f"zinc: {steps} steps in {time.perf_counter() - t0:.1f} s of wall time, start included")
    ms = [float(m) for m in re.findall(r"time_ms=([0-9.]+)", out.stdout)][1:]   # the first step warms up
    if out.returncode or not ms:
        print(f"zinc: could not run {' '.join(cmd)}: {(out.stderr or out.stdout).strip()[-400:]}")
        return None
    return statistics.median(ms)

def torch_gpt2_ms(B, T, dtype):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda()   # 124M, n_positions 1024, vocab 50257
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, 256, (B, T), device="cuda")   # zinc's text data: bytes as tokens
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(dtype == "bf16")):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
    t = timed(step)
    del model, opt; torch.cuda.empty_cache()
    return t * 1e3

def torch_mlp_ms(width, layers, batch, classes):
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
    del model, opt; torch.cuda.empty_cache()
    return t * 1e3

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("--bench-gpu", default=None, help="default: tests/bench_gpu beside --zinc")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--mlp", action="store_true", help="also the 4096-wide MLP step")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False   # zinc's fast mode: cuBLAS sgemm, TF32 off (Z-CUDA-005)
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")

    bg = a.bench_gpu or os.path.join(os.path.dirname(a.zinc), "tests", "bench_gpu")
    za = zinc_adam(bg)
    for n in (100_000_000, 300_000_000, 1_000_000_000):
        t = torch_adamw_ms(n)
        z = za.get(n)
        zs = f"zinc {z[0]:.3f} ms (adam/copy {z[1]:.1f}%), torch/zinc time = {t / z[0]:.2f}" if z else "zinc: no figure"
        print(f"adam n={n:.0e}: torch fused AdamW {t:.3f} ms; {zs} (goal >= 1)")

    B, T = a.batch, a.seq_len
    data = ["--model", "gpt2", "--data", "text:tests/data/gpl-3.txt", "--seq-len", str(T),
            "--micro-batch", str(B), "--world-size", "1", "--stage", "0"]
    for dt in ("fp32", "bf16"):
        try:
            t = torch_gpt2_ms(B, T, dt)
        except Exception as e:   # transformers missing or out of memory: say so, go on
            print(f"gpt2 124M {dt}: torch side failed: {e}"); t = None
        z = zinc_step_ms(a.zinc, data + ["--dtype", dt])
        ts = f"torch eager {t:.1f} ms" if t else "torch: no figure"
        zs = f"zinc {z:.1f} ms" if z else "zinc: no figure"
        ratio = f"; torch/zinc time = {t / z:.2f} (goal >= 1)" if t and z else ""
        print(f"gpt2 124M step B={B} T={T} {dt}: {ts}; {zs}{ratio}")

    if not a.mlp:
        return
    t = torch_mlp_ms(4096, 8, 4096, 4096)
    z = zinc_step_ms(a.zinc, ["--model", "mlp:" + ",".join(["4096"] * 10), "--dtype", "bf16",
                              "--micro-batch", "4096", "--world-size", "1", "--stage", "0"], limit=60)
    zs = f"zinc {z:.2f} ms; torch/zinc time = {t / z:.2f}" if z else "zinc: no figure"
    print(f"mlp 4096x8 bf16 batch 4096 step: torch eager {t:.2f} ms; {zs}")

if __name__ == "__main__":
    main()
