#!/bin/sh
# make coverage: run the suite on the gcov build in $1, write the gcovr
# reports, then the table per stage and per plan feature (coverage/stages.txt,
# coverage/stages-unreached.txt; coverage/stage_table.py).
B=${1:-build-cov}
set -u
find "$B" -name '*.gcda' -delete
rm -rf "$B/covkeys" "$B/covsets"
# every process writes its counts under $B/covkeys/: those of a plan's engines
# under that plan's key (src/core/covmark.h), the rest under "none" (a
# program without covmark.c, too, by these). The strip drops the object
# folder from the compiled-in absolute .gcda paths.
obj=$(pwd)/$B
GCOV_PREFIX=$obj/covkeys/none
GCOV_PREFIX_STRIP=$(printf %s "$obj" | tr -cd / | wc -c)
export GCOV_PREFIX GCOV_PREFIX_STRIP
status=0
# the suite's parts run side by side (ZINC_TEST_JOBS, ci/run_tests.sh): each
# process merges its counts into the .gcda files at exit under libgcov's file
# lock, and -fprofile-update=atomic keeps a process's threads' counts whole, so
# the totals are those of a run one part after another
sh ci/run_tests.sh "$B" || status=1
# every conformance case again with each rank in its own process over tcp,
# beside the simulator's run (Z-SPEC-005; make test runs a subset in
# tests/proc_test.sh): the transports' counts (comm_tcp.c, the process
# exchange of coll.c, store.c) then go to the rows' own "spec-..." keys
echo "== zinc spec run --backend tcp"
"$B/zinc" spec run --backend tcp >"$B/spec-tcp.log" 2>&1 || status=1
grep -E '^(FAIL|skip|spec:) ' "$B/spec-tcp.log"
# the conformance cases again on the host's other instruction sets and
# with host threads (Z-HOST-001, -002: the vector paths, and with two threads the threaded
# GEMM, Adam and language-model kernels): their bitwise expectations must
# hold on each, and the kernels each selects count as the rows' own cases
for run in "scalar 2" "sse2 1" "avx2 1"; do
  set -- $run
  echo "== ZINC_ISA=$1 ZINC_NUM_THREADS=$2 zinc spec run"
  # the engine's, GPT-2's and the dtypes' cases (every stage, GA, fp16/bf16,
  # the language model's kernels): all 239 on each set took 7 minutes a set
  # under gcov on CI's 2 cores, past its hour
  ZINC_ISA=$1 ZINC_NUM_THREADS=$2 "$B/zinc" spec run spec/cases/engine spec/cases/gpt2 spec/cases/precision \
    >"$B/spec-$1.log" 2>&1 || status=1
  grep -E '^(FAIL|spec:) ' "$B/spec-$1.log"
done
# zinc stepper and zinc compare --peer deepspeed (src/app/cli_peer.c) need
# DeepSpeed itself: where the peers' venv is made (make test-deepspeed; CI
# makes it before this step), their checks (tests/peer_deepspeed.py) run on
# this build too; where it is not, the table's lines say so
VENV=${PEER_VENV:-build/peer-venv}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import deepspeed' >/dev/null 2>&1; then
  echo "coverage: zinc stepper/compare --peer deepspeed on this build (log: $B/peer-cov.log)"
  PATH="$(pwd)/$VENV/bin:$PATH" DS_ACCELERATOR=cpu "$VENV/bin/python" tests/peer_deepspeed.py --zinc "$B/zinc" \
    --work "$B/deepspeed-cov" --only stepper,compare >"$B/peer-cov.log" 2>&1 ||
    { status=1; grep -v '^\[20' "$B/peer-cov.log" | tail -n 20; }
else
  echo "coverage: no DeepSpeed venv at $VENV (make test-deepspeed makes it): src/app/cli_peer.c's runs are not counted"
fi
unset GCOV_PREFIX GCOV_PREFIX_STRIP
# the counts by plan are what the table says they are (Z-BUILD-006)
sh tests/coverage_keys_test.sh "$B" || status=1
mkdir -p coverage/html
# the keys merged: coverage/coverage.json (src/ and sim/), then the table
python3 coverage/stage_table.py "$B" || status=1
gcovr -a coverage/coverage.json --html-details coverage/html/index.html --html-title "zinc coverage"
gcovr -a coverage/coverage.json --txt coverage/lines.txt
gcovr -a coverage/coverage.json -b --txt coverage/branches.txt
echo "== line coverage per file (coverage/lines.txt)"
cat coverage/lines.txt
echo "== branch coverage per file (coverage/branches.txt)"
cat coverage/branches.txt
echo "== per stage and per plan feature (coverage/stages.txt; every place in coverage/stages-unreached.txt)"
cat coverage/stages.txt
exit $status
