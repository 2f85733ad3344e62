#!/usr/bin/env python3
"""Per-stage coverage table for `make coverage`.

  stage_table.py STAGE PLANS GCOVR.json SOURCE  -> one TSV row for that stage
  stage_table.py --print TSV                    -> the table

Stages are plans (src/core/plan.h). PLANS is the output of
`tests/test_plan --dump`: one line of key=value pairs per stage. A function
of SOURCE belongs to the stages whose plan it serves: the line right above
its definition says which, e.g. `/* plan: reduce_per_micro=1 shard=param */`
(every pair must hold). The row counts, for one stage's cases run alone, how
many lines and branches of the functions its plan selects they reach."""
import json, re, sys

def plans(path):
    out = {}
    for line in open(path):
        kv = dict(p.split('=', 1) for p in line.split())
        out[int(kv['stage'])] = kv
    return out

def stage_lines(src, plan):
    lines, cur, prev = set(), None, ''
    for no, text in enumerate(open(src), 1):
        m = re.match(r'^static\s+[\w\s\*]+?\b\w+\s*\(', text)
        t = re.match(r'^/\* plan: (.*) \*/$', prev.strip())
        if m and t and all(plan.get(k) == v for k, v in (c.split('=', 1) for c in t.group(1).split())):
            cur = no
        if cur is not None:
            lines.add(no)
            if text.rstrip() == '}':
                cur = None
        prev = text
    return lines

def row(stage, plan_file, cov, src):
    own = stage_lines(src, plans(plan_file)[stage])
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
    print("stage  own lines reached     own branches reached   (engine functions its plan selects, cases of that stage only)")
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
        row(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
