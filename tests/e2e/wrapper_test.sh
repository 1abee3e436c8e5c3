#!/usr/bin/env bash
# ./skiff's fast path end to end, in a checkout of its own: the real wrapper
# and a copy of the real binary, with a scripts/bootstrap that records each
# call and writes the manifest with the real bootstrap's own function. The
# binary must go on when nothing changed, and hand every kind of change back
# to the wrapper, which bootstraps once and then runs the command; stdout
# stays the command's own.
#   wrapper_test.sh SOURCE_DIR SKIFF_BINARY
set -uo pipefail
src=$1
binary=$2
co=$(mktemp -d)
trap 'rm -rf "$co"' EXIT
fails=0
fail() { printf 'FAIL: %s\n' "$*"; fails=$((fails + 1)); }

mkdir -p "$co/scripts" "$co/src" "$co/build/release/cmd/skiff"
cp "$src/skiff" "$co/skiff"
cp "$binary" "$co/build/release/cmd/skiff/skiff"
printf 'int a;\n' > "$co/src/a.cc"
printf '#pragma once\n' > "$co/src/b.h"
# The real bootstrap's manifest writer, so the test follows its format.
manifest_fn=$(grep -E '^manifest\(\) \{.*\}$' "$src/scripts/bootstrap")
[ -n "$manifest_fn" ] || { echo "FAIL: scripts/bootstrap has no one-line manifest() function"; exit 1; }
cat > "$co/scripts/bootstrap" <<BOOT
#!/usr/bin/env bash
set -euo pipefail
root=\$(cd "\$(dirname "\$0")/.." && pwd)
b=\$root/build/release
echo "bootstrap \$*" >> "\$root/calls"
$manifest_fn
printf '%s\n' "\$root/src/a.cc" "\$root/src/b.h" "\$root/src" > "\$b/.inputs.list"
mapfile -t list < "\$b/.inputs.list"
manifest "\${list[@]}" > "\$b/.inputs"
mkdir -p "\$b/.ready"
: > "\$b/.ready/checks-inputs"
echo "bootstrap said this" >&2
BOOT
chmod +x "$co/scripts/bootstrap"
: > "$co/calls"
want="$("$binary" version)"

# check WHAT WANT_CALLS: ./skiff version prints the version and only that
# on stdout; the bootstrap has run WANT_CALLS times in all.
check() {
  local what=$1 want_calls=$2 out rc
  out=$(cd / && "$co/skiff" version 2> "$co/err")
  rc=$?
  if [ $rc != 0 ] || [ "$out" != "$want" ]; then
    fail "$what: exit $rc, stdout '$out' (want '$want')"
  fi
  local calls
  calls=$(wc -l < "$co/calls")
  [ "$calls" = "$want_calls" ] || fail "$what: the bootstrap ran $calls times in all, want $want_calls"
  if [ "$calls" = "$want_calls" ]; then echo "ok: $what"; fi
}

check "a first call (no manifest) bootstraps" 1
grep -q 'bootstrap said this' "$co/err" || fail "the bootstrap's words did not reach stderr"
check "nothing changed: the binary goes on" 1
[ -s "$co/err" ] && fail "nothing changed, yet stderr said: $(cat "$co/err")"
printf 'int b;\n' >> "$co/src/a.cc"
check "an edit in place" 2
check "nothing changed after it" 2
touch -d '2001-01-01 00:00' "$co/src/b.h"
check "an mtime set backwards" 3
: > "$co/src/c.cc"
check "a new file" 4
cp -p "$co/src/a.cc" "$co/a.new" && mv "$co/a.new" "$co/src/a.cc"
check "a rewrite by rename with the same size and mtime" 5
rm "$co/src/c.cc"
check "a deleted file" 6
rm "$co/build/release/.ready/checks-inputs"
check "a build dir from before the binary checked (no marker)" 7
check "and then nothing changed" 7

# The hand-back keeps the arguments: a stale call fails in the binary
# exactly as a direct one does.
printf '\n' >> "$co/src/b.h"
direct_err=$("$binary" version extra-arg 2>&1 >/dev/null)
direct_rc=$?
(cd / && "$co/skiff" version extra-arg > "$co/out" 2> "$co/err")
rc=$?
if [ $rc != "$direct_rc" ] || [ "$(grep -v 'bootstrap said this' "$co/err")" != "$direct_err" ] ||
   [ -s "$co/out" ]; then
  fail "a stale 'version extra-arg': exit $rc (want $direct_rc), stderr $(tail -c 300 "$co/err")"
fi
[ "$(wc -l < "$co/calls")" = 8 ] || fail "the stale call did not bootstrap exactly once"
grep -qx 'bootstrap ' <(tail -n 1 "$co/calls") || fail "the bootstrap was asked for more: $(tail -n 1 "$co/calls")"

# What a command needs: `run <preset>` asks for that image, and for the
# kernel when a microVM will be used (the store here is empty, so the run
# itself then fails: only the bootstrap's arguments matter).
export SKIFF_IMAGES_DIR=$co/images
(cd / && "$co/skiff" run --embedded --isolation microvm python --lang python --code 'print(1)' \
  > /dev/null 2>&1)
[ "$(tail -n 1 "$co/calls")" = "bootstrap --image python --kernel" ] ||
  fail "run --isolation microvm python: the bootstrap was asked '$(tail -n 1 "$co/calls")'"
(cd / && "$co/skiff" run --embedded --isolation=jail node -- true > /dev/null 2>&1)
[ "$(tail -n 1 "$co/calls")" = "bootstrap --image node" ] ||
  fail "run --isolation=jail node: the bootstrap was asked '$(tail -n 1 "$co/calls")'"

[ $fails = 0 ] && echo "the wrapper's fast path holds" || echo "$fails failed"
[ $fails = 0 ]
