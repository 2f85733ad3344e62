#!/usr/bin/env python3
"""peer_gpt2.py: zinc's GPT-2 against Hugging Face transformers (make
test-peer, ci/test_peer.sh; spec Z-HF-009..011).

  a. zinc trains gpt2-tiny on tests/data/gpl-3.txt (fp32, AdamW with fixed
     lr, weight decay in the Hugging Face Trainer's groups -- none for biases
     and LayerNorm parameters, zinc's GPT-2 default (Z-OPT-020) -- no
     warmup, and "gradient_clipping"
     0: zinc's default is DeepSpeed's 1.0) for STEPS
     steps at stages 0 and 3, world sizes 1 and 4, logging every loss; the
     initial weights come from a 0-step run's checkpoint (global_step0)
     exported with `zinc ckpt consolidate --hf`.
  b. transformers.GPT2LMHeadModel loads that export and trains on the same
     windows (zinc's window rule reimplemented below: sample s starts at
     zn_rng_u64(zn_mix64(seed ^ 0x7E47D0C5), s) mod (n - T)); step k's
     batch is samples k*B .. k*B+B-1, the loss the mean cross-entropy over
     all B*T positions from the logits and the windows' targets, the
     optimizer torch.optim.AdamW with zinc's hyperparameters. Per-step
     losses must agree within LOSS_RTOL relative; the final weights within
     WEIGHT_ATOL (absolute, every element).
  c. the export of a checkpoint trained longer (300 steps, world 2, stage 3)
     loads unchanged (no missing or
     unexpected keys, lm_head tied to wte) and its logits over a window
     equal those `zinc sample --logits` writes within LOGIT_ATOL; zinc
     sample's first greedy tokens are the argmax of transformers' logits.
Prints a summary table; exit status 0 when every check passes.
spec: Z-HF-009 Z-HF-010 Z-HF-011 (and Z-DATA-012, Z-SAMPLE-007, Z-SAMPLE-008 from the other side)"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file as load_np
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402 (tests/ is not a package)

STEPS = 20
T = 32              # --seq-len
B = 16              # global batch (train_batch_size)
SEED = 1234
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01
DATA = "tests/data/gpl-3.txt"
LOSS_RTOL = 1e-5    # per-step loss, relative (the brief's bound)
WEIGHT_ATOL = 2e-5  # final weights, absolute, max over every element (measured 1.5e-6)
LOGIT_ATOL = 2e-5   # logits of the same weights, absolute (measured 1.9e-6)
GREEDY = 40         # greedy tokens compared: past n_positions, so the window slides


def window_start(n, seed, s):
    return peer_common.window_start(n, seed, s, T)


def run(cmd, **kw):
    return peer_common.run(cmd, "peer_gpt2", **kw)


def zinc_train(zinc, work, name, world, stage, steps, lr=LR):
    cfg = {"train_batch_size": B, "train_micro_batch_size_per_gpu": B // world,
           "optimizer": {"type": "AdamW", "params": {"lr": lr, "betas": list(BETAS), "eps": EPS,
                                                     "weight_decay": WD}},
           "gradient_clipping": 0.0, "zero_optimization": {"stage": stage}, "seed": SEED}
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "ds_config.json"), "w") as f:
        json.dump(cfg, f)
    run([zinc, "train", "--config", os.path.join(d, "ds_config.json"), "--model", "gpt2-tiny",
         "--data", "text:" + DATA, "--seq-len", str(T), "--dtype", "fp32", "--world-size", str(world),
         "--steps", str(steps), "--steps-per-print", "0", "--log", os.path.join(d, "log.csv"),
         "--checkpoint-dir", os.path.join(d, "ck")] + (["--checkpoint-interval", str(steps)] if steps else []))
    tag = "global_step%d" % steps
    run([zinc, "ckpt", "consolidate", "--input", os.path.join(d, "ck", tag), "--hf", os.path.join(d, "hf")])
    return d, peer_common.csv_column(os.path.join(d, "log.csv"), "loss") if steps else []


# transformers 5 names the load dtype `dtype`, 4.x `torch_dtype`
DTYPE_KW = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def load_hf(path, dtype=torch.float32):
    model, info = GPT2LMHeadModel.from_pretrained(path, output_loading_info=True, **{DTYPE_KW: dtype})
    bad = {k: v for k, v in info.items() if v and not (k == "missing_keys" and set(v) <= {"lm_head.weight"})}
    if bad:
        sys.exit("peer_gpt2: %s did not load cleanly: %s" % (path, bad))
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        sys.exit("peer_gpt2: %s: lm_head.weight is not tied to transformer.wte.weight" % path)
    return model


def torch_train(hf0, tokens):
    torch.manual_seed(0)
    model = load_hf(hf0)
    model.train()   # every dropout is 0 in the exported config
    # the Trainer's groups (get_decay_parameter_names): no decay for biases
    # and LayerNorm parameters; the tied lm_head.weight is wte, listed once
    named = list(model.named_parameters())
    decay = [p for n, p in named if "bias" not in n and ".ln_" not in n]
    rest = [p for n, p in named if "bias" in n or ".ln_" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    n = len(tokens)
    losses = []
    for step in range(STEPS):
        starts = [window_start(n, SEED, step * B + b) for b in range(B)]
        win = torch.tensor(np.stack([tokens[s:s + T + 1] for s in starts]).astype(np.int64))
        x, y = win[:, :T], win[:, 1:]
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("--work", default="build/peer")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    os.makedirs(a.work, exist_ok=True)
    tokens = np.frombuffer(open(DATA, "rb").read(), dtype=np.uint8)
    fails = []

    # a. the initial weights and zinc's runs
    d0, _ = zinc_train(a.zinc, a.work, "init", 1, 0, 0)
    hf0 = os.path.join(d0, "hf")
    cfg = GPT2Config.from_pretrained(hf0)
    want = dict(model_type="gpt2", n_layer=2, n_head=2, n_embd=32, vocab_size=256, n_positions=32,
                activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    for k, v in want.items():
        if getattr(cfg, k) != v:
            fails.append("config.json %s = %r, expected %r" % (k, getattr(cfg, k), v))
    runs = {}
    for world in (1, 4):
        for stage in (0, 3):
            runs[(world, stage)] = zinc_train(a.zinc, a.work, "w%d_s%d" % (world, stage), world, stage, STEPS)

    # b. transformers on the same windows
    model, tl = torch_train(hf0, tokens)
    final = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    print("\npeer_gpt2: zinc (gpt2-tiny, fp32, AdamW lr %g wd %g, B=%d, T=%d) vs transformers %s / torch %s"
          % (LR, WD, B, T, transformers.__version__, torch.__version__))
    print("%-14s %12s %12s %12s %14s %14s" % ("run", "loss[1]", "loss[%d]" % STEPS, "max rel dloss",
                                              "max |dW|", "rel ||dW||"))
    print("%-14s %12.6f %12.6f %12s %14s %14s" % ("transformers", tl[0], tl[-1], "-", "-", "-"))
    for (world, stage), (d, zl) in sorted(runs.items()):
        name = "zinc w%d s%d" % (world, stage)
        if len(zl) != STEPS:
            fails.append("%s: %d losses logged, expected %d" % (name, len(zl), STEPS))
            continue
        rel = max(abs(z - t) / abs(t) for z, t in zip(zl, tl))
        zw = load_np(os.path.join(d, "hf", "model.safetensors"))
        maxd, num, den = 0.0, 0.0, 0.0
        for k, v in zw.items():
            diff = v.astype(np.float64) - final[k].astype(np.float64)
            maxd = max(maxd, float(np.abs(diff).max()))
            num += float((diff ** 2).sum())
            den += float((final[k].astype(np.float64) ** 2).sum())
        missing = set(final) - set(zw) - {"lm_head.weight"}
        if missing:
            fails.append("%s: export lacks %s" % (name, sorted(missing)))
        print("%-14s %12.6f %12.6f %12.3g %14.3g %14.3g" % (name, zl[0], zl[-1], rel, maxd, (num / den) ** 0.5))
        if rel > LOSS_RTOL:
            fails.append("%s: per-step loss differs by %.3g relative (bound %g)" % (name, rel, LOSS_RTOL))
        if maxd > WEIGHT_ATOL:
            fails.append("%s: final weights differ by %.3g (bound %g)" % (name, maxd, WEIGHT_ATOL))

    # c. the trained export in transformers vs zinc's own forward (zinc sample)
    d, _ = zinc_train(a.zinc, a.work, "long", 2, 3, 300, lr=3e-3)
    hf = load_hf(os.path.join(d, "hf"))
    hf.eval()
    s0 = window_start(len(tokens), SEED, 0)
    prompt = bytes(tokens[s0:s0 + T])
    lpath = os.path.join(a.work, "logits.safetensors")
    out = run([a.zinc, "sample", "--checkpoint-dir", os.path.join(d, "ck"), "--prompt", prompt,
               "--max-new-tokens", str(GREEDY), "--logits", lpath])
    zlog = load_np(lpath)["logits"]
    with torch.no_grad():
        ids = torch.tensor(np.frombuffer(prompt, dtype=np.uint8).astype(np.int64))[None]
        hlog = hf(input_ids=ids).logits[0].numpy()
        # the greedy continuation in transformers: window of the last T tokens
        seq = list(ids[0].tolist())
        for _ in range(GREEDY):
            lg = hf(input_ids=torch.tensor([seq[-T:]])).logits[0, -1].numpy()
            seq.append(int(np.argmax(lg)))   # numpy's argmax: the first maximum, as zinc's
    dlog = float(np.abs(zlog.astype(np.float64) - hlog).max())
    zgen = list(out.rstrip(b"\n")[len(prompt):])
    print("%-14s max |dlogits| %.3g over [%d, %d]; %d greedy tokens equal: %s (%r)"
          % ("logits", dlog, zlog.shape[0], zlog.shape[1], GREEDY, zgen == seq[T:], bytes(zgen)))
    if zlog.shape != hlog.shape or dlog > LOGIT_ATOL:
        fails.append("logits differ by %.3g (bound %g)" % (dlog, LOGIT_ATOL))
    if zgen != seq[T:]:
        fails.append("zinc sample's greedy tokens %s differ from transformers' argmax %s" % (zgen, seq[T:]))
    # the 16-bit exports are the fp32 one rounded (torch's round-to-nearest-even)
    for dt, tdt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        out16 = os.path.join(d, "hf_" + dt)
        run([a.zinc, "ckpt", "consolidate", "--input", os.path.join(d, "ck", "global_step300"),
             "--hf", out16, "--dtype", dt])
        m16 = load_hf(out16, "auto")   # the dtype config.json names
        ok = m16.dtype == tdt and all(torch.equal(v, hf.state_dict()[k].to(tdt)) for k, v in m16.state_dict().items()
                                      if k in hf.state_dict() and not k.endswith(".attn.bias"))
        print("%-14s loads as %s, every tensor the fp32 export rounded: %s" % ("export " + dt, m16.dtype, ok))
        if not ok:
            fails.append("the %s export is not the fp32 one rounded to %s" % (dt, tdt))
    if fails:
        print("\npeer_gpt2: FAILED\n  " + "\n  ".join(fails))
        return 1
    print("\npeer_gpt2: PASSED (loss within %g relative, weights within %g, logits within %g)"
          % (LOSS_RTOL, WEIGHT_ATOL, LOGIT_ATOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
