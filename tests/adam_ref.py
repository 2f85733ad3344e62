#!/usr/bin/env python3
"""adam_ref.py: Adam/AdamW steps computed independently of zinc, with numpy in
float32, the way DeepSpeed's FusedAdam computes them (spec Z-OPT-001):
the betas are float kernel arguments, the bias corrections are
1 - pow(float(beta), t) in double rounded to float, and every other
operation is one float32 operation in the kernel's order.

tests/data/adam_ref.txt holds the inputs and the expected bits;
tests/test_optim.c runs zn_adam_step on the same inputs and compares.

  python3 tests/adam_ref.py --check   # recompute, compare with the file
  python3 tests/adam_ref.py --write   # regenerate the file
Prints "adamref: N passed, N failed" with --check.
"""
import sys

import numpy as np

F = np.float32
HERE = __file__.rsplit("/", 1)[0]
PATH = HERE + "/data/adam_ref.txt"

# name, adamw, lr, beta1, beta2, eps, weight_decay, bias_correction,
# gradient multiplier per step (its length is the number of steps)
CASES = [
    ("first_step_lr1", 1, 1.0, 0.9, 0.999, 1e-8, 0.0, 1, [1.0]),
    ("adamw_10_steps", 1, 1e-3, 0.9, 0.95, 1e-6, 0.01, 1, [1, 1, 0.5, 1, 1, 1, 0.25, 1, 1, 1]),
    ("l2_5_steps", 0, 3e-4, 0.8, 0.99, 1e-8, 0.1, 1, [1, 1, 1, 1, 1]),
    ("no_bias_correction", 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, [1, 1, 1]),
]
N = 16


def bits(x):
    return "%08x" % int(np.array([x], dtype=F).view(np.uint32)[0])


def unbits(h):
    return np.array([int(h, 16)], dtype=np.uint32).view(F)[0]


def inputs(ci, steps):
    """Deterministic inputs spanning several magnitudes and both signs."""
    rng = np.random.default_rng(20240520 + ci)
    p = (rng.standard_normal(N) * 2.0).astype(F)
    g = [(rng.standard_normal(N) * 10.0 ** rng.integers(-6, 2, N)).astype(F) for _ in range(steps)]
    g[0][0] = F(0.0)   # a zero gradient must not move a weight
    return p, g


def run(case, p, gs):
    _, adamw, lr, b1, b2, eps, wd, bc, muls = case
    b1, b2 = F(b1), F(b2)
    lr, eps, wd = F(lr), F(eps), F(wd)
    omb1, omb2 = F(1.0) - b1, F(1.0) - b2
    p = p.copy()
    m = np.zeros(N, dtype=F)
    v = np.zeros(N, dtype=F)
    for t, (g, mul) in enumerate(zip(gs, muls), start=1):
        bc1 = F(1.0 - float(b1) ** t) if bc else F(1.0)
        bc2 = F(1.0 - float(b2) ** t) if bc else F(1.0)
        for i in range(N):
            gi = g[i] * F(mul)
            if not adamw:
                gi = gi + wd * p[i]
            m[i] = b1 * m[i] + omb1 * gi
            v[i] = b2 * v[i] + omb2 * gi * gi
            denom = np.sqrt(v[i] / bc2) + eps
            u = (m[i] / bc1) / denom
            if adamw:
                u = u + wd * p[i]
            p[i] = p[i] - lr * u
    return p, m, v


HEADER = ["# Adam reference (tests/adam_ref.py): numpy float32, FusedAdam's order.",
          "# case NAME adamw lr beta1 beta2 eps wd bias_correction n steps, then",
          "# mul (per step), p0, g1..gT, p, m, v as float32 bit patterns"]


def render_case(ci):
    case = CASES[ci]
    name, adamw, lr, b1, b2, eps, wd, bc, muls = case
    p0, gs = inputs(ci, len(muls))
    p, m, v = run(case, p0, gs)
    out = ["case %s %d %r %r %r %r %r %d %d %d" % (name, adamw, lr, b1, b2, eps, wd, bc, N, len(muls)),
           "mul " + " ".join(repr(float(x)) for x in muls),
           "p0 " + " ".join(bits(x) for x in p0)]
    out += ["g " + " ".join(bits(x) for x in g) for g in gs]
    out += [tag + " " + " ".join(bits(x) for x in arr) for tag, arr in (("p", p), ("m", m), ("v", v))]
    return out


def main():
    if sys.argv[1:] == ["--write"]:
        lines = HEADER + [l for ci in range(len(CASES)) for l in render_case(ci)]
        with open(PATH, "w") as f:
            f.write("\n".join(lines) + "\n")
        return 0
    if sys.argv[1:] != ["--check"]:
        print(__doc__)
        return 2
    blocks, cur = [], None
    for line in open(PATH).read().splitlines():
        if line.startswith("case "):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
    passed = failed = 0
    for ci in range(len(CASES)):
        got = render_case(ci)
        want = blocks[ci] if ci < len(blocks) else []
        if got == want:
            passed += 1
            print("ok   Z-OPT-001 %s: numpy float32 gives the bits in adam_ref.txt" % CASES[ci][0])
        else:
            failed += 1
            print("FAIL Z-OPT-001 %s: numpy float32 differs from adam_ref.txt" % CASES[ci][0])
    if len(blocks) != len(CASES):
        failed += 1
        print("FAIL Z-OPT-001 adam_ref.txt has %d cases, adam_ref.py %d" % (len(blocks), len(CASES)))
    print("adamref: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
