#!/usr/bin/env python3
"""diff_deepspeed.py: differential tests of zinc against DeepSpeed's own
Python, side by side on random inputs (make test-deepspeed). DeepSpeed's plain-Python parts run here, zinc's C
through tests/ds_probe (one process, one JSON line per case):

  lr      every schedule (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle,
          LRRangeTest) with random parameters: lr (and OneCycle's beta1) at
          every iteration t = -1 .. STEPS-1, bit for bit; a configuration one
          side refuses must be refused by the other.
  scaler  fp16's dynamic loss scaler (deepspeed.runtime.fp16.loss_scaler)
          with random fp16 sections on random overflow sequences: the scale
          and hysteresis after every update, and the update that raises at
          the minimum scale, equal.
  batch   the batch triad (DeepSpeedConfig's _configure_train_batch_size) for
          random subsets of train_batch_size, train_micro_batch_size_per_gpu
          and gradient_accumulation_steps and random world sizes: accepted or
          refused alike, the same inferred values.
  zero    zero_optimization sections with one field mutated to a value of any
          JSON kind: accepted or refused alike (pydantic's coercions).
  estimate  estimate_zero2/3_model_states_mem_needs on random parameter
          counts, largest layers, GPUs, nodes, offload and buffer factors:
          the same bytes.
A difference is a defect in zinc, or in DeepSpeed with its evidence in the
spec (a deepspeed_quirks entry); never a tolerance. Prints one line per part
and the first differing cases; exit 1 on any difference.

spec: Z-DSP-005 Z-DSP-006 Z-DSP-007 Z-DSP-008 Z-DSP-009 Z-CFG-051

Usage: diff_deepspeed.py PROBE [--cases N] [--seed S]"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys

STEPS = 10000


class Probe:
    """tests/ds_probe: one request line in, one answer line out."""

    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def ask(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("diff_deepspeed: ds_probe ended without an answer to %s" % json.dumps(req)[:200])
        return json.loads(line)


# ---------------------------------------------------------------- lr

def rand_sched(rng):
    kind = rng.choice(["WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"])
    lr = rng.choice([1e-3, 3e-4, 10 ** rng.uniform(-5, -2)])
    wn = rng.choice([1, 2, 3, rng.randint(1, 100), rng.randint(100, 3000)])
    if kind in ("WarmupLR", "WarmupDecayLR"):
        p = {"warmup_min_lr": rng.choice([0.0, 10 ** rng.uniform(-6, -3)]),
             "warmup_max_lr": 10 ** rng.uniform(-4, -2), "warmup_num_steps": wn,
             "warmup_type": rng.choice(["log", "linear"])}
        if kind == "WarmupDecayLR":
            p["total_num_steps"] = rng.randint(max(2, wn), max(2, wn) + rng.choice([1, 50, 5000, 12000]))
    elif kind == "WarmupCosineLR":
        p = {"total_num_steps": rng.randint(max(2, wn), max(2, wn) + rng.choice([1, 50, 5000, 12000])),
             "warmup_min_ratio": rng.uniform(0, 1), "warmup_num_steps": wn, "cos_min_ratio": rng.uniform(0, 1),
             "warmup_type": rng.choice(["log", "linear"])}
    elif kind == "OneCycle":
        lo = 10 ** rng.uniform(-5, -3)
        p = {"cycle_min_lr": lo, "cycle_max_lr": lo * rng.uniform(1, 30),
             "decay_lr_rate": rng.choice([0.0, rng.uniform(0, 0.1)]),
             "cycle_first_step_size": rng.randint(1, 3000),
             "cycle_first_stair_count": rng.choice([0, rng.randint(1, 6)]),
             "decay_step_size": rng.choice([0, rng.randint(1, 500)]),
             "cycle_momentum": rng.random() < 0.5, "cycle_min_mom": rng.uniform(0.8, 0.9),
             "cycle_max_mom": rng.uniform(0.9, 0.99), "decay_mom_rate": rng.choice([0.0, rng.uniform(0, 0.1)])}
        if rng.random() < 0.5:
            p["cycle_second_step_size"] = rng.randint(1, 3000)
            p["cycle_second_stair_count"] = rng.choice([0, rng.randint(1, 6)])
    else:
        p = {"lr_range_test_min_lr": 10 ** rng.uniform(-6, -3), "lr_range_test_step_size": rng.randint(1, 1000),
             "lr_range_test_step_rate": rng.uniform(0.1, 10), "lr_range_test_staircase": rng.random() < 0.5}
    cfg = {"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": lr, "betas": [0.9, 0.999]}},
           "scheduler": {"type": kind, "params": p}}
    return cfg


def ds_lrs(cfg, n):
    import torch
    from deepspeed.runtime import lr_schedules
    op = cfg["optimizer"]["params"]
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=op["lr"], betas=tuple(op["betas"]))
    try:
        s = getattr(lr_schedules, cfg["scheduler"]["type"])(opt, **cfg["scheduler"]["params"])
    except Exception as e:  # noqa: BLE001 (a refusal is the answer)
        return None, "%s: %s" % (type(e).__name__, e)
    g = opt.param_groups[0]
    lrs, b1 = [g["lr"]], [g["betas"][0]]
    for _ in range(n):
        s.step()
        lrs.append(g["lr"])
        b1.append(g["betas"][0])
    return (lrs, b1), None


def part_lr(probe, rng, cases):
    bad = []
    for i in range(cases):
        cfg = rand_sched(rng)
        ds, why = ds_lrs(cfg, STEPS)
        z = probe.ask({"op": "lr", "config": json.dumps(cfg), "steps": STEPS})
        if ds is None or "error" in z:
            if (ds is None) != ("error" in z):
                bad.append("lr case %d %s: DeepSpeed %s, zinc %s" % (i, json.dumps(cfg["scheduler"]),
                                                                   "refuses (%s)" % why if ds is None else "accepts",
                                                                   "refuses (%s)" % z.get("error") if "error" in z
                                                                   else "accepts"))
            continue
        for what, zs, dv in (("lr", z["lr"], ds[0]), ("beta1", z["beta1"], ds[1])):
            diff = [t for t, (a, b) in enumerate(zip(zs, dv)) if a != b]
            if diff or len(zs) != len(dv):
                t = diff[0] if diff else min(len(zs), len(dv))
                bad.append("lr case %d %s: %s at t=%d: zinc %r, DeepSpeed %r" % (
                    i, json.dumps(cfg["scheduler"]), what, t - 1, zs[t] if t < len(zs) else None,
                    dv[t] if t < len(dv) else None))
                break
    return bad


# ---------------------------------------------------------------- scaler

def rand_fp16(rng):
    return {"enabled": True, "loss_scale": 0, "initial_scale_power": rng.randint(0, 32),
            "loss_scale_window": rng.choice([1, 2, 3, rng.randint(1, 40), 1000]),
            "hysteresis": rng.randint(1, 5), "consecutive_hysteresis": rng.random() < 0.5,
            "min_loss_scale": rng.choice([1, 1, 2, 2 ** rng.randint(0, 20)])}


def ds_scaler(fp16, overflow):
    import torch
    from deepspeed.runtime.fp16.loss_scaler import CreateLossScaler
    from deepspeed.runtime.precision_config import DeepSpeedFP16Config
    args = DeepSpeedFP16Config(**fp16).dynamic_loss_scale_args()
    s = CreateLossScaler(torch.half, 0, True, args)
    scale, hyst = [], []
    for i, o in enumerate(overflow):
        try:
            s.update_scale(bool(o))
        except Exception:  # noqa: BLE001 (DeepSpeed raises at the minimum scale)
            return scale, hyst, i
        scale.append(float(s.cur_scale))
        hyst.append(float(s.cur_hysteresis))
    return scale, hyst, -1


def part_scaler(probe, rng, cases):
    bad = []
    for i in range(cases):
        fp16 = rand_fp16(rng)
        p = rng.choice([0.02, 0.1, 0.3, 0.6, 0.9])
        overflow = [1 if rng.random() < p else 0 for _ in range(rng.choice([50, 300, 1000]))]
        ds = ds_scaler(fp16, overflow)
        z = probe.ask({"op": "scaler", "config": json.dumps({"train_batch_size": 1, "fp16": fp16}),
                       "overflow": overflow})
        if "error" in z:
            bad.append("scaler case %d %s: zinc refuses: %s" % (i, json.dumps(fp16), z["error"]))
            continue
        zt = (z["scale"], z["hysteresis"], z["error_at"])
        if zt != ds:
            k = next((j for j in range(min(len(zt[0]), len(ds[0])))
                      if zt[0][j] != ds[0][j] or zt[1][j] != ds[1][j]), min(len(zt[0]), len(ds[0])))
            bad.append("scaler case %d %s: first difference at update %d: zinc scale %s hysteresis %s raise@%d, "
                       "DeepSpeed %s %s raise@%d" % (i, json.dumps(fp16), k, zt[0][k:k + 1], zt[1][k:k + 1], zt[2],
                                                    ds[0][k:k + 1], ds[1][k:k + 1], ds[2]))
    return bad


# ---------------------------------------------------------------- batch triad

class FakeMpu:
    """What DeepSpeedConfig asks of an mpu: the data-parallel world size."""

    def __init__(self, w):
        self.w = w

    def get_data_parallel_world_size(self):
        return self.w


def ds_batch(cfg, world):
    from deepspeed.runtime.config import DeepSpeedConfig
    try:
        c = DeepSpeedConfig(json.loads(json.dumps(cfg)), mpu=FakeMpu(world))
    except Exception as e:  # noqa: BLE001 (a refusal is the answer)
        return None, "%s: %s" % (type(e).__name__, str(e).split("\n")[0])
    return (c.train_batch_size, c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps), None


def part_batch(probe, rng, cases):
    bad = []
    for i in range(cases):
        world = rng.choice([1, 2, 3, 4, 8])
        mb, ga = rng.randint(1, 6), rng.randint(1, 4)
        cfg = {}
        if rng.random() < 0.7:
            cfg["train_batch_size"] = mb * ga * world if rng.random() < 0.7 else rng.randint(1, 64)
        if rng.random() < 0.6:
            cfg["train_micro_batch_size_per_gpu"] = mb
        if rng.random() < 0.5:
            cfg["gradient_accumulation_steps"] = ga
        ds, why = ds_batch(cfg, world)
        z = probe.ask({"op": "config", "config": json.dumps(cfg), "world": world})
        zt = (z["train_batch_size"], z["micro_batch"], z["grad_accum"]) if z.get("ok") else None
        if (ds is None) != (zt is None) or (ds and zt != ds):
            bad.append("batch case %d %s world %d: DeepSpeed %s, zinc %s" % (
                i, json.dumps(cfg), world, ds if ds else "refuses (%s)" % why, zt if zt else
                "refuses (%s)" % z.get("error")))
    return bad


# ---------------------------------------------------------------- zero_optimization

# a value of each kind pydantic may coerce or refuse
VALUES = [0, 1, 2, -1, 0.0, 1.0, 0.5, 1e8, 5e8, True, False, "auto", "true", "false", "yes", "0", "1", "abc",
          "5e8", None, [], {}, [1], {"device": "cpu"}]


def zero_fields():
    """(key, kind) of DeepSpeedZeroConfig's fields, by the name users write
    (the alias where there is one); kind: bool, int, or another."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    out = []
    for name, f in DeepSpeedZeroConfig.model_fields.items():
        # the deprecated offload switches: zinc checks at config time what
        # DeepSpeed's engine refuses later (offload needs stage >= 1)
        if name.startswith("cpu_offload"):
            continue
        ann = str(f.annotation)
        kind = "bool" if "bool" in ann else "int" if ann == "<class 'int'>" else "other"
        out.append((f.alias or name, kind))
    return out


def rand_zero(rng, fields):
    """A valid section with a few keys, then one mutation."""
    sec = {"stage": rng.randint(0, 3)}
    for key, kind in rng.sample(fields, 3):
        if kind == "bool":
            sec[key] = rng.random() < 0.5
        elif kind == "int" and key not in ("zero_hpz_partition_size",):
            sec[key] = rng.choice([1, 1000, 500000000])
    sec.pop("offload_param", None)
    sec.pop("offload_optimizer", None)
    what = rng.random()
    if what < 0.85:
        key = rng.choice([k for k, kind in fields if kind in ("bool", "int")] + ["stage"])
        sec[key] = rng.choice(VALUES)
    else:
        sec["no_such_key_%d" % rng.randint(0, 9)] = rng.choice(VALUES)
    return sec


def ds_engine_refuses(z):
    """What DeepSpeed's engine refuses when it builds the optimizer, after
    DeepSpeedConfig accepted the section (z: its parsed zero_config), and
    zinc refuses at config time:
      an odd allgather_bucket_size at stage 1 or 2 (stage_1_and_2.py asserts
      a multiple of nccl_start_alignment_factor, 2 for 16-bit);
      zero_quantized_gradients at stage 3 without reduce_scatter (stage3.py
      asserts reduce_scatter where the all-to-all group exists)."""
    stage = int(z.stage)
    if stage in (1, 2) and z.allgather_bucket_size % 2:
        return "stage_1_and_2.py: allgather_bucket_size must be a multiple of nccl_start_alignment_factor"
    if stage == 3 and z.zero_quantized_gradients and not z.reduce_scatter:
        return "stage3.py: when enable all_to_all_reduce, reduce_scatter should also be enabled"
    return None


def part_zero(probe, rng, cases):
    from deepspeed.runtime.config import DeepSpeedConfig
    fields = zero_fields()
    bad = []
    for i in range(cases):
        sec = rand_zero(rng, fields)
        # gradient_clipping 0: compute_grad_norm false needs it, a rule
        # DeepSpeed's engine checks later and zinc at config time
        cfg = {"train_batch_size": 1, "gradient_clipping": 0, "zero_optimization": sec}
        try:
            why = ds_engine_refuses(DeepSpeedConfig(json.loads(json.dumps(cfg)), mpu=FakeMpu(1)).zero_config)
            ds = why is None
        except Exception as e:  # noqa: BLE001 (a refusal is the answer)
            ds, why = False, "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:160])
        z = probe.ask({"op": "config", "config": json.dumps(cfg), "world": 1})
        if ds != bool(z.get("ok")):
            bad.append("zero case %d %s: DeepSpeed %s, zinc %s" % (
                i, json.dumps(sec), "accepts" if ds else "refuses (%s)" % why,
                "accepts" if z.get("ok") else "refuses (%s)" % z.get("error")))
    return bad


# ---------------------------------------------------------------- estimators

def part_estimate(probe, rng, cases):
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    bad = []
    for i in range(cases):
        params = rng.choice([rng.randint(1, 10 ** 6), rng.randint(10 ** 6, 10 ** 12), int(10 ** rng.uniform(0, 13))])
        largest = rng.randint(1, params)
        gpus, nodes = rng.choice([1, 2, 3, 4, 8, 16]), rng.choice([1, 2, 3, 4, 7, 64, 1000])
        off, offp, zi = rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.5
        bf = rng.choice([1.0, 1.5, 2.0, rng.uniform(1, 3)])
        stage = rng.choice([2, 3])
        if stage == 2:
            ds = estimate_zero2_model_states_mem_needs(params, gpus, nodes, off, bf)
        else:
            ds = estimate_zero3_model_states_mem_needs(params, largest, gpus, nodes, off, offp, zi, bf)[:2]
        z = probe.ask({"op": "estimate", "stage": stage, "params": params, "largest": largest, "gpus": gpus,
                       "nodes": nodes, "cpu_offload": int(off), "cpu_offload_params": int(offp), "zero_init": int(zi),
                       "buffer_factor": bf})
        if (z["cpu"], z["gpu"]) != tuple(ds):
            bad.append("estimate case %d stage %d params %d largest %d gpus %d nodes %d offload %d/%d zero_init %d "
                       "factor %r: zinc (%d, %d), DeepSpeed %s" % (i, stage, params, largest, gpus, nodes, off, offp, zi,
                                                                  bf, z["cpu"], z["gpu"], ds))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("probe")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261128)
    a = ap.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    import deepspeed.utils
    deepspeed.utils.logger.setLevel("ERROR")
    # DeepSpeedConfig and the scaler ask deepspeed.comm for the rank: a
    # process group of one, on loopback
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    deepspeed.init_distributed(dist_backend="gloo")
    if True:
        probe = Probe(a.probe)
        fails = 0
        parts = (("lr", part_lr, max(1, a.cases // 5), "random schedules x %d iterations" % STEPS),
                 ("scaler", part_scaler, a.cases, "random fp16 sections x overflow sequences"),
                 ("batch", part_batch, a.cases, "random batch triads x world sizes"),
                 ("zero", part_zero, a.cases // 4, "zero_optimization sections, one key mutated"),
                 ("estimate", part_estimate, a.cases, "memory estimators, random shapes and clusters"))
        for name, fn, n, what in parts:
            bad = fn(probe, random.Random("%d-%s" % (a.seed, name)), n)
            print("diff-deepspeed %-7s %5d cases (%s): %s" % (name, n, what,
                                                             "all equal" if not bad else "%d DIFFER" % len(bad)))
            for b in bad[:5]:
                print("  " + b)
            fails += len(bad)
        deepspeed.comm.destroy_process_group()
    print("diff-deepspeed: deepspeed %s: %s" % (deepspeed.__version__, "PASSED" if not fails else "FAILED"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
