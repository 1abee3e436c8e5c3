#include "agent/live_process.h"

#include <sys/wait.h>

namespace skiff::agent {

proto::ProcInfo LiveProcess::Info() const {
  proto::ProcInfo i;
  i.pid = pid;
  i.argv = argv;
  i.cwd = cwd;
  i.user = user;
  i.tag = tag;
  if (pty) i.pty = proto::TermSize{pty->rows, pty->cols};
  i.started_ms = started_ms;
  i.running = running;
  if (!running) {
    if (WIFEXITED(wstatus)) {
      i.exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      i.signal = WTERMSIG(wstatus);
      i.exit_code = 128 + i.signal;
    }
    i.ended_ms = ended_ms;
  }
  i.timed_out = timed_out;
  i.stdin_open = InputFd() >= 0;
  i.buffer_bytes = buffer_bytes;
  i.out = {rings[proto::kStdout].start(), rings[proto::kStdout].end()};
  i.err = {rings[proto::kStderr].start(), rings[proto::kStderr].end()};
  i.attached = attached;
  return i;
}

size_t LiveProcess::Room(uint8_t ch) const {
  const OutputRing& ring = rings[ch];
  if (!hold_output) return ring.capacity();
  int64_t unread = ring.end() - taken[ch];
  return unread >= static_cast<int64_t>(ring.capacity()) ? 0 : ring.capacity() - static_cast<size_t>(unread);
}

}  // namespace skiff::agent
