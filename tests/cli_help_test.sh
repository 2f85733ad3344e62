#!/bin/sh
# --help on every command (spec Z-CLI-012): each command that `zinc help`
# lists answers `--help` and `-h` with its own usage on stdout, nothing on
# stderr, exit 0; a "--help" after launch's "--" belongs to the launched
# command. Prints "clihelp: N passed, N failed".
. tests/lib.sh
ZINC=${ZINC:-build/zinc}
cmds=$("$ZINC" help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p' | grep -v '^version$')
[ "$(echo "$cmds" | wc -w)" -ge 11 ] || bad Z-CLI-012-list "zinc help lists: $cmds"
for c in $cmds; do
  for h in --help -h; do
    # spec: Z-CLI-012 each listed command's own usage, on stdout, exit 0
    "$ZINC" "$c" $h >"$T/o" 2>"$T/e"
    rc=$?
    if [ $rc -eq 0 ] && [ ! -s "$T/e" ] && grep -Eq "^(usage: )?zinc $c( |$)" "$T/o"; then ok "Z-CLI-012 zinc $c $h"
    else bad "Z-CLI-012-$c$h" "exit $rc, stdout '$(head -n 1 "$T/o")', stderr '$(head -n 1 "$T/e")'"; fi
  done
done
# spec: Z-CLI-012 --help among other flags, and not when it follows launch's --
if "$ZINC" train --steps 3 --help | grep -q '^zinc train \[--config FILE\]'; then ok "Z-CLI-012 --help after other flags"
else bad Z-CLI-012-mid "zinc train --steps 3 --help"; fi
"$ZINC" launch --nproc-per-node 1 --master-port 29599 -- zinc train -h >"$T/l" 2>&1
if grep -q '^\[rank0\]: zinc train \[--config FILE\]' "$T/l" && ! grep -q '^usage: zinc launch' "$T/l"; then
  ok "Z-CLI-012 launch passes -h after -- to its command"
else bad Z-CLI-012-launch "$(head -n 2 "$T/l")"; fi
finish clihelp
