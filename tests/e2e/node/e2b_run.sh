#!/usr/bin/env bash
# Starts a real skiffd on a free loopback port and runs the e2b SDK suite
# against its E2B-compatible API.
# Usage: e2b_run.sh <skiff binary> <jail|microvm> [test file, default e2b.test.mjs]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skiff=$1
isolation=${2:-jail}
suite=${3:-e2b.test.mjs}
[ -d "$here/node_modules/e2b" ] && [ -d "$here/node_modules/@e2b/code-interpreter" ] || (cd "$here" && npm ci --no-audit --no-fund >&2)
tmp=$(mktemp -d)
cat > "$tmp/skiff.yaml" <<YAML
image_allowlist: [python, node, base, host, code-interpreter]
isolation: $isolation
auth_token: skiff-e2e-key
YAML
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$skiff" serve --port "$port" --config "$tmp/skiff.yaml" > "$tmp/skiffd.log" 2>&1 &
daemon=$!
cleanup() { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || { cat "$tmp/skiffd.log" >&2; exit 1; }
  sleep 0.1
done
cd "$here"
export E2B_API_KEY=skiff-e2e-key E2B_API_URL="http://127.0.0.1:$port/e2b" E2B_SANDBOX_URL="http://127.0.0.1:$port/e2b"
export SKIFF_E2B_ISOLATION="$isolation"
node --test --test-concurrency=1 ${SKIFF_E2B_TEST_ARGS:-} "$suite" || { echo "--- skiffd log" >&2; tail -50 "$tmp/skiffd.log" >&2; exit 1; }
