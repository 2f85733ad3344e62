"""ds_write_check.py: zinc's checkpoints written as DeepSpeed's (`zinc ckpt
to-deepspeed`, spec Z-DSCK-009), part of `make test-deepspeed`.

For each scenario named below, zinc's own checkpoint is written as a
DeepSpeed folder, and DeepSpeed (a fresh engine from the same config file,
the Trainer's groups, the same world size) resumes it with its own
load_checkpoint and saves it again at once:

- the round trip: every file DeepSpeed saves equals the one zinc wrote,
  value for value (every tensor bit for bit, the loss scaler's attributes,
  the optimizer's groups, the counters, the layout's paddings and mappings);
- for the scenarios that checkpoint midway (ckpt_at), DeepSpeed trains on
  from zinc's checkpoint to the end, held to zinc's own continuation within
  the scenario's bounds (peer_deepspeed.judge, against DeepSpeed's distance
  from itself over the same steps)."""
import os
import shutil

import peer_common

# the final checkpoints written back (one per layout and scaler): stage 1,
# stage 2 in bf16 and in fp16 (a dynamic loss scaler), stage 3 in bf16,
# OneCycle's cycled betas; and the midway ones of the resume scenarios
ROUND_TRIP = ("s1-w2-clip", "s2-w2-bf16", "s2-w2-fp16", "s3-w2-bf16-clip", "s1-w4-onecycle-overlap")


def prepare(zinc, work, S, make_job):
    """Writes the folders and returns the DeepSpeed jobs by world size:
    {world: [job]} (the worker's load_dir / resave_dir jobs; make_job(s,
    sdir) gives a scenario's plain job)."""
    by_world = {}
    for s in S:
        if s["name"] not in ROUND_TRIP and not s["ckpt_at"]:
            continue
        sdir = os.path.join(work, s["name"])
        step = s["ckpt_at"] or s["steps"]
        out = os.path.join(sdir, "zinc_to_ds")
        shutil.rmtree(out, ignore_errors=True)
        peer_common.run([zinc, "ckpt", "to-deepspeed", "--input", os.path.join(sdir, "zinc_ck", "global_step%d" % step),
                         "--output-folder", out], "test-deepspeed")
        res = os.path.join(sdir, "ds_resaved")
        shutil.rmtree(res, ignore_errors=True)
        job = dict(make_job(s, sdir), name=s["name"] + "/from-zinc", ckpt_at=None, final_dir=None, load_dir=out,
                   resave_dir=res)
        shutil.rmtree(job["out"], ignore_errors=True)
        by_world.setdefault(s["world"], []).append(job)
    return by_world


def _same(a, b, where):
    """'' when a (zinc's) and b (DeepSpeed's) hold the same values, else
    the first difference by its path."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return "%s: a tensor on one side only" % where
        if a.dtype != b.dtype or a.shape != b.shape:
            return "%s: %s %s against DeepSpeed's %s %s" % (where, a.dtype, tuple(a.shape), b.dtype, tuple(b.shape))
        ia, ib = a.contiguous().view(-1), b.contiguous().view(-1)
        if ia.numel() and not torch.equal(ia.view(torch.uint8), ib.view(torch.uint8)):
            return "%s: the bits differ" % where
        return ""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return "%s: keys %s against DeepSpeed's %s" % (where, sorted(map(str, a)), sorted(map(str, b)))
        for k in a:
            d = _same(a[k], b[k], "%s.%s" % (where, k))
            if d:
                return d
        return ""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return "%s: %d items against DeepSpeed's %d" % (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = _same(x, y, "%s[%d]" % (where, i))
            if d:
                return d
        return ""
    if hasattr(a, "__dict__") and not isinstance(a, type) and type(a).__name__ != "ZeroStageEnum":
        if type(a) is not type(b):
            return "%s: %s against DeepSpeed's %s" % (where, type(a).__name__, type(b).__name__)
        return _same(vars(a), vars(b), where)
    if isinstance(a, float) or isinstance(b, float):   # 65536 and 65536.0 are one scale
        return "" if float(a) == float(b) else "%s: %r against DeepSpeed's %r" % (where, a, b)
    return "" if a == b else "%s: %r against DeepSpeed's %r" % (where, a, b)


def round_trip(zdir, ddir):
    """'' when every .pt file of DeepSpeed's save (ddir) equals zinc's (zdir)."""
    import torch
    tag = open(os.path.join(zdir, "latest")).read().strip()
    zt, dt = os.path.join(zdir, tag), os.path.join(ddir, tag)
    if not os.path.isdir(dt):
        return "DeepSpeed saved no %s" % dt
    zf = sorted(f for f in os.listdir(zt) if f.endswith(".pt"))
    df = sorted(f for f in os.listdir(dt) if f.endswith(".pt"))
    if zf != df:
        return "files %s against DeepSpeed's %s" % (zf, df)
    for f in zf:
        a = torch.load(os.path.join(zt, f), map_location="cpu", weights_only=False)
        b = torch.load(os.path.join(dt, f), map_location="cpu", weights_only=False)
        d = _same(a, b, f)
        if d:
            return d
    return ""
