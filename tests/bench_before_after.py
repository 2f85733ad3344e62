#!/usr/bin/env python3
"""bench_before_after.py: two builds of zinc side by side in one run on this
machine (the README's "before" column): the same MLP training steps (one
rank, stage 0; a run of 6 steps less a run of 2, best of 3) and the same
checkpoint save and cold load (whole runs with and without it), with dd
(conv=fsync write, cold read) as the checkpoint's peer. Asserts nothing.
  python3 tests/bench_before_after.py OLD/zinc NEW/zinc
(build OLD from any commit: git worktree add /tmp/old REV && make -C /tmp/old)"""
import os, subprocess, sys, time, shutil, glob

def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0

def drop(path):
    files = [path] if os.path.isfile(path) else glob.glob(path + "/**", recursive=True)
    for f in files:
        if os.path.isfile(f):
            fd = os.open(f, os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)

def mlp(z, W, B, threads=None):
    base = [z, "train", "--model", f"mlp:{W},{W},{W},16", "--world-size", "1", "--stage", "0", "--micro-batch", str(B)]
    if threads: base += ["--threads", str(threads)]
    best = 1e9
    for _ in range(3):
        best = min(best, (wall(base + ["--steps", "6"]) - wall(base + ["--steps", "2"])) / 4)
    return best

def ckpt(z, d="/tmp/ba-ckpt"):
    base = [z, "train", "--model", "mlp:2048,2048,2048,16", "--world-size", "2", "--stage", "2", "--micro-batch", "4"]
    s = l = 1e9
    for _ in range(3):
        shutil.rmtree(d, ignore_errors=True)
        plain = wall(base + ["--steps", "1"]); init = wall(base + ["--steps", "0"])
        save = wall(base + ["--steps", "1", "--checkpoint-dir", d, "--checkpoint-interval", "1"])
        drop(d)
        load = wall(base + ["--steps", "1", "--checkpoint-dir", d, "--resume"])
        s = min(s, save - plain); l = min(l, load - init)
    nbytes = sum(os.path.getsize(f) for f in glob.glob(d + "/**", recursive=True) if os.path.isfile(f))
    shutil.rmtree(d, ignore_errors=True)
    return nbytes / s / 1e6, nbytes / l / 1e6, nbytes

def dd(nbytes, f="/tmp/ba-dd"):
    mb = nbytes // (1 << 20) + 1
    w = r = 1e9
    for _ in range(3):
        w = min(w, wall(["dd", "if=/dev/zero", f"of={f}", "bs=1M", f"count={mb}", "conv=fsync"]))
        drop(f)
        r = min(r, wall(["dd", f"if={f}", "of=/dev/null", "bs=1M"]))
    os.remove(f)
    return mb * (1 << 20) / w / 1e6, mb * (1 << 20) / r / 1e6

old, new = sys.argv[1], sys.argv[2]
for W, B in ((1024, 16), (1024, 64), (4096, 16), (4096, 64)):
    o, n = mlp(old, W, B), mlp(new, W, B)
    print(f"mlp{W}_micro{B}_1thread  before={o*1e3:.1f}ms  after={n*1e3:.1f}ms  speedup={o/n:.2f}", flush=True)
    n2 = mlp(new, W, B, threads=os.cpu_count())
    print(f"mlp{W}_micro{B}_{os.cpu_count()}threads after={n2*1e3:.1f}ms (before: no --threads)", flush=True)
os_, ol, nb = ckpt(old)
ns, nl, _ = ckpt(new)
dw, dr = dd(nb)
print(f"ckpt_save  before={os_:.0f}MB/s ({os_/dw:.2f} of dd)  after={ns:.0f}MB/s ({ns/dw:.2f} of dd)  dd_fsync={dw:.0f}MB/s", flush=True)
print(f"ckpt_load  before={ol:.0f}MB/s ({ol/dr:.2f} of cold read)  after={nl:.0f}MB/s ({nl/dr:.2f} of cold read)  cold_read={dr:.0f}MB/s", flush=True)
