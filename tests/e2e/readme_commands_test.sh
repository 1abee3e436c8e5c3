#!/usr/bin/env bash
# The README's commands through ./skiff, exactly as a user types them, and
# a few more (exit codes, stderr separation, --file, -- cmd): stdout must be
# the sandbox's output byte for byte, with nothing from the wrapper or the
# bootstrap on it. Runs after a full build: the wrapper must find nothing to
# rebuild (its second call says nothing on stderr).
#   readme_commands_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
export SKIFF_BUILD_DIR=$2
# isolation stays `auto`, as a user gets it: jail here, a microVM where KVM
# boots guests; the output must be the same either way.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0

# expect WANT_RC WANT_STDOUT CMD... : runs CMD, compares exit code and stdout.
expect() {
  local want_rc=$1 want_out=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if [ "$rc" != "$want_rc" ] || ! printf '%s' "$want_out" | cmp -s - "$work/out"; then
    printf 'FAIL: %s\n  exit %s (want %s)\n  stdout: %q\n  want:   %q\n  stderr: %s\n' \
      "$*" "$rc" "$want_rc" "$(cat "$work/out")" "$want_out" "$(tail -c 600 "$work/err")"
    fails=$((fails + 1))
  else
    printf 'ok: %s\n' "$*"
  fi
}

skiff=$src/skiff
# First call may write the wrapper's manifest; the second must take the
# fast path: same stdout, an empty stderr.
expect 0 "skiff $("$SKIFF_BUILD_DIR/cmd/skiff/skiff" version | sed 's/^skiff //')
" "$skiff" version
expect 0 "$(cat "$work/out")
" "$skiff" version
if [ -s "$work/err" ]; then
  printf 'FAIL: ./skiff version after a full build said on stderr: %s\n' "$(cat "$work/err")"
  fails=$((fails + 1))
fi

# README quickstart and "More:" (serve runs until stopped: not here).
expect 0 $'42\n' "$skiff" run python --lang python --code 'print(6*7)'
# Each sandbox names itself skiff-<8 hex>: check the whole stdout's shape.
"$skiff" run host -- sh -c 'echo hi; uname -n' > "$work/out" 2> "$work/err"
rc=$?
if [ $rc != 0 ] || ! grep -qxE 'skiff-[0-9a-f]{8}' <(sed -n 2p "$work/out") ||
   [ "$(head -n 1 "$work/out")" != hi ] || [ "$(wc -c < "$work/out")" != 18 ]; then
  printf 'FAIL: run host -- sh -c "echo hi; uname -n": exit %s, stdout %q\n' "$rc" "$(cat "$work/out")"
  fails=$((fails + 1))
else
  echo "ok: run host -- sh -c 'echo hi; uname -n'"
fi
expect 0 $'2\n' "$skiff" run node --lang node --code 'console.log(1+1)'
printf 'import sys\nprint("from a file", sys.argv[0] != "")\n' > script.py
expect 0 $'from a file True\n' "$skiff" run python --file script.py
"$skiff" doctor > "$work/out" 2> "$work/err"
rc=$?
if [ $rc != 0 ] || [ ! -s "$work/out" ]; then
  echo "FAIL: ./skiff doctor exited $rc with stdout of $(wc -c < "$work/out") bytes"
  fails=$((fails + 1))
fi

# Exit codes pass through; stderr stays on stderr.
expect 7 "" "$skiff" run host -- sh -c 'exit 7'
expect 0 $'out\n' "$skiff" run host -- sh -c 'echo out; echo err >&2'
if [ "$(cat "$work/err")" != err ]; then
  printf 'FAIL: stderr was %q, want "err"\n' "$(cat "$work/err")"
  fails=$((fails + 1))
fi
expect 3 $'a b\n' "$skiff" run python -- sh -c 'echo "$0 $1"; exit 3' a b
printf 'echo from sh; exit 4\n' > script.sh
expect 4 $'from sh\n' "$skiff" run host --file script.sh

[ $fails = 0 ] && echo "all README commands behave" || echo "$fails failed"
[ $fails = 0 ]
