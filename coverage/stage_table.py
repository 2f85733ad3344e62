#!/usr/bin/env python3
"""The coverage table per stage and per plan feature, for `make coverage`.

  stage_table.py BUILD     (run from the repository root, after the suite)

The coverage build splits its counts by plan (src/core/covmark.h): while an
engine is alive, its counts go to BUILD/covkeys/<key>/, a folder laid out
like the object folder, <key> naming the plan's rows, e.g.
spec-s3-ocpu-pdev-h0-w1-g0-m0-a1-bf16: where it ran ("spec": a conformance
case of `zinc spec run`, "suite": the rest of the suite, "fault": a run
with a failure injected: an allocation, an I/O operation or a collective
made to fail), stage, optimizer
and parameter tier (dev/cpu/nvme), hpZ, qwZ, qgZ, MiCS, GA>1, dtype. Counts
outside any engine are under BUILD/covkeys/none.

A row (a stage, a feature) holds the keys whose plan has it, but the
"fault" ones: a row measures what its plan runs when nothing is made to
fail (the error paths only an injected failure reaches count in the whole
tree; a row that counted them would fall with every failure sweep added).
What the row RUNS: the lines (and branch outcomes) that some run of its
keys executes, anywhere in the suite. What its OWN cases reach: the same, over its "spec"
keys only. The row's figures are own/runs; the lines and branch outcomes
it runs that its own cases never reach are listed by file:line, and so are
the branch outcomes on lines it runs that none of its runs ever takes. The
rows count src/ but src/app/ (the command line, its reports and the spec
runner are no plan's code) and sim/.

Writes coverage/coverage.json (the whole tree: every key merged, gcovr's
JSON, as `make coverage` always wrote), coverage/stages.txt (the table and
the lists, long ones cut) and coverage/stages-unreached.txt (the lists in
full). Tools: gcov-tool merges a set of keys' counts, gcovr reads them
(src/ and sim/, but src/core/covmark.c, the coverage build's own)."""
import json, os, shutil, subprocess, sys, tempfile

FIELDS = ('origin', 'stage', 'optim', 'param', 'hpz', 'qwz', 'qgz', 'mics', 'ga', 'dtype')

ROWS = [(f'stage {s}', (lambda s: lambda k: k['stage'] == f's{s}')(s)) for s in range(4)] + [
    ('offload optimizer cpu', lambda k: k['optim'] == 'ocpu'),
    ('offload optimizer nvme', lambda k: k['optim'] == 'onvme'),
    ('offload param cpu', lambda k: k['param'] == 'pcpu'),
    ('offload param nvme', lambda k: k['param'] == 'pnvme'),
    ('hpZ', lambda k: k['hpz'] == 'h1'),
    ('qwZ', lambda k: k['qwz'] == 'w1'),
    ('qgZ', lambda k: k['qgz'] == 'g1'),
    ('MiCS', lambda k: k['mics'] == 'm1'),
    ('GA>1', lambda k: k['ga'] == 'a1'),
    ('fp16', lambda k: k['dtype'] == 'fp16'),
    ('bf16', lambda k: k['dtype'] == 'bf16'),
]
CUT = 25   # entries of a list in stages.txt; stages-unreached.txt has them all


def parse_key(name):
    parts = name.split('-')
    return dict(zip(FIELDS, parts)) if len(parts) == len(FIELDS) else None


def link_gcno(build, folder):
    """gcov reads a .gcda next to its .gcno: link the object folder's."""
    for root, _, files in os.walk(folder):
        for f in files:
            if not f.endswith('.gcda'):
                continue
            rel = os.path.relpath(os.path.join(root, f[:-5] + '.gcno'), folder)
            dst = os.path.join(root, f[:-5] + '.gcno')
            if not os.path.exists(dst):
                os.symlink(os.path.abspath(os.path.join(build, rel)), dst)


class Sets:
    """The counts of a set of keys: merged once (gcov-tool), read once (gcovr)."""

    def __init__(self, build):
        self.build, self.keys_dir = build, os.path.join(build, 'covkeys')
        self.out = os.path.join(build, 'covsets')
        self.cache, self.n = {}, 0

    def merged(self, keys):
        keys = sorted(keys)
        if len(keys) == 1:
            return os.path.join(self.keys_dir, keys[0])
        self.n += 1
        acc = os.path.join(self.out, f'set{self.n}')
        tmp = acc + '.tmp'
        # gcov-tool merges two folders into a third (emptied first)
        subprocess.run(['gcov-tool', 'merge', '-o', acc, os.path.join(self.keys_dir, keys[0]),
                        os.path.join(self.keys_dir, keys[1])], check=True)
        for k in keys[2:]:
            subprocess.run(['gcov-tool', 'merge', '-o', tmp, acc, os.path.join(self.keys_dir, k)], check=True)
            subprocess.run(['rm', '-rf', acc], check=True)
            os.rename(tmp, acc)
        return acc

    def json(self, keys, path=None):
        """gcovr's JSON of the keys' counts merged (path: also kept there)."""
        fk = frozenset(keys)
        if fk in self.cache and not path:
            return self.cache[fk]
        if not fk:
            return {'files': []}
        folder = self.merged(fk)
        link_gcno(self.build, folder)
        out = path or os.path.join(self.out, f'set{len(self.cache)}.json')
        # covmark.c is the coverage build's own machinery, no part of zinc
        subprocess.run(['gcovr', '-r', '.', '--object-directory', folder, folder, '--filter', 'src/',
                        '--filter', 'sim/', '--exclude', 'src/core/covmark.c', '--exclude-unreachable-branches',
                        '-j', '2', '--json', out],
                       check=True, stdout=subprocess.DEVNULL)
        self.cache[fk] = json.load(open(out))
        return self.cache[fk]


def in_rows(path):
    """The rows count the library and the simulator: src/app (the command
    line, its reports, the spec runner itself) is no plan's code."""
    return not path.startswith('src/app/')


def counts(data, keep=lambda path: True):
    """{(file, line): (count, [branch counts])} of the code lines of gcovr's JSON."""
    out = {}
    for f in data['files']:
        if not keep(f['file']):
            continue
        for ln in f['lines']:
            if ln.get('gcovr/noncode'):
                continue
            out[(f['file'], ln['line_number'])] = (ln['count'], [b['count'] for b in ln.get('branches', [])])
    return out


def ranges(items):
    """file:line lists, consecutive lines of a file as a range: a.c:3-5,9."""
    by = {}
    for f, l in sorted(items):
        by.setdefault(f, []).append(l)
    out = []
    for f, ls in by.items():
        spans, a = [], ls[0]
        for p, q in zip(ls, ls[1:] + [None]):
            if q != p + 1:
                spans.append(f'{a}' if a == p else f'{a}-{p}')
                a = q
        out.append(f'{f}:' + ','.join(spans))
    return out


def outcomes(items):
    """branch outcomes as file:line/branch, a line's outcomes together: a.c:7/0,1."""
    by = {}
    for f, l, i in sorted(items):
        by.setdefault((f, l), []).append(str(i))
    return [f'{f}:{l}/' + ','.join(v) for (f, l), v in by.items()]


def row(name, runs, own):
    run_l = {k for k, (c, _) in runs.items() if c > 0}
    own_l = {k for k in run_l if own.get(k, (0, []))[0] > 0}
    run_b, own_b, untaken = set(), set(), set()
    for k in run_l:
        ob = own.get(k, (0, []))[1]
        for i, c in enumerate(runs[k][1]):
            if c > 0:
                run_b.add(k + (i,))
                if i < len(ob) and ob[i] > 0:
                    own_b.add(k + (i,))
            else:
                untaken.add(k + (i,))
    return {'name': name, 'lines': (len(own_l), len(run_l)), 'branches': (len(own_b), len(run_b)),
            'untaken': len(untaken), 'miss_lines': ranges(run_l - own_l),
            'miss_branches': outcomes(run_b - own_b), 'untaken_list': outcomes(untaken)}


def pct(a, b):
    return 100.0 * a / b if b else 100.0


def whole(data):
    lt = lc = bt = bc = 0
    for (c, br) in counts(data).values():
        lt += 1
        lc += c > 0
        bt += len(br)
        bc += sum(x > 0 for x in br)
    return lc, lt, bc, bt


def write(rows, tree, keys, nfault, path, cut):
    with open(path, 'w') as o:
        o.write('Coverage per stage and per plan feature (make coverage; coverage/stage_table.py).\n'
                'runs: the lines and branch outcomes the whole suite executes while an engine of the\n'
                'row\'s plan is alive, except runs with a failure injected (an allocation, an I/O\n'
                f'operation or a collective made to fail: {nfault} keys, counted in the whole tree only);\n'
                'own: those its own conformance cases (zinc spec run) reach. untaken: branch outcomes\n'
                'on lines the row runs that none of its runs takes.\n'
                'Scope: the rows src/ but src/app/ (the command line, its reports, the spec runner),\n'
                'and sim/; the whole tree src/ and sim/.\n\n')
        o.write(f'{"row":24} {"keys":>9} {"lines own/runs":>22} {"branches own/runs":>22} {"untaken":>8}\n')
        for r in rows:
            (lo, lr), (bo, br) = r['lines'], r['branches']
            if not lr:   # no run of the suite has this plan
                o.write(f'{r["name"]:24} {r["keys"]:>9} {"-":>22} {"-":>22} {"-":>8}\n')
                continue
            o.write(f'{r["name"]:24} {r["keys"]:>9} {lo:6d}/{lr:<6d} {pct(lo, lr):6.1f}% '
                    f'{bo:6d}/{br:<6d} {pct(bo, br):6.1f}% {r["untaken"]:8d}\n')
        lc, lt, bc, bt = tree
        o.write(f'\nwhole tree: lines {lc}/{lt} {pct(lc, lt):.1f}%, branches taken {bc}/{bt} {pct(bc, bt):.1f}% '
                f'({keys} keys)\n')
        for r in rows:
            o.write(f'\n== {r["name"]}\n')
            for title, lst in (('lines it runs, its own cases never', r['miss_lines']),
                               ('branch outcomes it takes, its own cases never', r['miss_branches']),
                               ('branch outcomes on its lines that none of its runs takes', r['untaken_list'])):
                o.write(f'{title} ({len(lst)} places):\n')
                for e in (lst if cut is None else lst[:cut]):
                    o.write(f'  {e}\n')
                if cut is not None and len(lst) > cut:
                    o.write(f'  ... {len(lst) - cut} more in coverage/stages-unreached.txt\n')


def main_counted(build, key):
    """How often src/app/main.c's main() ran while key's counts were being
    kept: gcov on that key's main.gcda, beside the object folder's .gcno."""
    gcda = os.path.join(build, 'covkeys', key, 'src/app/main.gcda')
    if not os.path.exists(gcda):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(gcda, tmp)
        shutil.copy(os.path.join(build, 'src/app/main.gcno'), tmp)
        out = subprocess.run(['gcov', '-t', '-o', tmp, 'src/app/main.c'], capture_output=True, text=True).stdout
    for ln in out.splitlines():
        count, _, rest = ln.partition(':')
        src = rest.partition(':')[2]
        if src.startswith('int main('):
            count = count.strip().rstrip('*')
            return int(count) if count.isdigit() else 0
    return 0


def check_attribution(build, names):
    """Every process starts with no key and main() runs before any world or
    engine, so a plan's key that counted main() was handed what ran before
    its engines (the command's parsing and loading): the rows' figures would
    count it as the plan's code. Returns the keys that did."""
    return [n for n in names if n != 'none' and main_counted(build, n)]


def main(build):
    kdir = os.path.join(build, 'covkeys')
    names = sorted(os.listdir(kdir))
    keys = {n: parse_key(n) for n in names}
    sets = Sets(build)
    subprocess.run(['rm', '-rf', sets.out], check=True)
    os.makedirs(sets.out)
    tree = sets.json(names, 'coverage/coverage.json')   # every key and none: the whole tree
    rows = []
    for name, has in ROWS:
        ks = [n for n, k in keys.items() if k and has(k) and k['origin'] != 'fault']
        own = [n for n in ks if keys[n]['origin'] == 'spec']
        r = row(name, counts(sets.json(ks), in_rows), counts(sets.json(own), in_rows))
        r['keys'] = f'{len(own)}/{len(ks)}'
        rows.append(r)
    nfault = sum(1 for k in keys.values() if k and k['origin'] == 'fault')
    write(rows, whole(tree), len(names), nfault, 'coverage/stages.txt', CUT)
    write(rows, whole(tree), len(names), nfault, 'coverage/stages-unreached.txt', None)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
