"""peer_common.py: what the peer tests share (tests/peer_gpt2.py,
tests/peer_deepspeed.py, tests/peer_ds_worker.py): zinc's window rule
(Z-DATA-012) reimplemented, and running zinc with its output kept on failure.
Standard library only: the DeepSpeed workers import it too."""
import subprocess
import sys

MASK = (1 << 64) - 1


def mix64(z):
    """src/core/rng.h zn_mix64 (splitmix64's finaliser)"""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def rng_u64(key, counter):
    """src/core/rng.h zn_rng_u64"""
    return mix64(mix64(key) ^ mix64((counter + 0x632BE59BD9B4E019) & MASK))


def window_start(n, seed, s, T):
    """src/engine/data_text.c zn_tokens_window_start (Z-DATA-012): sample s
    of a stream of n tokens starts here, for windows of T (+1 target)"""
    return rng_u64(mix64(seed ^ 0x7E47D0C5), s) % (n - T)


def micro_first_sample(step, micro, rank, world, micro_batch, train_batch):
    """engine.c zn_engine_train_step: micro-batch m = micro * world + rank of
    step k holds samples k * train_batch + m * micro_batch, onward"""
    return step * train_batch + (micro * world + rank) * micro_batch


def run(cmd, what="peer", **kw):
    """Runs cmd; on a non-zero exit prints its command and output and exits 1."""
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.stderr.write("%s: failed (%d): %s\n%s%s" % (what, r.returncode, " ".join(map(str, cmd)),
                                                       r.stdout.decode(errors="replace"),
                                                       r.stderr.decode(errors="replace")))
        sys.exit(1)
    return r.stdout


def csv_column(path, name):
    """One column of zinc's --log CSV, as floats."""
    with open(path) as f:
        rows = f.read().strip().split("\n")
    head = rows[0].split(",")
    i = head.index(name)
    return [float(r.split(",")[i]) for r in rows[1:]]


def link_optimizer_state(engine):
    """DeepSpeed 0.19.8 (stages 1-2) links the optimizer state to the
    parameters once, after the first group's first step (stage_1_and_2.py
    _optimizer_step), when the second group has no state yet: the no-decay
    group's fragments stay empty. Links again, now that both have, so
    safe_get_full_optimizer_state sees every parameter's moments."""
    opt = engine.optimizer
    if hasattr(opt, "_lazy_init_hp_params_optimizer_state"):
        opt._hp_optimizer_states_linked = False
        opt._lazy_init_hp_params_optimizer_state()
