#!/bin/sh
# ci/readme_figures.sh (spec Z-CLI-014) on made-up logs and READMEs: the
# figures agree, differ, are missing, and are written. Prints
# "readmefigures: N passed, N failed".
. tests/lib.sh
cat >"$T/R.md" <<'EOF'
the suite: 1500 checks here; 305 hostile
config mutants, and (305 hostile configs); failed in turn: 8576 points.
EOF
log() {   # suite mutants campaign-a campaign-b
  printf 'mutants: %s passed, 0 failed\nalloc campaign a: tried %s, clean error 1\nalloc campaign b: tried %s, clean error 2\nzinc: %s passed, 0 failed\n' "$2" "$3" "$4" "$1"
}
run() { README="$T/R.md" sh ci/readme_figures.sh "$@" >"$T/out" 2>&1; echo $? >"$T/rc"; }
# spec: Z-CLI-014 figures that agree: one line each, exit 0
log 1500 305 8000 576 >"$T/a.log"
run "$T/a.log"
if [ "$(cat "$T/rc")" = 0 ] && grep -q "^readme-figures: make test's checks: 1500, as the README says$" "$T/out" &&
   grep -q "^readme-figures: allocation-failure points: 8576, as the README says$" "$T/out" &&
   [ "$(wc -l <"$T/out")" = 3 ]; then ok "Z-CLI-014 agree"; else bad Z-CLI-014-agree "$(cat "$T/out")"; fi
# spec: Z-CLI-014 a count the README did not follow fails, naming both
log 1501 305 8000 576 >"$T/b.log"
run "$T/b.log"
if [ "$(cat "$T/rc")" = 1 ] && grep -q "^readme-figures: make test's checks: the run says 1501, $T/R.md says 1500 $" "$T/out"
then ok "Z-CLI-014 differ"; else bad Z-CLI-014-differ "$(cat "$T/out")"; fi
# spec: Z-CLI-014 a log without a figure (a failed run) fails
grep -v '^zinc:' "$T/a.log" >"$T/c.log"
run "$T/c.log"
if [ "$(cat "$T/rc")" = 1 ] && grep -q "make test's checks: not in" "$T/out"; then ok "Z-CLI-014 missing"
else bad Z-CLI-014-missing "$(cat "$T/out")"; fi
# spec: Z-CLI-014 --write puts the log's figures in, every occurrence
log 1502 306 8000 577 >"$T/d.log"
run "$T/d.log" --write
if [ "$(cat "$T/rc")" = 0 ] && grep -q "the suite: 1502 checks here; 306 hostile" "$T/R.md" &&
   grep -q "(306 hostile configs); failed in turn: 8577 points" "$T/R.md"; then ok "Z-CLI-014 write"
else bad Z-CLI-014-write "$(cat "$T/out") / $(cat "$T/R.md")"; fi
finish readmefigures
