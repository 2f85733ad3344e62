#!/usr/bin/env python3
"""bench_peers.py: `make bench-peers` (spec: Z-HOST-005). zinc against its
peers on this CPU, measured in the same run, never asserted:

1. the Adam step on N fp32 params (1e8, or 2^25 when memory is short) at 1
   thread and at the core count: zinc's host Adam against torch.optim.Adam
   (fused=True, else foreach=True) and DeepSpeedCPUAdam(adamw_mode=False);
   all three in L2 mode (weight decay added to the gradient), bias
   correction on, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
   (bench.c's values). Best of 5 steps after 2 warm-ups; GB/s at 28 bytes
   per param (read p, g, m, v; write p, m, v), as bench.c.
2. a training step of mlp:W,W,W,16 (fp32, W = 1024, 4096) at the same
   micro-batch and threads: zinc's single-rank stage-0 step against a
   PyTorch eager step of the same model, in steps per second.
3. a training step of GPT-2 124M (fp32, seq-len 256, micro-batch 4; one
   rank, stage 0, on text:tests/data/gpl-3.txt): zinc's step against a
   PyTorch eager step of the same model written out here (GPT2LMHeadModel's
   modules: tied lm_head, tanh GELU, LayerNorm eps 1e-5, eager causal
   attention as matmul/mask/softmax/matmul), the same loss, clipping at 1.0
   and AdamW (weight decay 0, zinc's built-in config), in steps per second.
   PEERS_ONLY=gpt2 runs these rows alone.
4. a GPT-2 stage-3 training step on 2 processes of one thread each (fp32,
   gpt2:n_layer=4,n_head=4,n_embd=256,vocab_size=256,n_positions=128,
   seq-len 128, micro-batch 4, AdamW, clipping 1.0): DeepSpeed (torchrun,
   gloo, its CPU accelerator) against zinc's processes (--backend tcp under
   zinc launch, --backend mpi under mpirun) and zinc's simulator (both ranks
   in one process), in steps per second: the mean over steps 5..12 (zinc's
   time_ms lines; DeepSpeed's steps timed in the worker). PEERS_ONLY=ds3.

This driver needs only the standard library: zinc's figures come from
bench_peer_zinc, the peers' from workers (this file with --worker) run by
the venv's python (--python), one process per measurement so each gets
OMP_NUM_THREADS (DeepSpeed's op may load its own OpenMP runtime, which
torch.set_num_threads does not reach) and its memory back. A peer that
cannot be imported or fails prints `bench NAME skipped: REASON`; the exit
status is 0 when every zinc figure was printed.

Usage: bench_peers.py BUILD_DIR [--python VENV_PYTHON]
"""
import os
import shutil
import subprocess
import sys
import time

CLASSES = 16   # mlp:W,W,W,16: the class count zinc's bench models use


def row(name, unit, zinc, peer, peer_v, prec=2):
    """bench.c's row(): ratio > 1 means zinc is faster (prec: digits after the point)."""
    print(f"bench {name:<28} zinc={zinc:.{prec}f}{unit} peer={peer}:{peer_v:.{prec}f}{unit} ratio={zinc / peer_v:.2f}",
          flush=True)


def skip(name, reason):
    print(f"bench {name:<28} skipped: {reason}", flush=True)


# --------------------------------------------------------------------------
# workers: run by the venv's python, print `seconds=S` (and `kind=K`)

def best_of(fn, warm=2, reps=5):
    for _ in range(warm):
        fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def train_step(torch, model, opt, x, y):
    """One training step as zinc's: the mean cross-entropy of the logits
    against y over every row, backward, the global norm clipped at 1.0,
    the optimizer's step."""
    def step():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    return step


def adam_tensors(torch, n):
    # bench_peer_zinc's values: p in [0, 1), g = 1e-3 (no denormals)
    p = torch.nn.Parameter(torch.arange(n, dtype=torch.float32).remainder_(1000).mul_(0.001))
    p.grad = torch.full((n,), 1e-3, dtype=torch.float32)
    return p


def torch_adam(torch, params, weight_decay):
    """torch.optim.Adam, fused on CPU when this torch has it, else foreach."""
    hp = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    try:
        return torch.optim.Adam(params, fused=True, **hp), "fused"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, foreach=True, **hp), "foreach"


def worker(kind, args):
    import torch
    T = int(args[-1])
    torch.set_num_threads(T)
    if kind == "versions":
        # DeepSpeed serves the Adam row alone: without it the torch rows run
        try:
            import deepspeed
            ds = deepspeed.__version__
        except Exception as e:  # noqa: BLE001 (any import failure: the row says why)
            ds = "none"
            print(f"why_no_deepspeed={type(e).__name__}:{str(e).replace(' ', '_')[:120]}")
        print(f"torch={torch.__version__} deepspeed={ds}")
        return
    if kind == "adam-torch":
        p = adam_tensors(torch, int(args[0]))
        opt, how = torch_adam(torch, [p], 0.01)
        print(f"kind={how} seconds={best_of(opt.step):.6f}")
        return
    if kind == "adam-deepspeed":
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        p = adam_tensors(torch, int(args[0]))
        # JIT-compiles the op on first use (cached under ~/.cache/torch_extensions)
        opt = DeepSpeedCPUAdam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                               bias_correction=True, adamw_mode=False)
        print(f"kind=cpu_adam seconds={best_of(opt.step):.6f}")
        return
    if kind == "mlp-torch":
        width, micro = int(args[0]), int(args[1])
        nn = torch.nn
        torch.manual_seed(0)
        # zinc's mlp:W,W,W,16 (src/engine/model_mlp.c): Linear layers with
        # ReLU between them, logits out of the last
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, CLASSES))
        # zinc's built-in config: Adam, lr 1e-3, AdamW mode with weight decay
        # 0 (the same update as Adam's), gradient_clipping 1.0 (DeepSpeed's
        # default), so the global norm is computed every step
        opt, how = torch_adam(torch, list(model.parameters()), 0.0)
        x = torch.randn(micro, width)
        y = torch.randint(0, CLASSES, (micro,))
        step = train_step(torch, model, opt, x, y)   # the mean over the micro-batch, as zinc's softmax_xent
        # as bench_peer_zinc: the mean of steps 3..6 (2 warm-ups), best of 2
        best = float("inf")
        for _ in range(2):
            for _ in range(2):
                step()
            t0 = time.perf_counter()
            for _ in range(4):
                step()
            best = min(best, (time.perf_counter() - t0) / 4)
        print(f"kind={how} seconds={best:.6f}")
        return
    if kind == "gpt2-torch":
        seq, micro = int(args[0]), int(args[1])
        print(f"kind=eager_adamw seconds={gpt2_torch_step(torch, seq, micro):.6f}")
        return
    if kind == "gpt2-ds3":
        print(f"kind=deepspeed_zero3 seconds={gpt2_ds3_step(torch, args):.6f}")
        return
    raise SystemExit(f"unknown worker {kind}")


DS3_MODEL = dict(n_layer=4, n_head=4, n_embd=256, vocab_size=256, n_positions=128)
DS3_SEQ, DS3_MICRO, DS3_STEPS, DS3_WARM = 128, 4, 12, 4


def gpt2_ds3_step(torch, args):
    """Run under torchrun (2 processes): DeepSpeed stage 3 on GPT2LMHeadModel
    of DS3_MODEL; the mean seconds of steps DS3_WARM+1 .. DS3_STEPS on rank 0."""
    import deepspeed
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    deepspeed.utils.logger.setLevel("WARNING")
    deepspeed.init_distributed(dist_backend="gloo")
    world = torch.distributed.get_world_size()
    torch.manual_seed(0)
    cfg = GPT2Config(**DS3_MODEL, n_ctx=DS3_SEQ, activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, tie_word_embeddings=True)
    model = GPT2LMHeadModel(cfg)
    ds = {"train_batch_size": DS3_MICRO * world, "train_micro_batch_size_per_gpu": DS3_MICRO,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0}},
          "gradient_clipping": 1.0, "zero_optimization": {"stage": 3}, "steps_per_print": 1000000}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds)
    idx = torch.randint(0, DS3_MODEL["vocab_size"], (DS3_MICRO, DS3_SEQ + 1))
    times = []
    for _ in range(DS3_STEPS):
        t0 = time.perf_counter()
        logits = engine(input_ids=idx[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
        engine.backward(loss)
        engine.step()
        times.append(time.perf_counter() - t0)
    torch.distributed.barrier()
    if torch.distributed.get_rank() != 0:
        raise SystemExit(0)
    return sum(times[DS3_WARM:]) / len(times[DS3_WARM:])


def zinc_step_seconds(out):
    """The mean of time_ms over steps DS3_WARM+1 .. of zinc's step lines."""
    lines = [ln.split("]: ", 1)[1] if ln.startswith("[rank") else ln for ln in out.splitlines()]  # zinc launch's prefix
    ms = [float(t.split("=", 1)[1]) for line in lines if line.startswith("step=")
          for t in line.split() if t.startswith("time_ms=")]
    ms = ms[DS3_WARM:]
    return sum(ms) / len(ms) / 1e3 if ms else None


def gpt2_torch_step(torch, seq, micro, V=50257, P=1024, L=12, NH=12, C=768):
    """Seconds per training step of GPT-2 124M in PyTorch eager (fp32): the
    faster of steps 2 and 3, as bench_peer_zinc gpt2."""
    import math
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)), persistent=False)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(B, T, NH, C // NH).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.h:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()   # tied lm_head

    torch.manual_seed(0)
    model = GPT2()
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    hp = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    try:
        opt = torch.optim.AdamW(model.parameters(), fused=True, **hp)
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(model.parameters(), foreach=True, **hp)
    idx = torch.randint(0, 256, (micro, seq + 1))   # bytes as tokens, as text:FILE
    step = train_step(torch, model, opt, idx[:, :-1], idx[:, 1:])
    best = float("inf")
    for s in range(3):
        t0 = time.perf_counter()
        step()
        if s >= 1:
            best = min(best, time.perf_counter() - t0)
    return best


# --------------------------------------------------------------------------
# the driver

def run(cmd, threads, timeout=1800):
    """Runs cmd with T threads everywhere; (dict of key=value, None) or (None, reason)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).strip().splitlines() if ln.strip()]
        return None, lines[-1].strip() if lines else f"exit status {p.returncode}"
    out = {}
    for tok in p.stdout.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out, None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3:])
        return 0
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    py = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else None
    zinc = os.path.join(build, "bench_peer_zinc")
    me = os.path.abspath(__file__)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = [1] if cores == 1 else [1, cores]

    # can the peers run at all? one reason for every skipped row
    peer_reason = None
    ds_reason = None   # set when torch imports but deepspeed does not
    versions = "torch=none deepspeed=none"
    if not py or not os.path.exists(py):
        peer_reason = "no python with torch (the venv could not be made)"
    else:
        v, why = run([py, me, "--worker", "versions", "1"], 1, timeout=600)
        if v is None:
            peer_reason = f"cannot import torch: {why}"
        else:
            versions = f"torch={v.get('torch')} deepspeed={v.get('deepspeed')}"
            if v.get("deepspeed") == "none":
                ds_reason = f"cannot import deepspeed: {v.get('why_no_deepspeed', 'unknown')}"
    print(f"bench-peers: {cpu_model()}, {cores} cores, {versions}", flush=True)

    def step_row(name, what, zargs, T, label, prec):
        """A training step: bench_peer_zinc ZARGS T against the worker
        ZARGS[0]-torch with the same arguments, in steps per second, the
        row's peer named label.format(the worker's kind). False when zinc
        failed."""
        z, why = run([zinc, *map(str, zargs), str(T)], T)
        if z is None:
            skip(name, f"zinc failed: {why}")
            return False
        zs = float(z["seconds_per_step"])
        print(f"zinc {what} threads={T}: {zs * 1e3:.1f} ms/step", flush=True)
        if peer_reason:
            skip(name, peer_reason)
            return True
        p, why = run([py, me, "--worker", f"{zargs[0]}-torch", *map(str, zargs[1:]), str(T)], T)
        if p is None:
            skip(name, why)
            return True
        print(f"torch {what} threads={T}: {float(p['seconds']) * 1e3:.1f} ms/step", flush=True)
        row(name, "step/s", 1.0 / zs, label.format(p["kind"]), 1.0 / float(p["seconds"]), prec=prec)
        return True

    ok = True
    only = os.environ.get("PEERS_ONLY", "adam mlp gpt2 ds3 dsck").split()   # a subset of the rows
    # 1. Adam: 4 fp32 arrays of n in each process, one process at a time
    n = 100_000_000
    avail = mem_available()
    if avail is not None and avail < 2 * 16 * n:
        n = 1 << 25
        print(f"bench-peers: {avail >> 20} MiB available, too little for 1e8 params: Adam on 2^25", flush=True)
    tag = "1e8" if n == 100_000_000 else "2p25"
    for T in threads if "adam" in only else []:
        name = f"adam_{tag}_{T}thread{'s' if T > 1 else ''}"
        z, why = run([zinc, "adam", str(n), str(T)], T)
        if z is None:
            skip(name, f"zinc failed: {why}")
            ok = False
            continue
        zs = float(z["seconds"])
        zg = 28.0 * n / zs / 1e9
        print(f"zinc adam n={n} threads={T} isa={z['isa']}: {zs * 1e3:.1f} ms/step, {zg:.2f} GB/s", flush=True)
        for peer, worker_kind in (("torch", "adam-torch"), ("deepspeed", "adam-deepspeed")):
            rname = f"{name}_{peer}"
            if peer_reason or (peer == "deepspeed" and ds_reason):
                skip(rname, peer_reason or ds_reason)
                continue
            p, why = run([py, me, "--worker", worker_kind, str(n), str(T)], T)
            if p is None:
                skip(rname, why)
                continue
            label = f"torch_adam_{p['kind']}" if peer == "torch" else "deepspeed_cpu_adam"
            row(rname, "GB/s", zg, label, 28.0 * n / float(p["seconds"]) / 1e9)

    # 2. MLP training step at zinc's default micro-batch (16) and at 64
    micros = [int(b) for b in os.environ.get("PEERS_MICRO", "16 64").split()]
    widths = [int(w) for w in os.environ.get("PEERS_WIDTHS", "1024 4096").split()]
    cases = [(W, b, T) for W in widths for b in micros for T in threads] if "mlp" in only else []
    for W, micro, T in cases:
        name = f"mlp{W}_micro{micro}_{T}thread{'s' if T > 1 else ''}"
        ok = step_row(name, f"mlp width={W} micro={micro}", ["mlp", W, micro], T, "torch_eager_{}", 2) and ok

    # 3. GPT-2 124M training step (seq-len 256, micro-batch 4)
    seq, micro = 256, 4
    for T in threads if "gpt2" in only else []:
        name = f"gpt2_124m_step_{T}thread{'s' if T > 1 else ''}"
        ok = step_row(name, f"gpt2 124M seq={seq} micro={micro}", ["gpt2", seq, micro], T, "torch_{}", 4) and ok

    # 4. GPT-2 stage 3 on 2 processes of one thread: DeepSpeed against zinc's
    # backends, one DeepSpeed measurement for every zinc row
    if "ds3" in only:
        ok = bench_ds3(build, py, me, peer_reason or ds_reason) and ok
    # 5. consolidating a DeepSpeed stage-3 checkpoint of 2.2 GB: zinc against
    # zero_to_fp32 (tests/bench_dsck.py: time, peak RSS, a cold cat)
    if "dsck" in only:
        if peer_reason or ds_reason:
            skip("dsck_consolidate", peer_reason or ds_reason)
        else:
            r = subprocess.run([sys.executable, os.path.join(os.path.dirname(me), "bench_dsck.py"), build, py])
            ok = r.returncode == 0 and ok
    return 0 if ok else 1


def bench_ds3(build, py, me, reason):
    zbin = os.path.join(build, "zinc")
    model = "gpt2:" + ",".join(f"{k}={v}" for k, v in DS3_MODEL.items())
    train = [zbin, "train", "--model", model, "--data", "text:tests/data/gpl-3.txt", "--seq-len", str(DS3_SEQ),
             "--stage", "3", "--steps", str(DS3_STEPS), "--steps-per-print", "1", "--micro-batch", str(DS3_MICRO),
             "--train-batch-size", str(2 * DS3_MICRO), "--threads", "1"]
    variants = [("sim", train + ["--world-size", "2"]),
                ("tcp", [zbin, "launch", "--nproc-per-node", "2", "--"] + train + ["--backend", "tcp"])]
    mpirun = shutil.which("mpirun")
    if mpirun:
        variants.append(("mpi", [mpirun, "-np", "2", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
                         + train + ["--backend", "mpi"]))
    else:
        skip("gpt2_s3_2proc_zinc_mpi", "mpirun not found")
    ds_s, why = None, reason
    if not reason:
        torchrun = os.path.join(os.path.dirname(py), "torchrun")
        p, why = run([torchrun, "--standalone", "--nproc-per-node", "2", me, "--worker", "gpt2-ds3", "1"], 1)
        ds_s = float(p["seconds"]) if p else None
    if ds_s:
        print(f"deepspeed gpt2 stage 3, 2 processes x 1 thread: {ds_s * 1e3:.1f} ms/step", flush=True)
    ok = True
    for label, cmd in variants:
        name = f"gpt2_s3_2proc_zinc_{label}"
        env = dict(os.environ, OMP_NUM_THREADS="1")
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
            zs = zinc_step_seconds(r.stdout) if r.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired) as e:
            r, zs = None, None
            print(f"bench-peers: {name}: {e}", flush=True)
        if zs is None:
            skip(name, f"zinc failed: {(r.stderr.strip().splitlines() or ['no output'])[-1] if r else 'did not run'}")
            ok = False
            continue
        print(f"zinc gpt2 stage 3 {label}, 2 ranks x 1 thread: {zs * 1e3:.1f} ms/step", flush=True)
        if ds_s is None:
            skip(name, why or "DeepSpeed printed no time")
            continue
        row(name, "step/s", 1.0 / zs, "deepspeed_zero3_2proc", 1.0 / ds_s)
    return ok


if __name__ == "__main__":
    sys.exit(main())
