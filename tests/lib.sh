# lib.sh: what the shell check scripts share (sourced, from the repository
# root): a temporary folder $T removed at exit, the ok/bad counters, and
# `finish NAME`, which prints the closing line ci/run_tests.sh reads
# ("NAME: N passed, N failed") and sets the exit status.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
finish() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
# next_port: the next TCP port after $PORT that nothing on this machine
# uses (listening or connected, per /proc/net/tcp*), so two suites running
# side by side do not take each other's rendezvous ports
next_port() {
  PORT=$((PORT + 1))
  while grep -qi ":$(printf %04X "$PORT") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do PORT=$((PORT + 1)); done
}
