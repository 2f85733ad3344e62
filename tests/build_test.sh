#!/bin/sh
# Build configuration checks (spec Z-BUILD): ci/configure.sh records the
# toolchains it finds after installing, rewrites build/config.mk only when
# that changes, and says so; and the layering of the sources (Z-BUILD-003,
# Z-BUILD-004). Prints "build: N passed, N failed".
#   sh tests/build_test.sh [BUILD]      (BUILD holds the libraries; default build)
B=${1:-build}
. tests/lib.sh

# spec: Z-BUILD-001 the toolchains found are recorded, after installing
sh ci/configure.sh "$T/b" 2>"$T/err1"
mpicc=$(command -v mpicc || true)
if [ -n "$mpicc" ] && grep -qx "MPICC := $mpicc" "$T/b/config.mk" && grep -q "^MPI_LINK := .*-lmpi" "$T/b/config.mk"; then
  ok "Z-BUILD-001 config.mk records mpicc ($mpicc) and its link flags"
else bad Z-BUILD-001 "mpicc '$mpicc', config.mk: $(cat "$T/b/config.mk" 2>/dev/null)"; fi

# spec: Z-BUILD-001 unchanged toolchains leave config.mk untouched (no rebuild)
touch -d '2000-01-01' "$T/b/config.mk"
before=$(stat -c %Y "$T/b/config.mk")
sh ci/configure.sh "$T/b" 2>"$T/err2"
if [ "$(stat -c %Y "$T/b/config.mk")" = "$before" ] && [ ! -s "$T/err2" ]; then
  ok "Z-BUILD-001 unchanged toolchains: config.mk keeps its time stamp"
else bad Z-BUILD-001-same "config.mk rewritten or message: $(cat "$T/err2")"; fi

# spec: Z-BUILD-001 a build configured before MPI was installed is reconfigured
sed 's/^MPICC := .*/MPICC :=/; /^MPI_/d' "$T/b/config.mk" >"$T/old" && cp "$T/old" "$T/b/config.mk"
sh ci/configure.sh "$T/b" 2>"$T/err3"
if grep -qx "MPICC := $mpicc" "$T/b/config.mk" && grep -q "toolchains changed, reconfigured" "$T/err3"; then
  ok "Z-BUILD-001 a toolchain that appeared reconfigures config.mk"
else bad Z-BUILD-001-changed "stderr '$(cat "$T/err3")', config.mk: $(cat "$T/b/config.mk")"; fi

# spec: Z-BUILD-001 every object depends on config.mk, so the change rebuilds
if make -n BUILD="$T/b" NVCC= "$T/b/src/core/layout.o" 2>/dev/null | grep -q "layout.c"; then
  ok "Z-BUILD-001 objects are rebuilt after a reconfiguration"
else bad Z-BUILD-001-rebuild "make -n does not rebuild src/core/layout.o"; fi

# spec: Z-BUILD-002 CI purges what setup.sh installs, and nothing setup.sh needs to run
setup=$(sed -n 's/^PKGS="\(.*\)"/\1/p' ci/setup.sh)
purge=$(sed -n 's/^PKGS="\(.*\)"/\1/p' ci/purge.sh)
miss=""
for p in $setup; do
  case " $purge " in *" $p "*) ;; *) case $p in gcc|make|python3) ;; *) miss="$miss $p" ;; esac ;; esac
done
# (.ci/run may run each step through its step() wrapper)
pl=$(grep -nE '^(step )?sh ci/purge.sh' .ci/run | cut -d: -f1)
dl=$(grep -nE '^(step )?make demo' .ci/run | cut -d: -f1)
if [ -z "$miss" ] && [ -n "$pl" ] && [ -n "$dl" ] && [ "$pl" -lt "$dl" ]; then
  ok "Z-BUILD-002 .ci/run purges every package setup.sh installs before make demo"
else bad Z-BUILD-002 "not purged:$miss"; fi

# spec: Z-BUILD-003 src/ includes nothing of sim/ or kernels/, and compares a
# stage number only where the stage plan is built (src/core/plan.c)
inc=$(grep -rnE '#include *"(\.\./)*(sim|kernels)/|#include *"(sim_world|cuda_dev|cublas_dl)\.h"' src || true)
if [ -z "$inc" ]; then ok "Z-BUILD-003 no file in src/ includes a sim/ or kernels/ header"
else bad Z-BUILD-003-include "$inc"; fi
cmp=$(grep -rnE '[a-z_.>-]*stage *(==|!=|<=|>=|<|>) *[0-9]|[0-9] *(==|!=|<=|>=|<|>) *[a-z_.>-]*stage\b|switch *\([a-z_.>-]*stage\)' \
      src --include='*.c' --include='*.h' | grep -v '^src/core/plan\.c:' || true)
if [ -z "$cmp" ]; then ok "Z-BUILD-003 the stage number is compared only in src/core/plan.c"
else bad Z-BUILD-003-stage "$cmp"; fi
# spec: Z-PLAN-003 the plan is built only where the config resolves
bld=$(grep -rnE '\bzn_plan_(build|offload|zeropp|mics) *\(' src sim kernels --include='*.c' --include='*.h' --include='*.cu' |
      grep -vE '^src/core/(plan\.[ch]|config\.c):' || true)
if [ -z "$bld" ]; then ok "Z-PLAN-003 the plan is built only in src/core/config.c (zn_config_plan)"
else bad Z-PLAN-003-built "$bld"; fi
# spec: Z-ENG-018 the step names none of the drills it can be hooked with
drl=$(grep -nE '\b(inject|fault)|repeat_(on|layer)|hpz_copy_delay' src/engine/engine.c || true)
if [ -z "$drl" ]; then ok "Z-ENG-018 src/engine/engine.c holds no drill (they are step hooks of src/engine/drill.c)"
else bad Z-ENG-018-drill "$drl"; fi

# spec: Z-BUILD-004 libzinc references no symbol of the layers above it
# (libzinc_app, libzinc_sim, libzinc_cuda): the link needs no --start-group
if [ -f "$B/libzinc.a" ] && [ -f "$B/libzinc_sim.a" ] && [ -f "$B/libzinc_app.a" ]; then
  nm -gu "$B/libzinc.a" | awk '{print $2}' | sort -u >"$T/und"
  for L in libzinc_app libzinc_sim libzinc_cuda; do
    [ -f "$B/$L.a" ] && nm -g --defined-only "$B/$L.a" | awk 'NF == 3 {print $3}'
  done | sort -u >"$T/above"
  up=$(comm -12 "$T/und" "$T/above" | tr '\n' ' ')
  if [ -z "$up" ] && ! grep -q 'start-group' Makefile; then ok "Z-BUILD-004 libzinc depends on no layer above it"
  else bad Z-BUILD-004 "libzinc.a needs: $up"; fi
else bad Z-BUILD-004 "$B/libzinc.a, libzinc_sim.a or libzinc_app.a missing (make tests builds them)"; fi

# spec: Z-BUILD-005 make install copies the built zinc to PREFIX/bin (the
# binary is taken as built: -o keeps make from rebuilding it with other flags)
make -s install BUILD="$B" PREFIX="$T/prefix" -o "$B/zinc" >"$T/inst" 2>&1
if [ -x "$T/prefix/bin/zinc" ] && cmp -s "$B/zinc" "$T/prefix/bin/zinc" &&
   [ "$("$T/prefix/bin/zinc" train --steps 3 | tail -n 1)" = "$("$B/zinc" train --steps 3 | tail -n 1)" ]; then
  ok "Z-BUILD-005 make install PREFIX=DIR: DIR/bin/zinc, the same binary and digest"
else bad Z-BUILD-005 "$(cat "$T/inst")"; fi
# spec: Z-DSP-010 and the worker zinc stepper --peer deepspeed runs, found there
if cmp -s tests/peer_ds_worker.py "$T/prefix/share/zinc/peer_ds_worker.py" &&
   cmp -s tests/peer_common.py "$T/prefix/share/zinc/peer_common.py"; then
  ok "Z-DSP-010 make install PREFIX=DIR: DIR/share/zinc/peer_ds_worker.py and peer_common.py"
else bad Z-DSP-010-install "$(ls -R "$T/prefix" | tr '\n' ' ')"; fi

finish build
