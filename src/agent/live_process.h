// One process of the agent's process table (process_table.h): what it was
// started with, its state, its stdin, and its output rings. Owned by the
// table; the proc.* streams (process_streams.h) reach it by pid and serial.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/output_ring.h"
#include "agent/pseudo_terminal.h"
#include "base/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/process_messages.h"

namespace skiff::agent {

struct LiveProcess {
  // Unique per table for the agent's lifetime: a stream that outlives its
  // process never latches onto a later process given the same pid.
  uint64_t serial = 0;
  pid_t pid = -1;  // also its process group and session
  std::vector<std::string> argv;
  std::string cwd;
  std::optional<std::string> user;
  std::optional<std::string> tag;
  std::optional<TerminalSize> pty;  // the terminal's current size
  int64_t started_ms = 0;           // wall clock
  int64_t deadline_ms = -1;         // monotonic (NowMs); -1: no timeout

  bool running = true;
  int wstatus = 0;  // exited: as waitpid gave it
  bool timed_out = false;
  bool killed = false;     // SIGKILL sent to its group (timeout)
  int64_t ended_ms = 0;    // exited: wall clock
  int64_t ended_mono = 0;  // exited: NowMs, for the keep period

  int64_t buffer_bytes = proto::kDefaultProcBuffer;
  int64_t reserved = 0;  // ring bytes counted against kMaxProcBufferTotal

  // Output: pipe read ends, or the pty master at [kStdout] (the terminal
  // writes all output there). A closed one reached end of file.
  UniqueFd out[proto::kChannels];
  OutputRing rings[proto::kChannels] = {OutputRing(1), OutputRing(1), OutputRing(1)};  // [kStdout], [kStderr]

  // Input: the stdin pipe, or (with a terminal) the master while
  // input_open.
  UniqueFd stdin_w;
  bool input_open = false;
  bool line_empty = true;  // the last byte written was '\n' (or none yet)

  int attached = 0;  // open proc.output streams

  // hold_output: bytes below taken[ch] went out to a reader; the ones from
  // there on are never overwritten, so the pipe is read only while the
  // ring has room beyond them (the process's writes block meanwhile).
  bool hold_output = false;
  int64_t taken[proto::kChannels] = {0, 0, 0};
  // Bytes the ring may take now without overwriting held ones (any
  // number without hold_output).
  size_t Room(uint8_t ch) const;

  // The descriptor proc.input writes to; -1 when input is not accepted.
  int InputFd() const {
    if (!running || !input_open) return -1;
    return pty ? out[proto::kStdout].get() : stdin_w.get();
  }
  bool Eof(uint8_t ch) const { return !out[ch]; }

  proto::ProcInfo Info() const;
};

}  // namespace skiff::agent
