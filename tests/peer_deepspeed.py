#!/usr/bin/env python3
"""peer_deepspeed.py: `make test-deepspeed` (ci/test_deepspeed.sh). DeepSpeed itself is the peer: for each scenario of a matrix
zinc and DeepSpeed train the same GPT-2 (gpt2-tiny: 2 layers, 32 wide) from
the same initial weights (zinc's step-0 checkpoint exported with --hf and
loaded by from_pretrained), on the same windows (Z-DATA-012), from the same
ds_config file: the file zinc reads is the file deepspeed.initialize reads.
DeepSpeed runs on its CPU accelerator, one process per rank under torchrun,
gloo (tests/peer_ds_worker.py); zinc on its simulator.

Compared per scenario: the loss of every step, the lr it ran with, and the
final fp32 master weights and Adam moments of every parameter (zinc's
`ckpt to-universal` against deepspeed.utils.safe_get_full_fp32_param /
safe_get_full_optimizer_state). Two kinds of bound (Z-DSP-003):
  short scenarios (STEPS steps): fixed bounds, below;
  long scenarios (LONG_STEPS steps, where fp32 differences grow chaotically):
  DeepSpeed also runs a second way (another thread count), and zinc's
  distance from DeepSpeed must stay within FACTOR times DeepSpeed's distance
  from itself (plus a floor of the short bounds), measured in the same run.
A scenario DeepSpeed cannot run here prints `skipped` with DeepSpeed's own
error line; zinc must still train it. One table row per scenario; exit 1 on
any disagreement.

spec: Z-DSP-001 Z-DSP-002 Z-DSP-003 Z-DSP-004 Z-DSP-010 Z-DSP-011 Z-DSP-012 Z-MEM-011

Usage: peer_deepspeed.py [--zinc build/zinc] [--work build/deepspeed] [--only NAME,...]"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402

DATA = "tests/data/gpl-3.txt"
T, SEED, MB = 32, 1234, 2          # --seq-len, seed, micro-batch per rank
STEPS, LONG_STEPS = 8, 40
LR, BETAS, EPS, WD = 1e-3, [0.9, 0.999], 1e-8, 0.01
# The bound of each metric: zinc's distance from DeepSpeed must be within
# FACTOR times DeepSpeed's distance from itself (1 thread against 2), or
# within the floor where DeepSpeed agrees with itself more closely than that.
# Metrics: the loss of every step (max relative), max |d| over every element
# of the fp32 masters, and per tensor ||d|| / ||DeepSpeed's|| (max over
# tensors) of the masters and both Adam moments, ||d|| taken as a part of
# how far training moved the tensor (from the step-0 weights; moments from 0). max |d| of a moment is not
# bounded: where exp_avg_sq is near 0, Adam's step turns rounding noise into
# steps of lr's size (the k bias of attention has a zero gradient).
FLOOR = {"loss": 1e-5, "fp32": 1e-4, "fp32 rel": 1e-5, "exp_avg rel": 1e-5, "exp_avg_sq rel": 1e-5}
# fp16 and bf16: DeepSpeed's model runs torch's 16-bit CPU kernels, zinc
# rounds each op of its own forward to 16 bits; both keep fp32 masters
FLOOR_16 = {"loss": 1e-3, "fp32": 2e-2, "fp32 rel": 1e-3, "exp_avg rel": 1e-3, "exp_avg_sq rel": 1e-3}
FACTOR = 10.0
# fp16/bf16: torch's 16-bit CPU kernels round where zinc's forward does not
# (measured: about 20 times DeepSpeed's own spread in c_fc's masters)
FACTOR_16 = 50.0
# offload_optimizer: DeepSpeed swaps FusedAdam for DeepSpeedCPUAdam, whose
# arithmetic rounds differently; zinc keeps FusedAdam's (Z-OPT-001)
FACTOR_OFFLOAD = 20.0
# the lr zinc's CSV prints has 9 significant digits; the bits themselves are
# held to DeepSpeed's by tests/diff_deepspeed.py
LR_RTOL = 1e-8


def scenarios():
    """The matrix: (name, world, config, flags). Every DeepSpeed LR schedule,
    stages 0-3, worlds 1/2/4, GA 1/2, clipping, offload, hpZ, bf16, a resume;
    and what DeepSpeed refuses on a CPU (fp16, qwZ/qgZ, MiCS)."""
    sched = {
        "WarmupLR": {"warmup_min_lr": 0.0, "warmup_max_lr": 2e-3, "warmup_num_steps": 4, "warmup_type": "linear"},
        "WarmupDecayLR": {"warmup_min_lr": 1e-4, "warmup_max_lr": 2e-3, "warmup_num_steps": 3,
                          "total_num_steps": 10},
        "WarmupCosineLR": {"total_num_steps": 10, "warmup_num_steps": 3, "warmup_min_ratio": 0.1,
                           "cos_min_ratio": 0.05},
        "OneCycle": {"cycle_min_lr": 1e-4, "cycle_max_lr": 3e-3, "cycle_first_step_size": 3,
                     "cycle_momentum": True, "cycle_min_mom": 0.85, "cycle_max_mom": 0.95},
        "LRRangeTest": {"lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 2,
                        "lr_range_test_step_rate": 2.0, "lr_range_test_staircase": False},
    }
    S = []

    def add(name, world, stage, ga=1, clip=0.0, sched_type=None, zero=None, bf16=False, fp16=False,
            ckpt_at=None, long=False, factor=None):
        cfg = {"train_batch_size": MB * ga * world, "train_micro_batch_size_per_gpu": MB,
               "gradient_accumulation_steps": ga,
               "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": BETAS, "eps": EPS, "weight_decay": WD}},
               "gradient_clipping": clip, "zero_optimization": dict({"stage": stage}, **(zero or {})),
               "seed": SEED, "steps_per_print": 1000000}
        if sched_type:
            cfg["scheduler"] = {"type": sched_type, "params": sched[sched_type]}
        if bf16:
            cfg["bf16"] = {"enabled": True}
        if fp16:
            cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
        if factor is None:
            factor = FACTOR_16 if bf16 or fp16 else FACTOR_OFFLOAD if "offload_optimizer" in (zero or {}) else FACTOR
        S.append({"name": name, "world": world, "stage": stage, "ga": ga, "cfg": cfg, "ckpt_at": ckpt_at,
                  "factor": factor,
                  "long": long, "half": bf16 or fp16, "steps": LONG_STEPS if long else STEPS})

    add("s0-w1", 1, 0)
    add("s0-w2-ga2-clip", 2, 0, ga=2, clip=1.0)
    add("s1-w2-clip", 2, 1, clip=1.0)
    add("s1-w4-onecycle-overlap", 4, 1, sched_type="OneCycle", zero={"overlap_comm": True})
    add("s2-w2-ga2-warmup-overlap", 2, 2, ga=2, sched_type="WarmupLR",
        zero={"overlap_comm": True, "reduce_bucket_size": 5000})
    add("s2-w1-ga2-rangetest", 1, 2, ga=2, sched_type="LRRangeTest")
    add("s3-w2-decay-nooverlap", 2, 3, sched_type="WarmupDecayLR", zero={"overlap_comm": False})
    add("s3-w4-ga2-cosine-clip", 4, 3, ga=2, clip=1.0, sched_type="WarmupCosineLR")
    add("s3-w1", 1, 3)
    add("s1-w2-offload-opt", 2, 1, zero={"offload_optimizer": {"device": "cpu"}})
    add("s2-w2-ga2-offload-opt", 2, 2, ga=2, clip=1.0, zero={"offload_optimizer": {"device": "cpu"}})
    add("s3-w2-offload-opt", 2, 3, zero={"offload_optimizer": {"device": "cpu"}})
    add("s3-w2-offload-param", 2, 3, zero={"offload_optimizer": {"device": "cpu"},
                                           "offload_param": {"device": "cpu"}})
    # persistence 0: every parameter is gathered, so hpZ keeps secondaries.
    # Factor 20: on the AMD EPYC of 2026-11-29 (Zen 5: avx512_vp2intersect;
    # DeepSpeed's CPU accelerator now refuses fp16) zinc ends h.0's c_fc
    # weight 17.9 times the floor from DeepSpeed (2.2 on the Zen 4 before
    # it; zinc's bits did not change). Measured element by element: one of
    # its 4096 elements, (24, 9), is 5.5e-5 apart (zinc 3.003e-4, DeepSpeed
    # 3.557e-4: 5.5 % of one step's lr), every other within 1e-6, and that
    # element's Adam moments agree to 4 digits at the end (m 2.599e-4 vs
    # 2.598e-4, v 7.31e-9 vs 7.306e-9). So one early step moved it
    # differently, most likely a step whose gradient there was near eps (1e-8), where
    # Adam's lr * m/(sqrt(v) + eps) follows the gradient's last bits, and
    # torch's kernels on this CPU sum in another order than zinc. DeepSpeed's
    # 1-against-2-thread floor keeps its own order at this size (1.6e-7), so
    # it cannot show such an element.
    add("s3-w4-hpz2", 4, 3, zero={"zero_hpz_partition_size": 2, "stage3_param_persistence_threshold": 0}, factor=20.0)
    add("s2-w2-bf16", 2, 2, bf16=True)
    add("s3-w2-bf16-clip", 2, 3, clip=1.0, bf16=True)
    add("s2-w2-resume", 2, 2, clip=1.0, sched_type="WarmupLR", ckpt_at=4)
    add("s3-w4-resume", 4, 3, ga=2, ckpt_at=4)
    add("s3-w2-long-clip", 2, 3, clip=1.0, long=True)
    add("s1-w2-long-cosine", 2, 1, clip=1.0, sched_type="WarmupCosineLR", long=True)
    add("s2-w2-fp16", 2, 2, fp16=True)
    add("s3-w4-qwz-qgz", 4, 3, zero={"zero_quantized_weights": True, "zero_quantized_gradients": True})
    add("s3-w4-mics2", 4, 3, zero={"mics_shard_size": 2})
    for s in S:   # long scenarios' schedules must span the longer run
        if s["long"] and "scheduler" in s["cfg"]:
            s["cfg"]["scheduler"]["params"] = dict(s["cfg"]["scheduler"]["params"], total_num_steps=LONG_STEPS + 5)
    return S


def zinc_side(zinc, sdir, s):
    """zinc trains the scenario from the config file; returns (losses, lrs,
    {name/state: array}) or raises with zinc's error."""
    cfg = os.path.join(sdir, "ds_config.json")
    ck = os.path.join(sdir, "zinc_ck")
    shutil.rmtree(ck, ignore_errors=True)
    base = [zinc, "train", "--config", cfg, "--model", "gpt2-tiny", "--data", "text:" + DATA, "--seq-len", str(T),
            "--world-size", str(s["world"]), "--steps-per-print", "0", "--checkpoint-dir", ck]
    logs = []
    if s["ckpt_at"]:
        log1 = os.path.join(sdir, "zinc_log1.csv")
        peer_common.run(base + ["--steps", str(s["ckpt_at"]), "--checkpoint-interval", str(s["ckpt_at"]),
                                "--log", log1], "test-deepspeed")
        logs.append(log1)
        base = base + ["--resume"]
    log = os.path.join(sdir, "zinc_log.csv")
    peer_common.run(base + ["--steps", str(s["steps"]), "--checkpoint-interval", str(s["steps"]), "--log", log],
                    "test-deepspeed")
    logs.append(log)
    losses = sum((peer_common.csv_column(p, "loss") for p in logs), [])
    lrs = sum((peer_common.csv_column(p, "lr") for p in logs), [])
    return losses, lrs, zinc_state(zinc, ck, s["steps"], os.path.join(sdir, "zinc_universal"))


def zinc_state(zinc, ck, steps, uni):
    """{name/state: array} of zinc's checkpoint ck/global_step{steps}, through
    zinc's own universal checkpoint (one tensor per parameter and state)."""
    shutil.rmtree(uni, ignore_errors=True)
    peer_common.run([zinc, "ckpt", "to-universal", "--input-folder", os.path.join(ck, "global_step%d" % steps),
                     "--output-folder", uni], "test-deepspeed")
    state = {}
    zero = os.path.join(uni, "zero")
    for name in os.listdir(zero):
        if not os.path.isdir(os.path.join(zero, name)):
            continue
        for kind in ("fp32", "exp_avg", "exp_avg_sq"):
            state[name + "/" + kind] = load_file(os.path.join(zero, name, kind + ".safetensors"))[kind]
    return state


def zinc_resumes_ds(zinc, sdir, s, world, stage):
    """zinc resumes DeepSpeed's own checkpoint of step ckpt_at (Z-DSCK-007)
    at world size world and stage stage (the global batch kept: the
    accumulation absorbs the world size) and trains to the end; returns
    (losses, lrs, state) of the resumed steps, or None where the batch does
    not divide."""
    cfg = json.loads(json.dumps(s["cfg"]))
    ga, rem = divmod(cfg["train_batch_size"], MB * world)
    if rem:
        return None
    cfg["gradient_accumulation_steps"] = ga
    cfg["zero_optimization"]["stage"] = stage
    tag = "w%d_s%d" % (world, stage)
    path = os.path.join(sdir, "resume_%s.json" % tag)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    # a copy: zinc's own checkpoints then go beside DeepSpeed's, not into its folder
    ck = os.path.join(sdir, "zinc_from_ds_" + tag)
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(os.path.join(sdir, "ds_ck"), ck)
    log = os.path.join(sdir, "zinc_from_ds_%s.csv" % tag)
    peer_common.run([zinc, "train", "--config", path, "--model", "gpt2-tiny", "--data", "text:" + DATA, "--seq-len",
                     str(T), "--world-size", str(world), "--steps-per-print", "0", "--checkpoint-dir", ck, "--resume",
                     "--steps", str(s["steps"]), "--checkpoint-interval", str(s["steps"]), "--log", log],
                    "test-deepspeed")
    return (peer_common.csv_column(log, "loss"), peer_common.csv_column(log, "lr"),
            zinc_state(zinc, ck, s["steps"], os.path.join(sdir, "zinc_from_ds_universal")))


def ds_jobs(s, sdir, hf0, threads, tag):
    out = os.path.join(sdir, tag)
    return {"name": s["name"], "config": os.path.join(sdir, "ds_config.json"), "hf0": hf0, "data": DATA,
            "seed": SEED, "T": T, "steps": s["steps"], "threads": threads, "out": out,
            "ckpt_at": s["ckpt_at"], "ckpt_dir": os.path.join(sdir, tag + "_ck"),
            # DeepSpeed's own checkpoint at the end, for zinc's reader (stages 1-3: ZeRO's files)
            "final_dir": os.path.join(sdir, "ds_final_ck") if tag == "ds" and s["stage"] >= 1 else None}


def run_deepspeed(py, world, jobs, work, what=""):
    """One torchrun per world size, every job of that size in it."""
    path = os.path.join(work, "jobs%s_w%d.json" % (what, world))
    with open(path, "w") as f:
        json.dump(jobs, f, indent=1)
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    cmd = [torchrun, "--standalone", "--nproc-per-node", str(world), "tests/peer_ds_worker.py", path]
    with open(os.path.join(work, "deepspeed%s_w%d.log" % (what, world)), "w") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=1800)
    return r.returncode


def ds_result(out):
    err = os.path.join(out, "error.txt")
    if os.path.exists(err):
        return None, open(err).read().strip()
    if not os.path.exists(os.path.join(out, "losses.json")):
        return None, "DeepSpeed wrote no result (see its log)"
    with open(os.path.join(out, "losses.json")) as f:
        r = json.load(f)
    return (r["loss"], r["lr"], load_file(os.path.join(out, "state.safetensors"))), None


def distance(a, b, w0):
    """{loss (max relative), lr (max relative), fp32 (max |d|), and per kind
    K and tensor t ||a_t - b_t|| / ||b_t - start_t|| ("K rel": {t: value},
    the distance as a part of how far training moved the tensor; moments
    start at 0, masters at w0)} between two results."""
    la, ra, sa = a
    lb, rb, sb = b
    d = {"loss": max(abs(x - y) / abs(y) for x, y in zip(la, lb)) if len(la) == len(lb) else float("inf"),
         "lr": max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(ra, rb)) if len(ra) == len(rb) else float("inf")}
    for kind in ("fp32", "exp_avg", "exp_avg_sq"):
        keys = [k for k in sb if k.endswith("/" + kind)]
        if not keys or any(k not in sa or sa[k].shape != sb[k].shape for k in keys):
            d[kind] = d[kind + " rel"] = float("inf")
            continue
        diffs = {k: sa[k].astype(np.float64) - sb[k].astype(np.float64) for k in keys}
        d[kind] = max(float(np.abs(x).max()) for x in diffs.values())
        moved = {k: sb[k].astype(np.float64) - (w0[k.rsplit("/", 1)[0]] if kind == "fp32" else 0.0) for k in keys}
        d[kind + " rel"] = {k: float(np.linalg.norm(x) / max(np.linalg.norm(moved[k]), 1e-30))
                            for k, x in diffs.items()}
    return d


def judge(d, self_d, s):
    """The table's cells and the failures: zinc's distance from DeepSpeed
    (d) against DeepSpeed's from itself (self_d), within the scenario's
    factor, above the floors."""
    floor = FLOOR_16 if s["half"] else FLOOR
    bad, cells = [], []
    for k in ("loss", "fp32"):
        bound = max(floor[k], s["factor"] * self_d[k])
        cells.append("%8.2g/%-8.2g" % (d[k], self_d[k]))
        if not d[k] <= bound:
            bad.append("%s differs by %.3g (bound %.3g; DeepSpeed against itself %.3g)"
                       % (k, d[k], bound, self_d[k]))
    for kind in ("fp32 rel", "exp_avg rel", "exp_avg_sq rel"):
        # per tensor: zinc's distance over DeepSpeed's own (or the floor)
        ratio = {t: v / max(floor[kind], self_d[kind].get(t, 0.0)) for t, v in d[kind].items()} \
            if isinstance(d[kind], dict) else {"(missing tensors)": float("inf")}
        t = max(ratio, key=ratio.get)
        cells.append("%17.2f" % ratio[t])
        if not ratio[t] <= s["factor"]:
            bad.append("%s of %s: %.3g, %.1f times DeepSpeed's distance from itself (%.3g; floor %.3g)"
                       % (kind, t, d[kind][t], ratio[t], self_d[kind].get(t, 0.0), floor[kind]))
    if not d["lr"] <= LR_RTOL:
        bad.append("lr differs by %.3g relative (bound %.3g)" % (d["lr"], LR_RTOL))
    return cells, bad


def zinc_memory(zinc, sdir, s):
    """Rank 0's bytes by category in zinc's dry run of the scenario's config
    with one step: {(tier, what): {category: bytes}}, tier "device", "host"
    or "nvme", what "after init" or "peak one step"."""
    r = subprocess.run([zinc, "plan", "--config", os.path.join(sdir, "ds_config.json"), "--model", "gpt2-tiny",
                        "--seq-len", str(T), "--world-size", str(s["world"]), "--steps", "1"],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("zinc plan exited %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
    got = {}
    for line in r.stdout.splitlines():
        for tier in ("device", "host", "nvme"):
            for what, head in (("after init", "%s bytes by category (after init): "),
                               ("peak one step", "%s peak bytes by category (one step): ")):
                head = "[zinc] dry run [rank 0] " + head % tier
                if line.startswith(head):
                    cats = line[len(head):].split(" | ")[0].split()
                    got[tier, what] = {k: int(v) for k, v in (c.split("=") for c in cats)}
    return got


def memory_check(zinc, sdir, s, mem):
    """zinc's bytes against the buffers DeepSpeed allocated (Z-DSP-011),
    equal to the byte: its IPG buffers (zinc's device buckets, where no
    parameter offload or quantized-collective staging shares that category), hpZ's secondary
    partitions, and the fp32 master and Adam moments (on any tier: DeepSpeed's
    CPU accelerator keeps every tier in host memory). Returns (cells, bad)."""
    got = zinc_memory(zinc, sdir, s)
    dev = got["device", "after init"]
    state = {k: sum(got[t, "after init"].get(k, 0) for t in ("device", "host", "nvme"))
             for k in ("master32", "exp_avg", "exp_avg_sq")}
    z = s["cfg"]["zero_optimization"]
    # zinc's staging of offloaded parameters and of quantized collectives
    # shares the category with the IPG buffers
    staged = any(k in z for k in ("offload_param", "zero_quantized_weights", "zero_quantized_gradients"))
    # the secondaries live from the forward's gathers to the step: the step's peak
    pairs = [("hpz_secondary", got["device", "peak one step"]["hpz_secondary"])]
    if not staged:
        pairs.append(("buckets", dev["buckets"]))
    if "master32" in mem:   # a ZeRO optimizer (stage 0 has no partition to compare)
        pairs += [("master32", state["master32"]), ("exp_avg", state["exp_avg"]), ("exp_avg_sq", state["exp_avg_sq"])]
    cells, bad = [], []
    for k, zv in pairs:
        # a master that is the parameter partition itself holds no bytes of its own
        dv = 0 if k == "master32" and mem.get("master_aliased") else mem.get(k, 0)
        cells.append("%s %d%s" % (k, zv, "" if zv == dv else "/DS %d" % dv))
        if zv != dv:
            bad.append("memory: %s is %d bytes in zinc, %d in DeepSpeed" % (k, zv, dv))
    return cells, bad


def cli_check(zinc, work, cmd, zero_stage, mb, flags, tight, verdict):
    """`zinc CMD --peer deepspeed` as a user runs it, on a config of 2
    processes: at the default bounds and at a bound below the rounding
    between the two (tight). verdict(want_fail, rc, lines) says whether the
    output is what the spec promises."""
    cfg = os.path.join(work, cmd + "_ds_config.json")
    with open(cfg, "w") as f:
        json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": mb, "gradient_clipping": 1.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": WD}},
                   "zero_optimization": {"stage": zero_stage}, "seed": SEED}, f)
    base = [zinc, cmd, "--peer", "deepspeed", "--config", cfg, "--model", "gpt2-tiny", "--data", "text:" + DATA,
            "--seq-len", str(T), "--world-size", "2", "--python", sys.executable] + flags
    fails = []
    for tol, want in (([], 0), (tight, 1)):
        r = subprocess.run(base + tol, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        lines = r.stdout.strip().splitlines()
        last = lines[-1] if lines else ""
        ok = verdict(want, r.returncode, lines)
        print("%-24s zinc %s --peer deepspeed %s: exit %d, %s%s" % (
            cmd + ("-tight" if want else ""), cmd, " ".join(tol) or "(default bounds)", r.returncode, last[:90],
            "" if ok else "  DIFFER\n%s\n%s" % ("\n".join(lines[-6:]), r.stderr.strip()[-400:])))
        if not ok:
            fails.append("%s%s: exit %d, '%s'" % (cmd, " ".join(tol), r.returncode, last))
    return fails


def stepper_verdict(want, rc, lines):
    """Z-DSP-010: TEST PASSED, or TEST FAILED after a DIVERGED PARAMETER line at batch 0."""
    last = lines[-1] if lines else ""
    if want == 0:
        return rc == 0 and last == "TEST PASSED"
    return rc == 1 and last == "TEST FAILED" and any(ln.startswith("DIVERGED PARAMETER rank=0 batch=0 ") for ln in lines)


def compare_verdict(want, rc, lines):
    """Z-DSP-012: a line per step and TEST PASSED, or TEST FAILED at step 1
    naming the loss (the first value compared) with its two values."""
    last = lines[-1] if lines else ""
    if want == 0:
        return rc == 0 and last == "TEST PASSED" and sum(ln.startswith("step=") for ln in lines) == 4
    return rc == 1 and last.startswith("TEST FAILED: step 1, loss: DeepSpeed ") and ", zinc " in last


def ds_resumes_zinc(a, S, results, hf0, w0):
    """zinc ckpt to-deepspeed, then DeepSpeed's load_checkpoint of it
    (tests/ds_write_check.py): the round trip and the continuations."""
    import ds_write_check
    jobs = ds_write_check.prepare(a.zinc, a.work, S, lambda s, sdir: ds_jobs(s, sdir, hf0, 1, "ds_from_zinc"))
    for world, js in sorted(jobs.items()):
        rc = run_deepspeed(sys.executable, world, js, a.work, "_from_zinc")
        if rc:
            print("test-deepspeed: torchrun for world size %d exited %d (log: %s)"
                  % (world, rc, os.path.join(a.work, "deepspeed_from_zinc_w%d.log" % world)))
    print("test-deepspeed: zinc's checkpoints written as DeepSpeed's (zinc ckpt to-deepspeed, Z-DSCK-009), resumed"
          " by DeepSpeed's load_checkpoint and saved again at once: every file equal; midway ones trained on, against"
          " zinc's own continuation (same columns)")
    fails = []
    for s in S:
        if not any(j["name"].startswith(s["name"] + "/") for js in jobs.values() for j in js):
            continue
        sdir = os.path.join(a.work, s["name"])
        ds, why = ds_result(os.path.join(sdir, "ds_from_zinc"))
        diff = why or ds_write_check.round_trip(os.path.join(sdir, "zinc_to_ds"), os.path.join(sdir, "ds_resaved"))
        row = "%-24s round trip %s" % (s["name"], "equal" if not diff else "DIFFERS: " + diff)
        if diff:
            fails.append("%s: DeepSpeed resuming zinc's checkpoint: %s" % (s["name"], diff))
        k = s["ckpt_at"]
        if k and not why:
            z, ref, alt = results[s["name"]]
            cut = lambda x: (x[0][k:], x[1][k:], x[2])
            cells, bad = judge(distance(ds, cut(z), w0), distance(cut(alt), cut(ref), w0), s)
            row += "; trained on from step %d: %s  %s (x%g)" % (k, " ".join(cells), "agree" if not bad else "DIFFER",
                                                                s["factor"])
            fails += ["%s: DeepSpeed continuing zinc's checkpoint: %s" % (s["name"], b) for b in bad]
        print(row)
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("--work", default="build/deepspeed")
    ap.add_argument("--only", default="")
    ap.add_argument("--reuse", action="store_true", help="keep DeepSpeed's results from the last run (a local shortcut)")
    a = ap.parse_args()
    import deepspeed
    import torch
    os.makedirs(a.work, exist_ok=True)
    t0 = time.time()
    S = [s for s in scenarios() if not a.only or s["name"] in a.only.split(",")]

    # the initial weights: a 0-step run's checkpoint, exported
    init = os.path.join(a.work, "init")
    shutil.rmtree(init, ignore_errors=True)
    peer_common.run([a.zinc, "train", "--model", "gpt2-tiny", "--data", "text:" + DATA, "--seq-len", str(T),
                     "--stage", "0", "--world-size", "1", "--seed", str(SEED), "--steps", "0",
                     "--steps-per-print", "0", "--checkpoint-dir", os.path.join(init, "ck")], "test-deepspeed")
    hf0 = os.path.join(init, "hf")
    peer_common.run([a.zinc, "ckpt", "consolidate", "--input", os.path.join(init, "ck", "global_step0"),
                     "--hf", hf0], "test-deepspeed")

    w0 = {k: v.astype(np.float64) for k, v in load_file(os.path.join(hf0, "model.safetensors")).items()}
    by_world = {}
    for s in S:
        sdir = os.path.join(a.work, s["name"])
        os.makedirs(sdir, exist_ok=True)
        with open(os.path.join(sdir, "ds_config.json"), "w") as f:
            json.dump(s["cfg"], f, indent=1)
        by_world.setdefault(s["world"], []).append(ds_jobs(s, sdir, hf0, 1, "ds"))
        # DeepSpeed against itself: 2 threads instead of 1
        by_world[s["world"]].append(ds_jobs(s, sdir, hf0, 2, "ds_alt"))
    for world, jobs in sorted(by_world.items()):
        if a.reuse:
            continue
        for j in jobs:
            shutil.rmtree(j["out"], ignore_errors=True)
        rc = run_deepspeed(sys.executable, world, jobs, a.work)
        if rc:
            print("test-deepspeed: torchrun for world size %d exited %d (log: %s)"
                  % (world, rc, os.path.join(a.work, "deepspeed_w%d.log" % world)))

    print("test-deepspeed: zinc vs DeepSpeed %s (torch %s, CPU accelerator, gloo), gpt2-tiny, T=%d, micro-batch %d"
          % (deepspeed.__version__, torch.__version__, T, MB))
    cols = ("loss", "fp32", "fp32 rel", "exp_avg rel", "exp_avg_sq rel")
    print("%-24s %2s %2s %2s %5s  %s  %s" % ("scenario", "W", "st", "GA", "steps",
                                           " ".join("%17s" % c for c in cols), "result"))
    print("%-38s  %s %s" % ("", " ".join("%17s" % "zinc-DS/DS-DS" for _ in cols[:2]),
                            " ".join("%17s" % "worst ratio" for _ in cols[2:])))
    print("%-38s  (a ratio: zinc's distance from DeepSpeed over DeepSpeed's from itself, per tensor; bound: the"
          " scenario's factor)" % "")
    fails, skipped, memrows, resrows = [], 0, [], []
    results = {}   # name: (zinc's, DeepSpeed's, DeepSpeed's second run) where all three ran
    for s in S:
        sdir = os.path.join(a.work, s["name"])
        head = "%-24s %2d %2d %2d %5d " % (s["name"], s["world"], s["stage"], s["ga"], s["steps"])
        try:
            z = zinc_side(a.zinc, sdir, s)
        except SystemExit:
            fails.append("%s: zinc failed" % s["name"])
            print(head + " zinc FAILED")
            continue
        ds, why = ds_result(os.path.join(sdir, "ds"))
        if ds is None:
            skipped += 1
            print(head + " skipped: DeepSpeed: %s" % why)
            continue
        alt, why = ds_result(os.path.join(sdir, "ds_alt"))
        if alt is None:
            fails.append("%s: DeepSpeed's second run failed: %s" % (s["name"], why))
            print(head + " DeepSpeed's second run FAILED: %s" % why)
            continue
        results[s["name"]] = (z, ds, alt)
        d, self_d = distance(z, ds, w0), distance(alt, ds, w0)
        cells, bad = judge(d, self_d, s)
        print(head + " %s  %s (x%g)" % (" ".join(cells), "agree" if not bad else "DIFFER", s["factor"]))
        fails += ["%s: %s" % (s["name"], b) for b in bad]
        mem_path = os.path.join(sdir, "ds", "memory.json")
        if os.path.exists(mem_path):
            with open(mem_path) as f:
                mcells, mbad = memory_check(a.zinc, sdir, s, json.load(f))
        else:
            mcells, mbad = ["DeepSpeed recorded no memory.json"], ["memory: DeepSpeed recorded nothing"]
        memrows.append("%-24s %s  %s" % (s["name"], ", ".join(mcells), "equal" if not mbad else "DIFFER"))
        k = s["ckpt_at"]
        for world, stage in ([(s["world"], s["stage"]), (1, 3) if s["stage"] < 3 else (2, 1)] if k else []):
            # zinc resumes DeepSpeed's checkpoint; held to DeepSpeed's own continuation
            r = zinc_resumes_ds(a.zinc, sdir, s, world, stage)
            cut = lambda x: (x[0][k:], x[1][k:], x[2])
            cells, bad = judge(distance(r, cut(ds), w0), distance(cut(alt), cut(ds), w0), s)
            resrows.append("%-24s W %d stage %d %s  %s (x%g)" % (s["name"], world, stage, " ".join(cells),
                                                                 "agree" if not bad else "DIFFER", s["factor"]))
            fails += ["%s: zinc resuming DeepSpeed's checkpoint at W %d stage %d: %s" % (s["name"], world, stage, b)
                      for b in bad]
        fails += ["%s: %s" % (s["name"], b) for b in mbad]
    print("test-deepspeed: memory, rank 0's bytes by category (after init; hpz_secondary: the first step's"
          " peak): zinc's dry run (zinc plan) against the buffers DeepSpeed allocated (/DS where they differ)")
    print("\n".join(memrows))
    print("test-deepspeed: zinc resuming DeepSpeed's own checkpoint (Z-DSCK-007) of step ckpt_at, at the same and"
          " another world size and stage, against DeepSpeed's load_checkpoint continuation (same columns)")
    print("\n".join(resrows))
    # zinc stepper --peer deepspeed, as a user runs it (Z-DSP-010): a stage-3
    # config passes at the default bounds and fails at a bound below the
    # rounding between the two
    if not a.only or "stepper" in a.only.split(","):
        fails += cli_check(a.zinc, a.work, "stepper", 3, 4, ["--batches", "6"], ["--param-tol", "1e-12"],
                           stepper_verdict)
    if not a.only or "compare" in a.only.split(","):
        # stage 2 with accumulation: the gradients are the ones reduced over micro-steps
        fails += cli_check(a.zinc, a.work, "compare", 2, 2, ["--steps", "4"], ["--atol", "1e-12"], compare_verdict)
    # zinc's checkpoints written as DeepSpeed's and resumed by it (Z-DSCK-009)
    fails += ds_resumes_zinc(a, [s for s in S if s["name"] in results], results, hf0, w0)
    # DeepSpeed's own checkpoints, read by zinc (Z-DSCK)
    import ds_ckpt_check
    fails += ds_ckpt_check.run(a.zinc, a.work, S)
    failed = {f.split(":")[0] for f in fails}
    print("test-deepspeed: %d scenarios, %d agree, %d skipped by DeepSpeed, %d failed (%.0f s)"
          % (len(S), len(S) - skipped - len(failed), skipped, len(failed), time.time() - t0))
    if fails:
        print("test-deepspeed: FAILED\n  " + "\n  ".join(fails))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
