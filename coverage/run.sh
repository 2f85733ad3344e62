#!/bin/sh
# make coverage: run the suite on the gcov build in $1, write the gcovr
# reports, then the per-stage table (coverage/stages.txt).
B=${1:-build-cov}
set -u
find "$B" -name '*.gcda' -delete
status=0
# the suite's parts run side by side (ZINC_TEST_JOBS, ci/run_tests.sh): each
# process merges its counts into the .gcda files at exit under libgcov's file
# lock, and -fprofile-update=atomic keeps a process's threads' counts whole, so
# the totals are those of a run one part after another
sh ci/run_tests.sh "$B" || status=1
mkdir -p coverage/html
G="gcovr -r . --object-directory $B --filter src/ --filter sim/ --exclude-unreachable-branches"
$G --json coverage/coverage.json
gcovr -a coverage/coverage.json --html-details coverage/html/index.html --html-title "zinc coverage"
gcovr -a coverage/coverage.json --txt coverage/lines.txt
gcovr -a coverage/coverage.json -b --txt coverage/branches.txt
echo "== line coverage per file (coverage/lines.txt)"
cat coverage/lines.txt
echo "== branch coverage per file (coverage/branches.txt)"
cat coverage/branches.txt
# per stage: the conformance runs of that stage alone, and how much of the
# engine code that stage's plan selects (functions tagged "plan: ...") they reach
: >coverage/stages.tsv
"$B/tests/test_plan" --dump >coverage/plans.txt
for s in 0 1 2 3; do
  find "$B" -name '*.gcda' -delete
  ZINC_SPEC_STAGE=$s "$B/zinc" spec run >/dev/null 2>&1
  $G --json "coverage/stage$s.json"
  python3 coverage/stage_table.py "$s" coverage/plans.txt "coverage/stage$s.json" src/engine/engine.c >>coverage/stages.tsv
done
python3 coverage/stage_table.py --print coverage/stages.tsv | tee coverage/stages.txt
exit $status
