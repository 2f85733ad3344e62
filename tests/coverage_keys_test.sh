#!/bin/sh
# spec: Z-BUILD-006 the coverage build's counts by plan (src/core/covmark.h),
# checked after make coverage's suite (coverage/run.sh): there are keys of
# conformance cases, of the rest of the suite and of runs with a failure
# injected, every process's start (main) is counted under no plan's key,
# and no plan's key counted main():
# what ran before a world or an engine (parsing, loading) is not the plan's.
# Usage: sh tests/coverage_keys_test.sh BUILD   (after coverage/run.sh's suite)
B=${1:-build-cov}
. tests/lib.sh
K="$B/covkeys"
if ls "$K" 2>/dev/null | grep -q '^spec-s[0-3]-' && ls "$K" | grep -q '^suite-s[0-3]-' && ls "$K" | grep -q '^fault-s[0-3]-'; then
  ok Z-BUILD-006-keys
else bad Z-BUILD-006-keys "no spec-*, suite-* or fault-* key under $K: $(ls "$K" 2>/dev/null | head -5 | tr '\n' ' ')"; fi
out=$(python3 - "$B" <<'PY'
import os, sys
sys.path.insert(0, 'coverage')
import stage_table
b = sys.argv[1]
names = sorted(os.listdir(os.path.join(b, 'covkeys')))
print(stage_table.main_counted(b, 'none'), ' '.join(stage_table.check_attribution(b, names)))
PY
)
none=${out%% *}
leaked=${out#* }
if [ "${none:-0}" -gt 0 ] 2>/dev/null; then ok Z-BUILD-006-none
else bad Z-BUILD-006-none "main() counted $none times under the key none"; fi
if [ -z "$leaked" ]; then ok Z-BUILD-006-main
else bad Z-BUILD-006-main "main() counted under a plan's key (what ran before its engines): $leaked"; fi
finish coverage-keys
