#!/usr/bin/env bash
# The fleet suite (fleet.test.mjs): the engine double (wss:// with a test
# CA), three skiff hosts and a router on this machine, a fourth host in a
# network namespace behind a veth link, driven through the unmodified
# iii-sdk.
# Usage: fleet_run.sh <skiff binary> <engine-double binary> <test-ca binary>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -d "$here/node_modules/iii-sdk" ] || (cd "$here" && npm ci --no-audit --no-fund >&2)
# A run killed before its own cleanup (a ctest timeout) leaves its network
# namespace, and with it the veth link; each is named after the node
# process's pid, so those of runs no longer alive go now.
for ns in $(ip netns list 2>/dev/null | awk '/^skiff-fleet-[0-9]+( |$)/ {print $1}'); do
  kill -0 "${ns#skiff-fleet-}" 2>/dev/null || ip netns del "$ns" || true
done
tls=$(mktemp -d /tmp/skiff-fleet-tls-XXXXXX)
trap 'rm -rf "$tls"' EXIT
# The root side of the partitioned host's veth link; its certificate names it.
partition_ip=10.231.$(($$ % 250 + 1)).1
"$3" "$tls" "$partition_ip"
cd "$here"
SKIFF_BIN="$1" ENGINE_DOUBLE="$2" FLEET_TLS_DIR="$tls" PARTITION_IP="$partition_ip" \
  NODE_EXTRA_CA_CERTS="$tls/ca.pem" node --test --test-concurrency=1 fleet.test.mjs
