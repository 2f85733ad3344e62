#!/bin/sh
# Allocation-failure loop (spec Z-CKPT-012; SQLite's malloc test is the
# model): for k = 1, 2, ... the k-th allocation after main() fails
# (tests/failmalloc.c, LD_PRELOADed), through a run that saves a checkpoint
# at every step, at each stage 0-3 and dtype fp32/fp16/bf16, and a stage-3
# resume that saves again; until k passes the run's last allocation. Every point must end in
# a clean error (exit 1-3 and a "zinc: error:" line) or recover completely
# (exit 0, the right digest, a checkpoint that verifies); `latest`, when
# present, must always name a checkpoint that verifies. A crash, a hang, an
# exit 0 with anything wrong, or a broken `latest` fails the campaign.
# Prints one line of counts per campaign, then "alloc: N passed, N failed".
#   sh tests/alloc_test.sh [BUILD]        (BUILD holds zinc and tests/libfailmalloc.so)
# (sh tests/alloc_test.sh --one K...: those points, with the campaign in the environment)
if [ "$1" = "--one" ]; then
  shift
  POINTS="$*"
else
B=${1:-build}
ZINC=${ZINC:-$B/zinc}
case "$ZINC" in /*) ;; *) ZINC="$(pwd)/$ZINC" ;; esac
SHIM="$(pwd)/$B/tests/libfailmalloc.so"
# An LD_PRELOADed malloc cannot stand before ASan's: under a sanitizer
# build the campaign runs on the plain build beside it when there is one.
if ldd "$ZINC" 2>/dev/null | grep -q 'libasan\|libubsan'; then
  if [ -x build/zinc ] && [ -f build/tests/libfailmalloc.so ] && ! ldd build/zinc | grep -q libasan; then
    echo "alloc: $ZINC is a sanitizer build; the loop runs on build/zinc"
    ZINC="$(pwd)/build/zinc"; SHIM="$(pwd)/build/tests/libfailmalloc.so"
  else
    echo "alloc: $ZINC is a sanitizer build and build/zinc is not there: the loop needs a plain build"
    echo "alloc: 0 passed, 1 failed"
    exit 1
  fi
fi
[ -f "$SHIM" ] || { echo "alloc: $SHIM missing (make tests builds it)"; echo "alloc: 0 passed, 1 failed"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fi
pass=0
fail=0

S3="train --stage 3 --world-size 2 --model mlp:6,8,4 --steps 2 --train-batch-size 8 --steps-per-print 0"
B2="train --stage 2 --world-size 2 --dtype bf16 --model mlp:6,8,4 --steps 2 --train-batch-size 8 --steps-per-print 0"
R3="train --stage 3 --world-size 2 --model mlp:6,8,4 --steps 3 --train-batch-size 8 --steps-per-print 0"

digest() { sed -n 's/^digest=\([0-9a-f]*\)$/\1/p' "$1" | tail -n 1; }

# one K: runs point k of campaign $NAME ($ARGS, expected digest $WANT, a
# pristine checkpoint to start from in $SEED or none); prints one word
one() {
  k=$1
  d="$T/$NAME.$k"
  rm -rf "$d"
  if [ -n "$SEED" ]; then cp -r "$SEED" "$d"; else mkdir -p "$d"; fi
  extra=""
  [ -n "$SEED" ] && extra="--resume"
  # the shim counts and fails zinc's allocations alone (ZN_FAIL_ALLOC_PROG),
  # not timeout's
  ZN_FAIL_ALLOC=$k ZN_FAIL_ALLOC_REPORT="$d.rep" ZN_FAIL_ALLOC_PROG=zinc LD_PRELOAD="$SHIM" \
    timeout 30 "$ZINC" $ARGS --checkpoint-dir "$d" --checkpoint-interval 1 $extra >"$d.out" 2>"$d.err"
  rc=$?
  if [ ! -f "$d.rep" ] && [ "$rc" -lt 124 ]; then echo "crash"; return; fi
  fired=1
  [ -f "$d.rep" ] && read -r _ _ _ fired <"$d.rep"   # "allocations N fired F", read by the shell itself
  if [ "$fired" = 0 ] && [ "$rc" = 0 ]; then echo "beyond"; rm -rf "$d" "$d.rep" "$d.out" "$d.err"; return; fi
  latest_ok=1
  if [ -f "$d/latest" ]; then
    read -r tag <"$d/latest"
    "$ZINC" ckpt inspect "$d/$tag" >/dev/null 2>&1 || latest_ok=0
  fi
  if [ "$rc" = 124 ]; then w=hang
  elif [ "$rc" -gt 124 ]; then w=crash
  elif [ $latest_ok = 0 ]; then w=broken-latest
  elif [ "$rc" = 0 ]; then
    if [ "$(digest "$d.out")" = "$WANT" ]; then w=recovered; else w=silent; fi
  elif grep -q "^zinc: error: " "$d.err"; then w=clean
  else w=unexplained
  fi
  [ "$w" = clean ] || [ "$w" = recovered ] || echo "  $NAME k=$k: $w (rc $rc): $(tail -n 1 "$d.err")" >&2
  echo "$w"
  rm -rf "$d" "$d.rep" "$d.out" "$d.err"
}

campaign() {   # name, args, seed checkpoint (or "")
  NAME=$1; ARGS=$2; SEED=$3
  "$ZINC" $ARGS >"$T/$NAME.want" 2>&1
  WANT=$(digest "$T/$NAME.want")
  export NAME ARGS SEED WANT ZINC SHIM T
  : >"$T/$NAME.words"
  # how many allocations the run makes: one counting run (ZN_FAIL_ALLOC=0),
  # then every point 1..N, two at a time, 25 points to a shell
  d="$T/$NAME.count"
  mkdir -p "$d"
  [ -n "$SEED" ] && { rm -rf "$d"; cp -r "$SEED" "$d"; }
  extra=""
  [ -n "$SEED" ] && extra="--resume"
  ZN_FAIL_ALLOC=0 ZN_FAIL_ALLOC_REPORT="$d.rep" ZN_FAIL_ALLOC_PROG=zinc LD_PRELOAD="$SHIM" \
    "$ZINC" $ARGS --checkpoint-dir "$d" --checkpoint-interval 1 $extra >/dev/null 2>&1
  n=0
  [ -f "$d.rep" ] && read -r _ n _ <"$d.rep"
  rm -rf "$d" "$d.rep"
  [ "$n" -gt 20000 ] && { echo "  $NAME: more than 20000 allocations?" >&2; n=20000; }
  # one point past the end, to see the run finish untouched
  seq 1 $((n + 1)) | xargs -P 2 -n 25 sh "$0" --one >>"$T/$NAME.words"
  tried=$(grep -vc beyond "$T/$NAME.words")
  c() { grep -cx "$1" "$T/$NAME.words"; }
  bad=$(( $(c crash) + $(c hang) + $(c silent) + $(c broken-latest) + $(c unexplained) ))
  echo "alloc campaign $NAME: tried $tried, clean error $(c clean), recovered $(c recovered), crash $(c crash), hang $(c hang), silently accepted $(c silent), broken latest $(c broken-latest), unexplained $(c unexplained)"
  if [ "$tried" -gt 100 ] && [ "$bad" = 0 ]; then
    echo "ok   Z-CKPT-012 $NAME: every one of $tried failed allocations ends cleanly"; pass=$((pass + 1))
  else echo "FAIL Z-CKPT-012 $NAME: $bad bad points of $tried"; fail=$((fail + 1)); fi
}

if [ -n "$POINTS" ]; then
  for k in $POINTS; do one "$k"; done
  exit 0
fi

# spec: Z-CKPT-012 the loop over every allocation of a run that saves a
# checkpoint at every step, at every stage and dtype, and of a resume;
# Z-CKPT-011 a failure while building a manifest fails the save and keeps
# `latest` (the "broken latest" and "silently accepted" counts must stay 0)
for st in 0 1 2 3; do
  for dt in fp32 fp16 bf16; do
    campaign "stage$st-$dt-save" "train --stage $st --world-size 2 --dtype $dt --model mlp:6,8,4 --steps 2 --train-batch-size 8 --steps-per-print 0" ""
  done
done
# a checkpoint at step 2 to resume from (no shim)
mkdir -p "$T/seed"
"$ZINC" $S3 --checkpoint-dir "$T/seed" --checkpoint-interval 2 >/dev/null 2>&1
campaign stage3-resume "$R3" "$T/seed"

echo "alloc: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
