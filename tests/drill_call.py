#!/usr/bin/env python3
"""drill_call.py TRACE RANK PHASE STEP: which collective a fault drill
pauses at (ZINC_COMM_PAUSE, spec Z-NODE-009).

Reads a Chrome trace that `zinc train --trace` wrote for the same run on the
simulator (the same config gives every rank the same collectives in the
same order on every backend), finds rank RANK's first collective of PHASE
in step STEP, and prints "TAG N": its tag and its 1-based number among the
rank's calls of that tag. PHASE: forward-gather (param_gather inside the
forward), backward-reduce (grad_reduce inside the backward), step (norm
inside the optimizer step), checkpoint (ckpt, the save after the step).
"""
import json
import sys

PHASES = {"forward-gather": ("param_gather", "forward"), "backward-reduce": ("grad_reduce", "backward"),
          "step": ("norm", "step"), "checkpoint": ("ckpt", None)}


def main():
    path, rank, phase, step = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    tag, span_name = PHASES[phase]
    doc = json.load(open(path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    mine = sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == rank), key=lambda e: e["ts"])
    spans = [e for e in mine if e["name"] == span_name and e["args"].get("step") == step]   # one a micro-batch
    n = 0
    for e in mine:
        if e.get("cat") != "comm" or e["name"].split(":", 1)[-1] != tag:
            continue
        n += 1
        if e["args"].get("step") != step:
            continue
        if span_name is None or any(sp["ts"] <= e["ts"] <= sp["ts"] + sp["dur"] for sp in spans):
            print(tag, n)
            return 0
    print("drill_call.py: rank %d has no %s collective in step %d's %s" % (rank, tag, step, phase), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
