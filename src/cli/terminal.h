// The user's terminal attached to a live process (skiff exec -it, attach,
// run -it): the terminal in raw mode (restored on every way out: the
// process's exit, a detach, SIGTERM/SIGHUP, an error), keystrokes to the
// process as they are typed, its output to stdout as it arrives, and the
// window size passed through at the start and on every SIGWINCH. Ctrl-C,
// Ctrl-\ and Ctrl-Z are bytes for the process's terminal, not signals for
// skiff; Ctrl-P Ctrl-Q detaches (the process goes on), as in docker.
//
// Where the process is reached is a ProcessEndpoint: the daemon's HTTP API
// (daemon_process.h), or a SandboxService in this process (run -it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "protocol/process_messages.h"
#include "sandbox/types.h"

namespace skiff::cli {

class ProcessEndpoint {
 public:
  virtual ~ProcessEndpoint() = default;
  // Follows the output from `from` (both channels) until the process ends,
  // the sink declines, or the stream fails.
  virtual Result<proto::ProcInfo> Output(int64_t from, ProcessOutputSink& sink) = 0;
  virtual Status Input(std::string_view bytes, bool close) = 0;
  virtual Status Resize(proto::TermSize size) = 0;
};

// The size of the terminal on fd 0 (else 1), or 24x80 when neither is one.
proto::TermSize CurrentTermSize();

struct TerminalOptions {
  bool raw = true;    // stdin is a terminal and -t was given
  bool input = true;  // forward stdin (-i)
  int64_t from = 0;   // output offset to replay from
  // Set: a process killed at its timeout ends the session with the error
  // sandbox::exec gives (S200 "exec timed out after N ms", exit 124).
  std::optional<uint64_t> timeout_error_ms;
  // Set: told whether the session ended on a signal to this process.
  bool* interrupted = nullptr;
};

// Fills a sandbox::process::start payload's `pty` (with `tty`: this
// window's size) and `env` (TERM from here with `tty`, then `env`).
void AddStartEnvAndTerminal(nlohmann::json& start, bool tty, const std::vector<std::string>& env);

// Runs the session; returns the process's exit status, 0 after a detach,
// or a skiff error status (the error reported on stderr).
int RunTerminal(ProcessEndpoint& ep, const TerminalOptions& opt);

}  // namespace skiff::cli
