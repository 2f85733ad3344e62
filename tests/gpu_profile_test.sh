#!/bin/sh
# ZINC_CUDA_PROFILE (spec Z-CUDA-011), for make test-gpu: needs a GPU. A
# profiled run prints the same digest as an unprofiled one, and at exit one
# "cuda profile:" line per kernel name with its calls and milliseconds.
# Exits non-zero on any failure.
ZINC=${1:-build/zinc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
A="train --backend cuda --stage 2 --dtype bf16 --world-size 2 --steps 3"
# spec: Z-CUDA-011 profiling changes no bit
"$ZINC" $A >"$T/plain" 2>&1
ZINC_CUDA_PROFILE=1 "$ZINC" $A >"$T/prof" 2>"$T/err"
d1=$(grep '^digest=' "$T/plain"); d2=$(grep '^digest=' "$T/prof")
[ -n "$d1" ] && [ "$d1" = "$d2" ] || { echo "FAIL Z-CUDA-011: digest '$d1' unprofiled, '$d2' profiled"; fail=1; }
# spec: Z-CUDA-011 the table: a total line, then the fast table's GEMM and Adam with their calls
grep -q '^cuda profile: [0-9.]* ms in the calls below' "$T/err" &&
  grep -Eq '^cuda profile: gemm \(cublas\) +[1-9][0-9]* calls +[0-9.]+ ms' "$T/err" &&
  grep -Eq '^cuda profile: adam +[1-9][0-9]* calls' "$T/err" ||
  { echo "FAIL Z-CUDA-011: the profile table: $(head -c 600 "$T/err")"; fail=1; }
# spec: Z-CUDA-011 without the variable nothing is printed
grep -q 'cuda profile' "$T/plain" && { echo "FAIL Z-CUDA-011: an unprofiled run printed a profile"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok   ZINC_CUDA_PROFILE: same digest, one line per kernel"
exit $fail
