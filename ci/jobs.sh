# jobs.sh: what ci/run_tests.sh and ci/memcheck.sh share (sourced, from the
# repository root) to run their checks side by side:
#   JOBS   how many run at a time: ZINC_TEST_JOBS, default the core count;
#          anything but a count of 1 or more stops the script (exit 2)
#   $D     a temporary folder for their logs, removed at exit
#   slots  opens fd 3 on a pipe holding JOBS tokens: a check takes one
#          (read -r _ <&3) to start and gives it back (echo >&3) when it ends
# An interrupted or terminated run ends its whole process group: the checks'
# background processes ignore SIGINT, as a shell's background jobs do.
JOBS=${ZINC_TEST_JOBS:-$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
case $JOBS in '' | *[!0-9]* | 0) echo "${0##*/}: ZINC_TEST_JOBS='$JOBS': expected a count of 1 or more" >&2; exit 2 ;; esac
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
trap 'trap "" INT TERM; kill -TERM 0 2>/dev/null; exit 130' INT TERM
slots() {
  mkfifo "$D/slots"
  exec 3<>"$D/slots"
  _i=0
  while [ $_i -lt "$JOBS" ]; do echo >&3; _i=$((_i + 1)); done
}
