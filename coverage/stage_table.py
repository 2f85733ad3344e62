#!/usr/bin/env python3
"""Per-stage coverage table for `make coverage`.

  stage_table.py STAGE GCOVR.json SOURCE   -> one TSV row for that stage
  stage_table.py --print TSV               -> the table

A stage's own code is every function in SOURCE whose name starts with
'stage' followed by digits naming the stage (stage3_gather: stage 3;
stage12_reduce_bucket: stages 1 and 2; stage01_...: stages 0 and 1)."""
import json, re, sys

def stage_lines(src, stage):
    lines, cur = set(), None
    for no, text in enumerate(open(src), 1):
        m = re.match(r'^static\s+[\w\s\*]+?\bstage(\d+)_\w+\s*\(', text)
        if m and str(stage) in m.group(1):
            cur = no
        if cur is not None:
            lines.add(no)
            if text.rstrip() == '}':
                cur = None
    return lines

def row(stage, cov, src):
    own = stage_lines(src, stage)
    data = json.load(open(cov))
    lt = lc = bt = bc = 0
    for f in data['files']:
        if not f['file'].endswith(src.split('/')[-1]):
            continue
        for ln in f['lines']:
            if ln['line_number'] not in own or ln.get('gcovr/noncode'):
                continue
            lt += 1
            lc += ln['count'] > 0
            for b in ln.get('branches', []):
                bt += 1
                bc += b['count'] > 0
    print(f"{stage}\t{lc}\t{lt}\t{bc}\t{bt}")

def table(tsv):
    print("stage  own lines reached     own branches reached   (engine functions stageK_*, cases of that stage only)")
    for r in open(tsv):
        s, lc, lt, bc, bt = r.split()
        lc, lt, bc, bt = map(int, (lc, lt, bc, bt))
        pl = 100.0 * lc / lt if lt else 100.0
        pb = 100.0 * bc / bt if bt else 100.0
        print(f"  {s}    {lc:4d}/{lt:<4d} {pl:6.1f}%       {bc:4d}/{bt:<4d} {pb:6.1f}%")

if __name__ == '__main__':
    if sys.argv[1] == '--print':
        table(sys.argv[2])
    else:
        row(int(sys.argv[1]), sys.argv[2], sys.argv[3])
