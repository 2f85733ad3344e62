"""bench_dsck.py: consolidating a DeepSpeed stage-3 checkpoint of more than
2 GB, zinc against DeepSpeed's zero_to_fp32, side by side in one run (spec
Z-DSCK-006; issue 28 item 4). Part of `make bench-peers`.

  python tests/bench_dsck.py BUILD PYTHON        (PYTHON: the peers' venv)

The checkpoint is written once by DeepSpeed itself (2 ranks on the CPU, one
AdamW step) into BUILD/bench-dsck, for a plain stack of DSCK_LAYERS linear
layers of 4096 x 4096 (default 11: 184.6M parameters, 2.2 GB of fp32
masters and moments), and reused while its size matches. Before each timed
command every file of the folder is dropped from the page cache
(posix_fadvise DONTNEED), so each starts cold. Rows (bench_peers.py's form):
wall time of `zinc ckpt consolidate --output` against `zero_to_fp32.py
--safe_serialization`, their peak RSS (/usr/bin/time -f %M), and zinc's time
against a cold `cat` of the same files. The two outputs are compared tensor
for tensor first: a figure for a wrong answer is no figure."""
import json
import os
import shutil
import subprocess
import sys
import time

WIDTH = 4096


def evict(folder):
    """Drops folder's files from the page cache: the next read is cold."""
    for root, _, files in os.walk(folder):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def timed(cmd, env=None):
    """(wall seconds, peak RSS KiB, output) of cmd under /usr/bin/time."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "peak_rss_kib=%M"] + cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, (r.stdout + r.stderr)[-600:]))
    rss = [int(ln.split("=")[1]) for ln in r.stderr.splitlines() if ln.startswith("peak_rss_kib=")][-1]
    return wall, rss, r.stdout + r.stderr


WRITER = r'''
import os, sys, torch, torch.distributed as dist, deepspeed
deepspeed.utils.logger.setLevel("WARNING")
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
layers, width, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
m = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
cfg = {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 1000,
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 3}}
eng, _, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
x = torch.randn(1, width)
eng.backward(eng(x).square().mean())
eng.step()
eng.save_checkpoint(out, tag="global_step1")
'''


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(folder) for f in fs)


def make_checkpoint(py, work, layers):
    """BUILD/bench-dsck/ck/global_step1 by DeepSpeed, unless already there."""
    ck = os.path.join(work, "ck")
    stamp = os.path.join(work, "layers.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == {"layers": layers, "width": WIDTH}:
        return ck
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    script = os.path.join(work, "writer.py")
    with open(script, "w") as f:
        f.write(WRITER)
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    r = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", script, str(layers), str(WIDTH), ck],
                       capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError("DeepSpeed could not write the checkpoint: " + (r.stdout + r.stderr)[-800:])
    json.dump({"layers": layers, "width": WIDTH}, open(stamp, "w"))
    return ck


def same_outputs(py, a, b):
    """zinc's file and DeepSpeed's hold the same tensors, bit for bit (numpy memmaps)."""
    code = r'''
import json, struct, sys, numpy as np
def load(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    mm = np.memmap(p, dtype=np.uint8, mode="r", offset=8 + n)
    return {k: mm[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()}, h
a, ha = load(sys.argv[1]); b, hb = load(sys.argv[2])
assert set(a) == set(b), sorted(set(a) ^ set(b))[:3]
for k in a:
    assert ha[k]["shape"] == hb[k]["shape"] and ha[k]["dtype"] == hb[k]["dtype"], k
    assert np.array_equal(a[k], b[k]), k
print(len(a))
'''
    r = subprocess.run([py, "-c", code, a, b], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("zinc's consolidation differs from zero_to_fp32's: " + r.stderr[-400:])
    return int(r.stdout.strip())


def main():
    build, py = sys.argv[1], sys.argv[2]
    zinc = os.path.join(build, "zinc")
    layers = int(os.environ.get("DSCK_LAYERS", "11"))
    work = os.path.join(build, "bench-dsck")
    ck = make_checkpoint(py, work, layers)
    tagdir = os.path.join(ck, "global_step1")
    size = folder_bytes(tagdir)
    largest = WIDTH * WIDTH * 4
    print("bench-peers: DeepSpeed stage-3 checkpoint, 2 ranks, %d x [%d x %d] fp32: %.2f GB in %s"
          % (layers, WIDTH, WIDTH, size / 1e9, tagdir), flush=True)
    zout = os.path.join(work, "zinc.safetensors")
    dout = os.path.join(work, "ds_out")
    shutil.rmtree(dout, ignore_errors=True)
    env = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONWARNINGS="ignore")
    evict(tagdir)
    cat_s, _, _ = timed(["sh", "-c", 'cat "$0"/* > /dev/null', tagdir])
    evict(tagdir)
    z_s, z_rss, _ = timed([zinc, "ckpt", "consolidate", "--input", ck, "--output", zout])
    evict(tagdir)
    d_s, d_rss, _ = timed([py, os.path.join(ck, "zero_to_fp32.py"), ck, dout, "--safe_serialization"], env=env)
    n = same_outputs(py, zout, os.path.join(dout, "model.safetensors"))
    print("bench-peers: %d tensors, zinc's file bit for bit zero_to_fp32's; cold cat of the %.2f GB: %.2f s"
          % (n, size / 1e9, cat_s), flush=True)
    print("bench-peers: zinc %.2f s, peak RSS %.0f MiB (bound: the largest tensor + 64 MiB = %.0f MiB); "
          "zero_to_fp32 %.2f s, peak RSS %.0f MiB" % (z_s, z_rss / 1024, largest / 2**20 + 64, d_s, d_rss / 1024),
          flush=True)
    # bench_peers.py's row form: a ratio > 1 means zinc is faster (or smaller)
    tag = "%.1fGB" % (size / 1e9)
    print(f"bench {'dsck_consolidate_' + tag:<28} zinc={1 / z_s:.3f}/s peer=zero_to_fp32:{1 / d_s:.3f}/s "
          f"ratio={d_s / z_s:.2f}", flush=True)
    print(f"bench {'dsck_peak_rss_' + tag:<28} zinc={z_rss / 1024:.0f}MiB peer=zero_to_fp32:{d_rss / 1024:.0f}MiB "
          f"ratio={d_rss / z_rss:.2f}", flush=True)
    print(f"bench {'dsck_vs_cold_cat_' + tag:<28} zinc={1 / z_s:.3f}/s peer=cat:{1 / cat_s:.3f}/s "
          f"ratio={cat_s / z_s:.2f}", flush=True)
    os.remove(zout)
    shutil.rmtree(dout, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
