#!/usr/bin/env bash
# The CLI's live-process commands as a person uses them, in a real terminal
# (tmux, driven by send-keys and read by capture-pane): `skiff exec -it` with
# its window size, a resize, Ctrl-C to the foreground job, the exit status
# and the terminal restored afterwards; `skiff run -it python`, embedded and
# through the daemon; and
# `exec -d`, `ps`, `logs -f`, `kill -s` from a plain shell.
#   cli_terminal_test.sh SKIFF_BINARY ISOLATION
set -uo pipefail
skiff=$1
iso=$2
work=$(mktemp -d)
sock="skiff-test-$$-0"
sessions=0
fails=0
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'image_allowlist: [base, python]\nisolation: %s\ndefault_idle_timeout_secs: 1800\n' "$iso" > "$work/skiff.yaml"
"$skiff" serve --port "$port" --config "$work/skiff.yaml" > "$work/skiffd.log" 2>&1 &
daemon=$!
cleanup() {
  for i in $(seq 1 "$sessions"); do tmux -L "skiff-test-$$-$i" kill-server 2>/dev/null; done
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
  sleep 0.1
done
export SKIFF_URL="http://127.0.0.1:$port"

fail() {
  printf 'FAIL: %s\n' "$1"
  printf -- '--- pane:\n%s\n---\n' "$(tmux -L "$sock" capture-pane -p -t t 2>/dev/null)"
  fails=$((fails + 1))
}
ok() { printf 'ok: %s\n' "$1"; }
pane() { tmux -L "$sock" capture-pane -p -J -t t; }
keys() { tmux -L "$sock" send-keys -t t "$@"; }
# wait_for REGEX [SECONDS]: until the pane shows a line matching REGEX.
wait_for() {
  local deadline=$((SECONDS + ${2:-60}))
  while [ $SECONDS -lt $deadline ]; do
    pane | grep -Eq -- "$1" && return 0
    sleep 0.2
  done
  return 1
}
# The pane's command: skiff, then its exit status and whether the terminal
# is back in canonical mode with echo (what raw mode turned off).
session() {
  # A server of its own per session: a new-session right after a kill-server
  # can reach the old server while it is still exiting.
  sessions=$((sessions + 1))
  sock="skiff-test-$$-$sessions"
  tmux -L "$sock" -f /dev/null new-session -d -s t -x 100 -y 30 \
    "$* ; echo EXIT=\$?; stty -a | tr ' ;' '\n\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\n' ' '; echo; sleep 300"
  tmux -L "$sock" set-option -g status off > /dev/null
}

id=$("$skiff" create base --isolation "$iso")
[ -n "$id" ] || { echo "FAIL: create"; cat "$work/skiffd.log"; exit 1; }

# --- exec -it: size, resize, Ctrl-C, exit status, terminal restored.
session "SKIFF_URL=$SKIFF_URL $skiff exec -it $id -- sh"
if wait_for '[#$] ?$' 120; then ok "exec -it: a shell prompt"; else fail "exec -it: no prompt"; fi
size=$(tmux -L "$sock" display -p -t t '#{pane_height} #{pane_width}')
keys 'stty size' Enter
if wait_for "^$size\$" 30; then ok "exec -it: stty size is the window's ($size)"; else fail "stty size is not $size"; fi
keys 'tput cols 2>/dev/null || echo no-tput' Enter
if wait_for '^100$' 30; then ok "exec -it: tput cols is the window's width"; else fail "tput cols"; fi
tmux -L "$sock" resize-window -t t -x 132 -y 40
sleep 1
keys 'clear; stty size' Enter
if wait_for '^40 132$' 30; then ok "exec -it: a resize reaches the process"; else fail "resize not seen"; fi
keys 'sleep 100' Enter
sleep 1
keys C-c
keys 'echo alive-$((40+2))' Enter
# (the shell's next prompt and the echo's output share a line: "# alive-42")
if wait_for 'alive-42$' 30; then ok "exec -it: Ctrl-C interrupts the foreground job, the shell lives"; else fail "Ctrl-C"; fi
keys 'exit 7' Enter
if wait_for '^EXIT=7' 60; then ok "exec -it: the shell's exit status"; else fail "exit status"; fi
if wait_for '^icanon echo' 10; then ok "exec -it: terminal restored"; else fail "terminal not restored"; fi
tmux -L "$sock" kill-server

# --- run -it python: an interactive throwaway interpreter, in this process.
session "$skiff run --embedded -it --isolation $iso python"
if wait_for '^>>> ?$' 300; then ok "run -it python: the interpreter's prompt"; else fail "run -it: no prompt"; fi
keys 'print(6*7)' Enter
if wait_for '^42$' 60; then ok "run -it python: it runs what is typed"; else fail "run -it: no 42"; fi
# A full-screen program draws where it says: curses puts a word at row 5,
# column 10 of the terminal, then waits for a key.
keys 'import curses; curses.wrapper(lambda s: (s.addstr(5, 10, "DRAWN-BY-CURSES"), s.refresh(), s.getch()))' Enter
if wait_for '^ {10}DRAWN-BY-CURSES' 60 && [ "$(pane | sed -n 6p | sed 's/ *$//')" = "          DRAWN-BY-CURSES" ]; then
  ok "run -it python: a curses program draws at its row and column"
else
  fail "curses did not draw at row 5, column 10"
fi
keys q
keys 'exit()' Enter
if wait_for '^EXIT=0' 120; then ok "run -it python: exits 0"; else fail "run -it exit"; fi
tmux -L "$sock" kill-server

# --- run -it python through the daemon (SKIFF_URL names it): the same session.
session "SKIFF_URL=$SKIFF_URL $skiff run -it --isolation $iso python"
if wait_for '^>>> ?$' 300; then ok "run -it python (daemon): the interpreter's prompt"; else fail "run -it (daemon): no prompt"; fi
keys 'print(6*7)' Enter
if wait_for '^42$' 60; then ok "run -it python (daemon): it runs what is typed"; else fail "run -it (daemon): no 42"; fi
keys 'exit()' Enter
if wait_for '^EXIT=0' 120; then ok "run -it python (daemon): exits 0"; else fail "run -it (daemon) exit"; fi
tmux -L "$sock" kill-server

# --- a SIGQUIT to the client (raw mode sends Ctrl-\ on as a byte) restores the terminal.
session "SKIFF_URL=$SKIFF_URL $skiff exec -it $id -- sh"
if wait_for '[#$] ?$' 120; then
  pkill -QUIT -f "^$skiff exec -it $id" || true
  # (the remote prompt is still on the line: "# EXIT=131")
  if wait_for 'EXIT=131$' 30 && wait_for '^icanon echo' 10; then ok "SIGQUIT: terminal restored"; else fail "SIGQUIT"; fi
else
  fail "second exec -it: no prompt"
fi
tmux -L "$sock" kill-server

# --- exec -d, ps, logs -f, kill -s (no terminal).
pid=$("$skiff" exec -d --tag greeter "$id" -- sh -c 'echo one; sleep 2; echo two >&2; exit 3')
if [[ "$pid" =~ ^[0-9]+$ ]]; then ok "exec -d prints the pid ($pid)"; else fail "exec -d printed '$pid'"; fi
if "$skiff" ps "$id" | grep -Eq "^$pid +running +- +greeter +sh -c"; then ok "ps lists it"; else fail "ps: $("$skiff" ps "$id")"; fi
# Each stdout line stamped as it arrives: "one" must come ~2 s before the end.
"$skiff" logs -f "$id" "$pid" 2> "$work/logs.err" | while IFS= read -r line; do echo "$(date +%s%N) $line"; done > "$work/stamped"
rc=${PIPESTATUS[0]}
out=$(cut -d' ' -f2- "$work/stamped")
first=$(head -1 "$work/stamped" | cut -d' ' -f1)
if [ -n "$first" ] && [ $(( $(date +%s%N) - first )) -gt 1500000000 ]; then
  ok "logs -f: the first line arrived before the process ended"
else
  fail "logs -f: the first line was held back"
fi
if [ "$out" = "one" ] && [ "$(cat "$work/logs.err")" = "two" ] && [ $rc = 3 ]; then
  ok "logs -f: stdout, stderr, the exit status"
else
  fail "logs -f: out='$out' err='$(cat "$work/logs.err")' rc=$rc"
fi
if [ "$("$skiff" logs --since 2 "$id" "$pid" 2>/dev/null)" = "e" ]; then ok "logs --since"; else fail "logs --since"; fi
sleeper=$("$skiff" exec -d "$id" -- sleep 100)
"$skiff" kill -s TERM "$id" "$sleeper"
"$skiff" logs -f "$id" "$sleeper" > /dev/null 2>&1
rc=$?
if [ $rc = 143 ]; then ok "kill -s TERM"; else fail "kill -s TERM: logs -f exit $rc"; fi
"$skiff" kill -s SEGV "$id" "$sleeper" 2> "$work/kill.err"
rc=$?
if [ $rc = 125 ] && grep -q S001 "$work/kill.err"; then ok "kill -s SEGV is refused"; else fail "kill -s SEGV: rc=$rc $(cat "$work/kill.err")"; fi
"$skiff" stop "$id" > /dev/null

if [ $fails -gt 0 ]; then
  echo "--- skiffd log"; tail -40 "$work/skiffd.log"
  exit 1
fi
echo "all passed"
