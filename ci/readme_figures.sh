#!/bin/sh
# The README's counts, from the run that prints them (issue 31): the suite's
# checks, the hostile config mutants and the allocation-failure points, read
# off `make test`'s log. CI runs it after make test and fails where the README
# says otherwise; --write puts the log's figures into the README.
#   sh ci/readme_figures.sh LOG [--write]
LOG=$1
README=${README:-README.md}
[ -r "$LOG" ] || { echo "readme-figures: cannot read the make test log '$LOG'"; exit 1; }
suite=$(sed -n 's/^zinc: \([0-9][0-9]*\) passed, 0 failed$/\1/p' "$LOG" | tail -n 1)
mutants=$(sed -n 's/^mutants: \([0-9][0-9]*\) passed, 0 failed$/\1/p' "$LOG" | tail -n 1)
points=$(sed -n 's/^alloc campaign [^:]*: tried \([0-9][0-9]*\),.*/\1/p' "$LOG" | awk '{ s += $1 } END { if (NR) print s }')
rc=0
# one figure: its name, the log's value, and the sed pattern of its README
# text with the number as \1 (every occurrence must say the same)
figure() {
  name=$1 want=$2 pat=$3
  if [ -z "$want" ]; then
    echo "readme-figures: $name: not in $LOG (a failed or partial run?)"
    rc=1
    return
  fi
  if [ "$WRITE" = 1 ]; then
    sed -i "s/$pat/$(echo "$pat" | sed 's/\\(\[0-9\]\[0-9\]\*\\)/'"$want"'/')/g" "$README"
  fi
  # grep -o finds each match from its leftmost digit; sed then takes the number
  got=$(grep -o "$(echo "$pat" | sed 's/\\[()]//g')" "$README" | sed "s/$pat/\\1/" | sort -u | tr '\n' ' ')
  if [ "$got" = "$want " ]; then
    echo "readme-figures: $name: $want, as the README says"
  else
    echo "readme-figures: $name: the run says $want, $README says ${got:-nothing}"
    rc=1
  fi
}
WRITE=0
[ "$2" = --write ] && WRITE=1
figure "make test's checks" "$suite" 'the suite: \([0-9][0-9]*\) checks'
figure "hostile config mutants" "$mutants" '\([0-9][0-9]*\) hostile'
figure "allocation-failure points" "$points" 'failed in turn: \([0-9][0-9]*\) points'
exit $rc
