#!/usr/bin/env bash
# Starts a real skiffd on a free loopback port and runs the iii-sdk suite
# against it. Usage: run.sh <path to the skiff binary>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skiff=$1
[ -d "$here/node_modules/iii-sdk" ] && [ -d "$here/node_modules/@seriousme/openapi-schema-validator" ] || (cd "$here" && npm ci --no-audit --no-fund >&2)
tmp=$(mktemp -d)
cat > "$tmp/skiff.yaml" <<YAML
image_allowlist: [python, node, base, host]
isolation: jail
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
SKIFF_URL="ws://127.0.0.1:$port" SKIFF_HTTP="http://127.0.0.1:$port" node --test --test-concurrency=1 iii.test.mjs openapi.test.mjs || { echo "--- skiffd log" >&2; tail -50 "$tmp/skiffd.log" >&2; exit 1; }
