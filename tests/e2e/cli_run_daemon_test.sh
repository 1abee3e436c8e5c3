#!/usr/bin/env bash
# `skiff run` through a running daemon against the same run embedded
# (docs/cli.md#skiff-run-and-a-running-daemon): a daemon listens on the
# per-user socket (a runtime directory of the test's own), and each command
# runs both ways — `--embedded`, then without it — and must give the same
# stdout, stderr and exit status byte for byte; the daemon's own counters
# show that the second way went through it. Then --url, --json, Ctrl-C,
# and nothing left behind in the daemon.
#   cli_run_daemon_test.sh SKIFF_BINARY ISOLATION
set -uo pipefail
skiff=$1
iso=$2
img=host  # the host's own userland: the jail's quickest image
[ "$iso" = microvm ] && img=base
work=$(mktemp -d)
unset SKIFF_URL SKIFF_TOKEN SKIFF_RUNTIME_DIR
# The client finds the daemon on the per-user socket of this runtime
# directory. (A backend started with it shares the host's jail locks, which
# are host-wide: docs/security.md.)
rundir=$work/run
mkdir -p "$rundir"
sock=$rundir/skiffd.sock
printf 'image_allowlist: [host, base]\nisolation: %s\npool: {%s: 1}\n' "$iso" "$img" > "$work/skiff.yaml"
"$skiff" serve --config "$work/skiff.yaml" --socket "$sock" --port 0 > "$work/skiffd.log" 2>&1 &
daemon=$!
cleanup() {
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
fail() {
  printf 'FAIL: %s\n' "$1"
  fails=$((fails + 1))
}
ok() { printf 'ok: %s\n' "$1"; }
api() { curl -sS --unix-socket "$sock" "http://localhost$1" "${@:2}"; }
for _ in $(seq 1 300); do
  api /healthz > /dev/null 2>&1 && break
  sleep 0.1
done
api /healthz > /dev/null 2>&1 || { echo "FAIL: the daemon did not start: $(cat "$work/skiffd.log")"; exit 1; }
# The sandboxes the daemon made (the test's image is pooled: each create,
# whichever call made it, either claims a pooled sandbox or boots one).
creates() {
  api /metrics | sed -n 's/^skiff_pool_\(hits\|misses\)_total{image="'"$img"'"} //p' |
    awk '{n += $1} END {print n + 0}'
}
live() { api /v1/functions/sandbox::list -X POST -d '{}' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sandboxes"]))'; }

# same DESCRIPTION RUN-ARGS...: embedded, then through the daemon; stdout,
# stderr and exit status must match, and the daemon must have made one more sandbox.
same() {
  local what=$1
  shift
  "$skiff" run --embedded "$@" > "$work/e.out" 2> "$work/e.err" < /dev/null
  local erc=$?
  local before
  before=$(creates)
  SKIFF_RUNTIME_DIR=$rundir "$skiff" run "$@" > "$work/d.out" 2> "$work/d.err" < /dev/null
  local drc=$?
  local after
  after=$(creates)
  if [ "$erc" != "$drc" ] || ! cmp -s "$work/e.out" "$work/d.out" || ! cmp -s "$work/e.err" "$work/d.err"; then
    fail "$what: embedded exit $erc, through the daemon $drc"
    printf '  embedded stdout %q stderr %q\n' "$(head -c 300 "$work/e.out")" "$(head -c 300 "$work/e.err")"
    printf '  daemon   stdout %q stderr %q\n' "$(head -c 300 "$work/d.out")" "$(head -c 300 "$work/d.err")"
  elif [ "${after:-0}" != "$(( ${before:-0} + 1 ))" ]; then
    fail "$what: the daemon did not make the sandbox (creates $before -> $after)"
  else
    ok "$what (exit $drc, $(wc -c < "$work/d.out") bytes out, $(wc -c < "$work/d.err") err)"
  fi
}

same "a command's stdout, stderr and status" "$img" --isolation "$iso" -- sh -c 'echo out; echo err >&2; exit 3'
same "arguments pass as given" "$img" --isolation "$iso" -- sh -c 'echo "$0|$1"' 'a b' 'c  d'
same "code with --lang" "$img" --isolation "$iso" --lang shell --code 'echo "code in $0"; exit 4'
same "--env reaches the command" "$img" --isolation "$iso" --env GREETING=hello -- sh -c 'echo $GREETING'
same "4.7 MB of output (more than the process's 1 MiB buffer), none of it lost or cut" "$img" --isolation "$iso" -- seq 1 700000
seq 1 700000 | cmp -s - "$work/d.out" && ok "... and it is all of seq's output" || fail "4.7 MB: not seq's whole output"
same "no stdin unless -i" "$img" --isolation "$iso" -- sh -c 'cat; echo done'
same "a timeout is S200, exit 124, output kept once" "$img" --isolation "$iso" --timeout-ms 1500 -- sh -c 'echo before; sleep 30'
same "a missing program" "$img" --isolation "$iso" -- /no/such/program
same "a signal's status" "$img" --isolation "$iso" -- sh -c 'kill -TERM $$'

# --json: the exec answer, as the embedded run prints it (its duration aside).
"$skiff" run --embedded "$img" --isolation "$iso" --json -- sh -c 'echo hi; exit 2' > "$work/e.json"
erc=$?
SKIFF_RUNTIME_DIR=$rundir "$skiff" run "$img" --isolation "$iso" --json -- sh -c 'echo hi; exit 2' > "$work/d.json"
drc=$?
strip() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("duration_ms",None); print(json.dumps(d,sort_keys=True))' "$1"; }
if [ "$erc" = 2 ] && [ "$drc" = 2 ] && [ "$(strip "$work/e.json")" = "$(strip "$work/d.json")" ]; then
  ok "--json: the same answer ($(strip "$work/d.json"))"
else
  fail "--json: embedded exit $erc $(cat "$work/e.json"), daemon exit $drc $(cat "$work/d.json")"
fi

# --url names the daemon; one that does not answer is an error, never a silent embedded run.
out=$("$skiff" run --url "unix:$sock" "$img" --isolation "$iso" -- echo via-url 2>&1)
[ "$out" = "via-url" ] && ok "--url unix:PATH" || fail "--url: $out"
out=$("$skiff" run --url "unix:$work/nobody.sock" "$img" --isolation "$iso" -- echo never 2>&1)
rc=$?
if [ $rc = 125 ] && [[ "$out" == *"no skiff daemon answers at unix:$work/nobody.sock"* ]]; then
  ok "--url to no daemon: exit 125 and why"
else
  fail "--url to no daemon: exit $rc: $out"
fi

out=$("$skiff" run --url "https://127.0.0.1:9" "$img" --isolation "$iso" -- echo never 2>&1)
rc=$?
if [ $rc = 125 ] && [[ "$out" == *"S001"*"plain HTTP"* ]] && [[ "$out" != *never* ]]; then
  ok "--url https://: refused, S001, exit 125"
else
  fail "--url https://: exit $rc: $out"
fi

# A socket file nobody listens on (a daemon that died without removing it)
# is no daemon: the run is embedded, and says nothing about it.
stale=$work/stale
mkdir -p "$stale"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$stale/skiffd.sock"
before=$(creates)
out=$(SKIFF_RUNTIME_DIR=$stale "$skiff" run "$img" --isolation "$iso" -- echo embedded 2>&1)
rc=$?
after=$(creates)
if [ $rc = 0 ] && [ "$out" = embedded ] && [ -S "$stale/skiffd.sock" ] && [ "$before" = "$after" ]; then
  ok "a stale socket: the run is embedded"
else
  fail "a stale socket: exit $rc, output $out, daemon creates $before -> $after"
fi

# Ctrl-C (SIGINT) of a run through the daemon stops its sandbox.
SKIFF_RUNTIME_DIR=$rundir "$skiff" run "$img" --isolation "$iso" -- sleep 600 > /dev/null 2> "$work/int.err" &
client=$!
# (a pooled sandbox is not listed until a create claims it)
for _ in $(seq 1 300); do [ "$(live)" -ge 1 ] && break; sleep 0.1; done
sleep 0.5  # the command started
kill -INT "$client"
wait "$client"
rc=$?
gone=0
for _ in $(seq 1 300); do [ "$(live)" = 0 ] && gone=1 && break; sleep 0.1; done
if [ $rc = 130 ] && [ $gone = 1 ] && grep -q "interrupted; stopping the sandbox" "$work/int.err"; then
  ok "SIGINT: exit 130, the daemon's sandbox stopped"
else
  fail "SIGINT: exit $rc, sandboxes left $(live), stderr $(cat "$work/int.err")"
fi

# Nothing of the runs is left in the daemon (its pool's sandbox is not listed).
n=$(live)
[ "$n" = 0 ] && ok "no run's sandbox left in the daemon" || fail "$n sandboxes left"

echo "$fails failed"
[ $fails = 0 ]
