#!/bin/sh
# make test-nodes' tools: ip and tc (Debian's iproute2), installed as root
# where missing. Without root nothing is installed, and tests/nodes_test.sh
# says it was skipped.
[ "$(id -u)" = 0 ] || exit 0
command -v ip >/dev/null && command -v tc >/dev/null && exit 0
echo "ci/setup_nodes.sh: installing iproute2"
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2
