#!/usr/bin/env bash
# The fleet suite (fleet.test.mjs): the engine double, three skiff hosts and
# a router on this machine, driven through the unmodified iii-sdk.
# Usage: fleet_run.sh <skiff binary> <engine-double binary>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -d "$here/node_modules/iii-sdk" ] || (cd "$here" && npm ci --no-audit --no-fund >&2)
cd "$here"
SKIFF_BIN="$1" ENGINE_DOUBLE="$2" node --test --test-concurrency=1 fleet.test.mjs
