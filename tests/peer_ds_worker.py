"""peer_ds_worker.py: DeepSpeed's side of `make test-deepspeed` (run by
tests/peer_deepspeed.py under torchrun: one process per rank, gloo, DeepSpeed's
CPU accelerator). Usage: torchrun --nproc-per-node W peer_ds_worker.py JOBS.json

JOBS.json is a list of jobs, each one scenario trained by DeepSpeed:
  name, config (the ds_config file zinc reads too), hf0 (zinc's exported
  step-0 weights), data, seed, T, steps, threads, out (a folder), and
  optionally ckpt_at (save there, rebuild the engine, load, go on), load_dir
  (start from that checkpoint, zinc's to-deepspeed output, at its step;
  resave_dir: save it again there before training on) and
  record (OUT/record.safetensors: every step K's fp32 masters as K/NAME, for
  zinc stepper --peer deepspeed) and record_grads (also its gradient, reduced,
  before clipping, as K/grad/NAME, for zinc compare --peer deepspeed).
For each job rank 0 writes OUT/losses.json ({"loss": [...], "lr": [...]}: the
step's loss averaged over every rank and micro-batch, and the lr it ran with)
OUT/state.safetensors (per parameter NAME: NAME/fp32, NAME/exp_avg,
NAME/exp_avg_sq, from deepspeed.utils.safe_get_full_*) and OUT/memory.json
(rank 0's bytes of the buffers zinc's memory categories stand for), or OUT/error.txt with
DeepSpeed's own last error line where DeepSpeed cannot run the scenario.
The windows are zinc's (Z-DATA-012): micro-batch m of step k goes to rank
m mod W at micro-step m div W (tests/peer_common.py)."""
import json
import os
import sys
import traceback

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402


def param_groups(model, wd):
    """The HF Trainer's groups (get_decay_parameter_names), zinc's GPT-2
    default (Z-OPT-020): no decay for biases and LayerNorm parameters."""
    named = list(model.named_parameters())   # the tied lm_head.weight is wte, listed once
    decay = [p for n, p in named if "bias" not in n and ".ln_" not in n]
    rest = [p for n, p in named if "bias" in n or ".ln_" in n]
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


def build(job, cfg):
    import deepspeed
    from transformers import GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained(job["hf0"], dtype=torch.float32) \
        if _dtype_kw() == "dtype" else GPT2LMHeadModel.from_pretrained(job["hf0"], torch_dtype=torch.float32)
    model.train()   # every dropout is 0 in zinc's exported config.json
    wd = cfg.get("optimizer", {}).get("params", {}).get("weight_decay", 0.0)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=param_groups(model, wd),
                                           config=job["config"])
    watch_ipg(engine)
    return engine


def nbytes(t):
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def ipg_bytes(opt):
    """The bytes of the optimizer's IPG buffers now (stage 1/2: a list per
    bucket, stage 3: one tensor)."""
    tot = 0
    for bucket in getattr(opt, "ipg_buckets", {}).values():
        buf = bucket.buffer
        tot += sum(nbytes(b) for b in buf) if isinstance(buf, list) else nbytes(buf)
    return tot


def watch_ipg(engine):
    """Keep the most IPG bytes the optimizer ever holds: stage 1/2 allocate
    them in setup_buckets (each backward) and free them after the reduction,
    stage 3 in its constructor."""
    opt = engine.optimizer
    opt._zinc_ipg_peak = ipg_bytes(opt)
    if hasattr(opt, "setup_buckets"):
        orig = opt.setup_buckets

        def setup_buckets(*a, **k):
            r = orig(*a, **k)
            opt._zinc_ipg_peak = max(opt._zinc_ipg_peak, ipg_bytes(opt))
            return r
        opt.setup_buckets = setup_buckets


def secondary_bytes(engine):
    """hpZ's secondary partitions now: made as forward gathers each
    parameter, dropped after the step (stage3.py _post_step)."""
    return sum(nbytes(getattr(p, "ds_secondary_tensor", None)) for p in engine.module.parameters())


def memory(engine, secondary):
    """Rank's bytes by zinc's categories, as DeepSpeed holds them: its IPG
    buffers (buckets), hpZ's secondary partitions (secondary: their bytes
    before the first step), the fp32 master partition and Adam's moments."""
    opt = engine.optimizer
    mem = {"buckets": max(getattr(opt, "_zinc_ipg_peak", 0), ipg_bytes(opt)), "hpz_secondary": secondary}
    masters = getattr(opt, "single_partition_of_fp32_groups", None)
    if masters is None:
        masters = getattr(opt, "fp32_partitioned_groups_flat", None)
    if masters is not None:
        mem["master32"] = sum(nbytes(t) for t in masters)
        inner = opt.optimizer
        for k in ("exp_avg", "exp_avg_sq"):
            mem[k] = sum(nbytes(inner.state[t][k]) for t in masters if t in inner.state)
        # stage 3 would step an fp32 partition itself (no copy) where its
        # device equals the optimizer's (Z-MEM-010)
        parts = getattr(opt, "fp16_partitioned_groups_flat", None) or []
        mem["master_aliased"] = int(any(m.data_ptr() == q.data_ptr() for m, q in zip(masters, parts)))
    return mem


def _dtype_kw():
    import transformers
    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def full_state(engine, p, masters_only=False):
    """fp32 master and Adam moments of p, whole (collective at stage 3); stage
    0 in fp32 keeps them in the parameter and the torch-style optimizer state
    (no hp mapping). masters_only: the master alone."""
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
    w = safe_get_full_fp32_param(p)
    if masters_only:
        return (w if w is not None else p).detach().float().cpu().numpy().copy()
    m = safe_get_full_optimizer_state(p, "exp_avg")
    v = safe_get_full_optimizer_state(p, "exp_avg_sq")
    if w is None or m is None or v is None:
        opt = engine.optimizer
        while not hasattr(opt, "state") or p not in getattr(opt, "state", {}):
            if not hasattr(opt, "optimizer"):
                raise RuntimeError("no optimizer state found for a parameter")
            opt = opt.optimizer
        st = opt.state[p]
        w, m, v = p.detach(), st["exp_avg"], st["exp_avg_sq"]
    return [t.detach().float().cpu().numpy().copy() for t in (w, m, v)]


def full_grad(p):
    """p's whole gradient after backward (safe_get_full_grad; stage 0 keeps
    it in p.grad)."""
    from deepspeed.utils import safe_get_full_grad
    g = safe_get_full_grad(p)
    if g is None:
        g = p.grad
    if g is None:
        raise RuntimeError("no gradient found for a parameter")
    return g.detach().float().cpu().numpy().copy()


def train(job, rank, world, tokens):
    with open(job["config"]) as f:
        cfg = json.load(f)
    torch.set_num_threads(job["threads"])
    T, seed, steps = job["T"], job["seed"], job["steps"]
    engine = build(job, cfg)
    mb = engine.train_micro_batch_size_per_gpu()
    ga = engine.gradient_accumulation_steps()
    B = engine.train_batch_size()
    n = len(tokens)
    losses, lrs, record = [], [], {}
    start, secondary = 0, 0
    if job.get("load_dir"):   # a checkpoint zinc wrote (zinc ckpt to-deepspeed), resumed by DeepSpeed's own load
        path, _ = engine.load_checkpoint(job["load_dir"])
        if path is None:
            raise RuntimeError("load_checkpoint found nothing in %s" % job["load_dir"])
        start = engine.global_steps
        if job.get("resave_dir"):   # saved again at once: the round trip the harness compares bit for bit
            engine.save_checkpoint(job["resave_dir"], tag="global_step%d" % start)
    for k in range(start, steps):
        if job.get("ckpt_at") == k:
            # DeepSpeed's own save, a fresh engine from the step-0 weights, and its load
            engine.save_checkpoint(job["ckpt_dir"], tag="global_step%d" % k)
            del engine
            engine = build(job, cfg)
            path, _ = engine.load_checkpoint(job["ckpt_dir"], tag="global_step%d" % k)
            if path is None:
                raise RuntimeError("load_checkpoint found nothing in %s" % job["ckpt_dir"])
        lrs.append(float(engine.get_lr()[0]))
        tot = 0.0
        for micro in range(ga):
            first = peer_common.micro_first_sample(k, micro, rank, world, mb, B)
            starts = [peer_common.window_start(n, seed, first + b, T) for b in range(mb)]
            win = torch.tensor(np.stack([tokens[s:s + T + 1] for s in starts]).astype(np.int64))
            logits = engine(input_ids=win[:, :T]).logits
            # the loss in fp32 from the model's logits, as zinc's softmax_xent
            # and transformers' ForCausalLMLoss (logits.float())
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1))
            engine.backward(loss)
            if k == 0 and micro == ga - 1:
                secondary = secondary_bytes(engine)
            if job.get("record_grads") and micro == ga - 1:
                # the step's gradient, reduced and averaged, before clipping
                for name, p in engine.module.named_parameters():
                    g = full_grad(p)   # collective at stage 3: every rank calls it
                    if rank == 0:
                        record["%d/grad/%s" % (k, name)] = g
            engine.step()
            tot += loss.item()
        t = torch.tensor([tot / ga], dtype=torch.float64)
        dist.all_reduce(t)
        losses.append(t.item() / world)
        if job.get("record"):   # zinc stepper --peer: every step's fp32 masters
            for name, p in engine.module.named_parameters():
                w = full_state(engine, p, masters_only=True)
                if rank == 0:
                    record["%d/%s" % (k, name)] = w
    if job.get("final_dir"):   # the checkpoint zinc's DeepSpeed reader is tested on (Z-DSCK)
        engine.save_checkpoint(job["final_dir"], tag="global_step%d" % steps)
    peer_common.link_optimizer_state(engine)
    state = {}
    for name, p in engine.module.named_parameters():
        w, m, v = full_state(engine, p)   # collective at stage 3: every rank calls it
        state[name + "/fp32"], state[name + "/exp_avg"], state[name + "/exp_avg_sq"] = w, m, v
    mem = memory(engine, secondary)
    if rank == 0:
        with open(os.path.join(job["out"], "memory.json"), "w") as f:
            json.dump(mem, f)
        from safetensors.numpy import save_file
        save_file(state, os.path.join(job["out"], "state.safetensors"))
        if record:
            save_file(record, os.path.join(job["out"], "record.safetensors"))
        with open(os.path.join(job["out"], "losses.json"), "w") as f:
            json.dump({"loss": losses, "lr": lrs}, f)
    del engine


def main():
    import deepspeed
    deepspeed.utils.logger.setLevel("WARNING")
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    data = None
    for job in jobs:
        if data != job["data"]:
            data = job["data"]
            tokens = np.frombuffer(open(data, "rb").read(), dtype=np.uint8)
        os.makedirs(job["out"], exist_ok=True)
        # DeepSpeed 0.19.8 keeps hpZ's process group in a module global, and
        # stage3.py takes any group it finds there even where
        # zero_hpz_partition_size is 1: an engine built after an hpZ one in
        # the same process would run hpZ (its secondaries showed it). Each
        # job starts without it, as a fresh process would.
        from deepspeed.utils import groups
        groups._ZERO_PARAM_INTRA_PARALLEL_GROUP = None
        try:
            train(job, rank, world, tokens)
        except Exception as e:  # noqa: BLE001 (DeepSpeed's own refusal is the scenario's result)
            line = ("%s: %s" % (type(e).__name__, e)).strip().split("\n")[0]
            if rank == 0:
                with open(os.path.join(job["out"], "error.txt"), "w") as f:
                    f.write(line + "\n")
                traceback.print_exc()
        dist.barrier()
    dist.destroy_process_group()
    # Every file is written and closed. The interpreter's own teardown is
    # skipped: once in a while (2026-11-29, a loaded CI machine) a rank
    # aborted there with "terminate called without an active exception" (a
    # C++ thread of the CPU backend still joinable at exit), after its work
    # was done, and torchrun then failed the whole run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
