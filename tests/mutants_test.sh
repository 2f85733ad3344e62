#!/bin/sh
# mutants_test.sh: 300 hostile configs through the real binary (spec
# Z-FUZZ-009). A fixed-seed generator (python3, standard library) derives
# them from three base configs: byte flips, truncations, 100k-deep nesting,
# extreme numbers, duplicate keys, NUL bytes, invalid UTF-8, wrong types and
# odd files (empty, a BOM, comments, a 1 MiB string, 10,000 keys). Each runs
#   zinc train --config MUTANT --steps 1 --model mlp:4,8,3 --world-size 2
# under a 5 s timeout and must end in one of these ways:
#   accepted      exit 0, no "zinc: error:" line;
#   clean         exit 2 and exactly one "zinc: error:" line on stderr;
#   runtime       exit 1 and one "zinc: error:" line after training began
#                 (a run the config makes too big: "out of host memory");
#   long          training began and was still running at the timeout (a
#                 config asking for 2^31 micro-batches per step is valid).
# Anything else is a failure: a crash (a signal, a sanitizer's report, any
# other status, an error without its one line) or a hang (the timeout
# before training began: the config was never done with).
# Prints a line per failure, the counts per kind of mutation, then
#   mutants: N passed, N failed
# ZINC (default build/zinc) picks the binary: make sanitize runs it on the
# ASan/UBSan build through ci/run_tests.sh.
ZINC=${ZINC:-build/zinc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

python3 - "$T" <<'PY' || { echo "mutants: 0 passed, 1 failed (generator)"; exit 1; }
import json, random, sys
out = sys.argv[1]
rng = random.Random(20251125)

BASES = [
    {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
     "steps_per_print": 1, "gradient_clipping": 1.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-8,
                                               "weight_decay": 0.01}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.001,
                                                  "warmup_num_steps": 10}},
     "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 8, "loss_scale_window": 100,
              "hysteresis": 2, "min_loss_scale": 1},
     "zero_optimization": {"stage": 2, "reduce_bucket_size": 1000, "allgather_bucket_size": 1000,
                           "overlap_comm": False, "contiguous_gradients": True}},
    {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
     "bf16": {"enabled": True},
     "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
     "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 100,
                           "stage3_param_persistence_threshold": 10, "sub_group_size": 1000,
                           "stage3_max_live_parameters": 1e9, "offload_param": None},
     "zinc": {"canonical": True, "exact": False}, "seed": 7},
    {"train_batch_size": 4, "zero_optimization": {"stage": 1}, "communication_data_type": "fp32",
     "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.0001, "cycle_max_lr": 0.001,
                                                  "cycle_first_step_size": 5}},
     "checkpoint": {"tag_validation": "Warn"}, "wall_clock_breakdown": False},
]
TEXTS = [json.dumps(b, indent=2).encode() for b in BASES]

def paths(node, at=()):
    """every (path, value) below node"""
    if isinstance(node, dict):
        for k, v in node.items():
            yield at + (k,), v
            yield from paths(v, at + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield at + (i,), v
            yield from paths(v, at + (i,))

def replace(base, path, literal):
    """base as JSON text with the value at path written as literal (raw text)"""
    mark = "\u0001MARK\u0001"
    doc = json.loads(json.dumps(base))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = mark
    return json.dumps(doc, indent=2).replace(json.dumps(mark), literal).encode()

mutants = []
def add(kind, data):
    mutants.append((kind, data))

for _ in range(60):                                   # byte flips: 1 to 4 bits anywhere
    b = bytearray(rng.choice(TEXTS))
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    add("byteflip", bytes(b))
for _ in range(40):                                   # truncation at any length
    t = rng.choice(TEXTS)
    add("truncate", t[:rng.randrange(len(t))])
for depth in (100000, 100000, 5000, 1001, 999):       # deep nesting, closed and not
    add("nesting", b'{"a": ' + b"[" * depth + b"]" * depth + b"}")
    add("nesting", b'{"zero_optimization": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}")
    add("nesting", b'{"optimizer": ' + b"[" * depth)
EXTREME = ["1e308", "-1e308", "1e400", "-1e400", "-0", "0", "-1", "5e-324", "1e-400", "0.5",
           "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
           "-9223372036854775809", "18446744073709551616", "1e19", "123456789012345678901234567890",
           "NaN", "Infinity", "-Infinity", "0x10", "1.", ".5", "01", "+1", "1e", "--1"]
for _ in range(60):                                   # extreme numbers in numeric places
    i = rng.randrange(len(BASES))
    nums = [p for p, v in paths(BASES[i]) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    add("number", replace(BASES[i], rng.choice(nums), rng.choice(EXTREME)))
for _ in range(20):                                   # a key given twice
    i = rng.randrange(len(BASES))
    keyed = [p for p, v in paths(BASES[i]) if isinstance(p[-1], str)]
    p = rng.choice(keyed)
    t = TEXTS[i].decode()
    needle = json.dumps(p[-1]) + ":"
    at = t.index(needle)
    add("duplicate", (t[:at] + needle + " null, " + t[at:]).encode())
for _ in range(20):                                   # NUL bytes
    b = bytearray(rng.choice(TEXTS))
    b.insert(rng.randrange(len(b) + 1), 0)
    add("nul", bytes(b))
BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\x80", b"\xfe\xfe"]
for _ in range(25):                                   # invalid UTF-8 inside strings and keys
    t = rng.choice(TEXTS)
    quotes = [k for k in range(len(t)) if t[k:k + 1] == b'"']
    at = rng.choice(quotes) + 1
    add("utf8", t[:at] + rng.choice(BAD_UTF8) + t[at:])
WRONG = ["[]", "{}", '"str"', "true", "false", "null", "1.5", '"auto"', "[1, 2]", '{"a": 1}', '""', "-5"]
for _ in range(50):                                   # wrong types anywhere
    i = rng.randrange(len(BASES))
    p = rng.choice([p for p, v in paths(BASES[i])])
    add("type", replace(BASES[i], p, rng.choice(WRONG)))
big_keys = "{" + ", ".join('"k%d": %d' % (k, k) for k in range(10000)) + ', "train_batch_size": 4}'
for data in [b"", b"   \n\t ", b"\xef\xbb\xbf" + TEXTS[2], TEXTS[2].replace(b"\n", b"\r\n"),
             b"// comment\n" + TEXTS[2], b'{"train_batch_size": 4,}', b"[]", b'"text"', b"null",
             ('{"train_batch_size": 4, "s": "' + "x" * (1 << 20) + '"}').encode(), big_keys.encode(),
             b'{"train_batch_size": 4, "zero_optimization": {"stage": 3}} {"again": 1}',
             b'{"train_batch_size": 4, "\\u0000": 1}', b'{"train_batch_size": "\\ud800"}',
             b"\x00" * 64]:
    add("misc", data)

for n, (kind, data) in enumerate(mutants):
    with open("%s/m%03d-%s.json" % (out, n, kind), "wb") as f:
        f.write(data)
PY

pass=0; fail=0
: >"$T/counts"
for m in "$T"/m*.json; do
  kind=${m##*-}; kind=${kind%.json}
  timeout 5 "$ZINC" train --config "$m" --steps 1 --model mlp:4,8,3 --world-size 2 >"$T/out" 2>"$T/err"
  rc=$?
  nerr=$(grep -c '^zinc: error: ' "$T/err")
  started=$(grep -c '^zinc train: ' "$T/out")
  if grep -q 'Sanitizer\|runtime error:' "$T/err"; then what=crash
  elif [ "$rc" -eq 0 ] && [ "$nerr" -eq 0 ]; then what=accepted
  elif [ "$rc" -eq 2 ] && [ "$nerr" -eq 1 ]; then what=clean
  elif [ "$rc" -eq 1 ] && [ "$nerr" -eq 1 ] && [ "$started" -eq 1 ]; then what=runtime
  elif [ "$rc" -eq 124 ] && [ "$started" -eq 1 ]; then what=long
  elif [ "$rc" -eq 124 ]; then what=hang
  else what=crash
  fi
  echo "$kind $what" >>"$T/counts"
  case $what in
    crash|hang)
       fail=$((fail + 1))
       echo "bad Z-FUZZ-009 $(basename "$m"): $what (exit $rc, $nerr error lines)"
       head -c 600 "$T/err"; echo ;;
    *) pass=$((pass + 1)) ;;
  esac
done
# per kind: how many were accepted, cleanly refused, crashed, hung
sort "$T/counts" | uniq -c | awk '{n[$2]+=$1; c[$2]=c[$2] " " $3 " " $1} END {for (k in n) print "mutants " k ": " n[k] " (" substr(c[k], 2) ")"}' | sort
echo "mutants: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
