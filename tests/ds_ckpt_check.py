"""ds_ckpt_check.py: zinc reading DeepSpeed's own checkpoints (spec
Z-DSCK-005, Z-DSCK-006, Z-DSCK-008), part of `make test-deepspeed`. Every
folder the DeepSpeed runs saved at their end (stages 1-3, fp32, bf16 and
fp16, worlds 1-4):

- `zinc ckpt inspect` says OK;
- `zinc ckpt consolidate --output` is, tensor for tensor and bit for bit,
  what DeepSpeed's get_fp32_state_dict_from_zero_checkpoint returns, and
  `--dtype bf16` is that rounded by torch's .to(torch.bfloat16);
- `--hf DIR` leaves out the shared (tied) names, as save_pretrained does.

DeepSpeed's universal checkpoint of a stage-2 folder (ds_to_universal)
consolidates to the same bits. On copies of one stage-3 folder, a missing
rank file, a truncated one and a flipped byte in a storage each end in exit
1 naming the file."""
import contextlib
import os
import shutil
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file


def zinc(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def reference(folder, tag):
    """DeepSpeed's own consolidation, as numpy arrays (fp32 and bf16 bits)."""
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        sd = get_fp32_state_dict_from_zero_checkpoint(folder, tag)
    fp32 = {k: v.contiguous().detach().numpy().copy() for k, v in sd.items()}
    bf16 = {k: v.contiguous().detach().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
            for k, v in sd.items()}
    return fp32, bf16


def same(want, got):
    """'' when every tensor is bitwise equal, else what differs."""
    if set(want) != set(got):
        return "names differ: %s" % sorted(set(want) ^ set(got))[:4]
    for k, a in want.items():
        b = got[k]
        if a.shape != b.shape or a.tobytes() != b.tobytes():
            return "%s differs (%s vs %s)" % (k, a.shape, b.shape)
    return ""


def bf16_bits(path):
    """A bf16 safetensors file's tensors as uint16 bit patterns (numpy has no bf16)."""
    import json
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        buf = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(buf[b:e], dtype=np.uint16).reshape(v["shape"])
    return out


def check_folder(zn, folder, tag, out):
    """[] when zinc reads the folder as DeepSpeed does, else the failures."""
    bad = []
    path = os.path.join(folder, tag)
    rc, text = zinc([zn, "ckpt", "inspect", path])
    if rc != 0 or not text.rstrip().endswith(": OK"):
        bad.append("inspect: exit %d: %s" % (rc, text.strip().splitlines()[-1:]))
    fp32, bf16 = reference(folder, tag)
    for dt, want in (("fp32", fp32), ("bf16", bf16)):
        f = os.path.join(out, "zinc_%s.safetensors" % dt)
        rc, text = zinc([zn, "ckpt", "consolidate", "--input", folder, "--output", f, "--dtype", dt])
        if rc != 0:
            bad.append("consolidate %s: exit %d: %s" % (dt, rc, text.strip()))
            continue
        why = same(want, load_file(f) if dt == "fp32" else bf16_bits(f))
        if why:
            bad.append("consolidate %s: %s" % (dt, why))
    hf = os.path.join(out, "zinc_hf")
    rc, text = zinc([zn, "ckpt", "consolidate", "--input", path, "--hf", hf])
    got = load_file(os.path.join(hf, "model.safetensors")) if rc == 0 else {}
    import torch
    shared = torch.load(os.path.join(path, "mp_rank_00_model_states.pt" if os.path.exists(
        os.path.join(path, "mp_rank_00_model_states.pt")) else "zero_pp_rank_0_mp_rank_00_model_states.pt"),
        weights_only=True)["shared_params"]
    if rc != 0 or set(got) != set(fp32) - set(shared):
        bad.append("consolidate --hf: exit %d, %d tensors (want %d): %s" % (rc, len(got), len(fp32) - len(shared),
                                                                           text.strip()))
    return bad, len(fp32)


def hostile(zn, folder, tag, work):
    """Damaged copies of a stage-3 folder: each refused naming the file."""
    bad = []
    cases = []
    for what in ("missing", "truncated", "flipped"):
        d = os.path.join(work, "hostile-" + what)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(os.path.join(folder, tag), d)
        name = [f for f in os.listdir(d) if f.endswith("zero_pp_rank_1_mp_rank_00_optim_states.pt")][0]
        victim = os.path.join(d, name)
        if what == "missing":
            os.remove(victim)
            want = "rank 1's file %s is missing" % name
        elif what == "truncated":
            size = os.path.getsize(victim)
            with open(victim, "r+b") as f:
                f.truncate(size // 2)
            want = name
        else:
            # one bit of the first storage's first element: its CRC-32 no longer holds
            import zipfile
            with zipfile.ZipFile(victim) as z:
                zi = [i for i in z.infolist() if "/data/" in i.filename][0]
            with open(victim, "r+b") as f:
                f.seek(zi.header_offset + 26)
                n, m = np.frombuffer(f.read(4), dtype="<u2")
                at = zi.header_offset + 30 + int(n) + int(m)
                f.seek(at)
                b = f.read(1)
                f.seek(at)
                f.write(bytes([b[0] ^ 0x01]))
            want = name
        rc, text = zinc([zn, "ckpt", "inspect", d])
        errs = [ln for ln in text.splitlines() if ln.startswith("zinc: error: ")]
        ok = rc == 1 and len(errs) == 1 and want in errs[0] and ": INVALID" in text
        cases.append("%s: %s" % (what, errs[0][len("zinc: error: "):] if errs else text.strip()))
        if not ok:
            bad.append("hostile %s: exit %d: %s" % (what, rc, text.strip()))
        shutil.rmtree(d, ignore_errors=True)
    return bad, cases


def universal(zn, folder, tag, work):
    """DeepSpeed's ds_to_universal of a stage-2 folder (Z-DSCK-008): zinc
    inspects it and consolidates it to zero_to_fp32's bits of the folder it
    came from."""
    out = os.path.join(work, "ds_universal")
    shutil.rmtree(out, ignore_errors=True)
    uni = os.path.join(out, tag + "_universal")
    r = subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                        os.path.join(folder, tag), "--output_folder", uni, "--inject_missing_state"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return ["ds_to_universal failed: %s" % (r.stdout + r.stderr)[-300:]], "DeepSpeed could not write it"
    bad = []
    rc, text = zinc([zn, "ckpt", "inspect", out])
    if rc != 0 or ": OK" not in text:
        bad.append("inspect: exit %d: %s" % (rc, text.strip().splitlines()[-1:]))
    fp32, _ = reference(folder, tag)
    f = os.path.join(out, "zinc.safetensors")
    rc, text = zinc([zn, "ckpt", "consolidate", "--input", out, "--output", f])
    why = same(fp32, load_file(f)) if rc == 0 else "exit %d: %s" % (rc, text.strip())
    if why:
        bad.append("consolidate: " + why)
    return bad, "%d tensors  %s" % (len(fp32), "equal to zero_to_fp32 of the folder it came from" if not bad
                                   else "DIFFER")


def run(zn, work, scenarios):
    """Prints one row per DeepSpeed-written checkpoint; returns the failures."""
    fails = []
    print("test-deepspeed: DeepSpeed's own checkpoints read by zinc (Z-DSCK): inspect, consolidate (fp32 and bf16)"
          " bit-equal to zero_to_fp32, --hf without tied names")
    s2 = s3 = None
    for s in scenarios:
        folder = os.path.join(work, s["name"], "ds_final_ck")
        tag = "global_step%d" % s["steps"]
        if s["stage"] < 1 or not os.path.isdir(os.path.join(folder, tag)):
            continue
        dtype = "bf16" if "bf16" in s["cfg"] else "fp16" if "fp16" in s["cfg"] else "fp32"
        bad, n = check_folder(zn, folder, tag, os.path.join(work, s["name"]))
        print("  %-26s stage %d  W %d  %-4s  %2d tensors  %s" % (s["name"], s["stage"], s["world"], dtype, n,
                                                                "equal" if not bad else "DIFFER"))
        fails += ["%s: %s" % (s["name"], b) for b in bad]
        if s["stage"] == 3 and s["world"] >= 2 and s3 is None:
            s3 = (folder, tag)
        if s["stage"] == 2 and s["world"] >= 2 and s2 is None:
            s2 = (folder, tag, s["name"])
    if s2:
        bad, line = universal(zn, s2[0], s2[1], work)
        print("  %-26s %s" % ("universal (" + s2[2] + ")", line))
        fails += ["ds universal checkpoint: %s" % b for b in bad]
    elif scenarios:   # none at all: a run of the CLI checks alone (--only stepper,compare)
        fails.append("ds checkpoints: no stage-2 DeepSpeed checkpoint to make universal")
    if s3:
        bad, cases = hostile(zn, s3[0], s3[1], work)
        for c in cases:
            print("  hostile copy, %s" % c)
        fails += ["ds checkpoints: %s" % b for b in bad]
    elif scenarios:
        fails.append("ds checkpoints: no stage-3 DeepSpeed checkpoint to damage")
    return fails
