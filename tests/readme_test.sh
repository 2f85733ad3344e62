#!/bin/sh
# The README's commands as written (spec Z-CLI-013): every line "$ CMD | tail -N"
# of README.md is run (build/zinc as $ZINC) and its last N lines must be the N
# lines the README shows after it, time_ms and what follows it aside (tokens_per_s,
# eta_s: they measure the machine). Run from the repository root, as the
# README's commands are. Prints "readme: N passed, N failed".
. tests/lib.sh
ZINC=${ZINC:-build/zinc}
export ZINC
# under ASan (make sanitize), OpenMPI's own allocations at exit are not zinc's leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# a command, its N and its expected lines, one file each, from the README
awk -v dir="$T" '
  n > 0 { print > (dir "/want" k); n--; next }
  /^\$ .*\| tail -[0-9]+$/ {
    k++; cmd = substr($0, 3); n = cmd; sub(/.*\| tail -/, "", n); n += 0
    sub(/ \| tail -[0-9]+$/, "", cmd); print cmd > (dir "/cmd" k); print n > (dir "/n" k)
  }' README.md
norm() { sed -E 's/ time_ms=[0-9.]+.*$/ time_ms=*/'; }
k=1
while [ -f "$T/cmd$k" ]; do
  cmd=$(sed 's#build/zinc#"$ZINC"#g' "$T/cmd$k")
  # spec: Z-CLI-013 the command prints the lines the README shows
  sh -c "$cmd" 2>&1 | tail -n "$(cat "$T/n$k")" | norm >"$T/got$k"
  norm <"$T/want$k" >"$T/w$k"
  if cmp -s "$T/got$k" "$T/w$k"; then ok "Z-CLI-013 README: $(cut -c 1-100 "$T/cmd$k")"
  else bad "Z-CLI-013-$k" "$(cat "$T/cmd$k"): README shows '$(head -n 1 "$T/w$k")', got '$(head -n 1 "$T/got$k")'"; fi
  k=$((k + 1))
done
[ "$k" -gt 10 ] || bad Z-CLI-013-count "only $((k - 1)) README commands found"
# spec: Z-CLI-013 every config a README command names ships
for f in $(grep -E '^(\$ |zinc |srun |mpirun )' README.md | grep -oE -- '(--config|--base|--test|cat) [^ ]+\.json' | awk '{ print $2 }' | sort -u); do
  if [ -f "$f" ]; then ok "Z-CLI-013 $f ships"; else bad "Z-CLI-013-$f" "README names $f, which is not in the repository"; fi
done
finish readme
