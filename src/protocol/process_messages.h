// The live-process requests (proc.*) and their answers (see the table in
// messages.h). A live process runs in the background of the agent's process
// table: it outlives the request that started it, keeps its recent stdout
// and stderr in bounded rings addressed by absolute byte offsets, and is
// reached by its pid (inside the sandbox) until it is forgotten.
//
// Requests' FromJson give the agent's S001 errors; the answers' FromJson
// give S300 (a malformed answer of the agent).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "protocol/ops.h"

namespace skiff::proto {

// Ring size per output stream when the request names none, and its bounds.
inline constexpr int64_t kDefaultProcBuffer = int64_t{1} << 20;
inline constexpr int64_t kMinProcBuffer = int64_t{4} << 10;
inline constexpr int64_t kMaxProcBuffer = int64_t{16} << 20;
// Live (running) processes per sandbox; one more is S400.
inline constexpr int kMaxLiveProcesses = 256;
// Exited processes kept listed; beyond this the oldest exited one is
// forgotten. An exited process is also forgotten kExitedKeepMs after it ended.
inline constexpr int kMaxExitedProcesses = 64;
inline constexpr int64_t kExitedKeepMs = int64_t{10} * 60 * 1000;
// Ring bytes reserved by all listed processes of a sandbox together; a start
// that would reserve more is S400.
inline constexpr int64_t kMaxProcBufferTotal = int64_t{256} << 20;
// Concurrent proc.output streams per process; one more is S400.
inline constexpr int kMaxAttachesPerProcess = 16;
// Terminal size bounds (rows and cols).
inline constexpr int kMaxTermSize = 4096;

// The signals a caller may send, by name ("INT", "TERM", ...). The number
// for a name, or nullopt for any name outside the set.
std::optional<int> SignalFromName(std::string_view name);
// The names of the set, in a stable order (for schemas and messages).
const std::vector<std::string>& SignalNames();

struct TermSize {
  int rows = 24;  // 1..kMaxTermSize
  int cols = 80;  // 1..kMaxTermSize

  nlohmann::json ToJson() const;
  bool operator==(const TermSize&) const = default;
};

// ------------------------------------------------------------ proc.start

// OPEN {"op":"proc.start", argv, env, cwd?, user?, tag?, pty?, stdin,
// buffer_bytes?, timeout_ms?}. With `pty` the process gets a new session
// whose controlling terminal is a fresh pseudo-terminal of that size
// (stdin, stdout and stderr are its slave; its output is the stdout ring,
// the stderr ring stays empty; TERM defaults to xterm-256color). Without
// it, stdin is /dev/null unless `stdin` is true (then a pipe, written by
// proc.input), and stdout and stderr are pipes into their rings.
// `timeout_ms`, when given, kills the process group at that deadline.
struct ProcStartRequest {
  static constexpr std::string_view kOp = op::kProcStart;
  std::vector<std::string> argv;  // non-empty, argv[0] non-empty, no NUL
  std::vector<std::string> env;   // "K=V", no NUL
  std::optional<std::string> cwd;
  std::optional<std::string> user;  // name|uid[:group|gid]
  std::optional<std::string> tag;   // <= 256 bytes, caller's label
  std::optional<TermSize> pty;
  bool has_stdin = false;                     // "stdin"
  int64_t buffer_bytes = kDefaultProcBuffer;  // kMinProcBuffer..kMaxProcBuffer
  std::optional<int64_t> timeout_ms;          // > 0
  // "hold_output": output nobody has read yet is never overwritten; the
  // process waits (its writes block) while its ring is full of such bytes.
  bool hold_output = false;

  nlohmann::json ToJson() const;
  static Result<ProcStartRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcStartRequest&) const = default;
};

// Absolute byte offsets of one output ring: `start` is the first byte still
// held, `end` one past the last byte the process wrote (end - start <= the
// ring's size).
struct RingSpan {
  int64_t start = 0;
  int64_t end = 0;

  nlohmann::json ToJson() const;
  bool operator==(const RingSpan&) const = default;
};

// One process of the table (the RESULT of proc.start and proc.wait, an
// entry of proc.list).
struct ProcInfo {
  int64_t pid = 0;  // > 0, inside the sandbox
  std::vector<std::string> argv;
  std::string cwd;
  std::optional<std::string> user;
  std::optional<std::string> tag;
  std::optional<TermSize> pty;  // the terminal's current size
  int64_t started_ms = 0;       // wall clock, ms since the epoch
  bool running = true;          // "state": "running" | "exited"
  int exit_code = 0;            // exited: 0..255, or 128 + signal
  int signal = 0;               // exited by a signal: its number
  bool timed_out = false;       // killed at timeout_ms
  int64_t ended_ms = 0;         // exited: wall clock ms
  bool stdin_open = false;      // proc.input is accepted
  int64_t buffer_bytes = kDefaultProcBuffer;
  RingSpan out;      // "stdout"
  RingSpan err;      // "stderr"
  int attached = 0;  // open proc.output streams

  nlohmann::json ToJson() const;
  static Result<ProcInfo> FromJson(const nlohmann::json& j);
  bool operator==(const ProcInfo&) const = default;
};

// ------------------------------------------------------------ proc.list

struct ProcListRequest {
  static constexpr std::string_view kOp = op::kProcList;

  nlohmann::json ToJson() const;
  static Result<ProcListRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcListRequest&) const = default;
};

struct ProcListResult {
  std::vector<ProcInfo> processes;  // by pid

  nlohmann::json ToJson() const;
  static Result<ProcListResult> FromJson(const nlohmann::json& j);
  bool operator==(const ProcListResult&) const = default;
};

// ------------------------------------------------------------ proc.output

// OPEN {"op":"proc.output", pid, stdout_from, stderr_from, follow}.
// Answered by META ProcOutputMeta (where each channel really starts), DATA
// on kStdout / kStderr in offset order under the host's credit, META
// ProcOutputMeta with a `gap` whenever the ring overwrote bytes this stream
// had not sent yet, then END on both and RESULT ProcInfo. Without `follow`
// the stream ends at the offsets the process had reached at the OPEN; with
// it, once the process exited and everything was sent. CANCEL detaches
// (the process keeps running). An offset beyond the channel's end is S001.
struct ProcOutputRequest {
  static constexpr std::string_view kOp = op::kProcOutput;
  int64_t pid = 0;
  int64_t stdout_from = 0;  // >= 0
  int64_t stderr_from = 0;  // >= 0
  bool follow = false;

  nlohmann::json ToJson() const;
  static Result<ProcOutputRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcOutputRequest&) const = default;
};

// META of proc.output. The first one has both offsets (where the DATA of
// each channel starts; above the requested offset when the ring no longer
// held those bytes). A later one has `gap`: the bytes [from, to) of
// `channel` were overwritten before they could be sent; DATA of that
// channel continues at `to`.
struct ProcOutputMeta {
  std::optional<int64_t> stdout_from;
  std::optional<int64_t> stderr_from;
  struct Gap {
    uint8_t channel = 1;  // kStdout / kStderr
    int64_t from = 0;
    int64_t to = 0;
    bool operator==(const Gap&) const = default;
  };
  std::optional<Gap> gap;

  nlohmann::json ToJson() const;
  static Result<ProcOutputMeta> FromJson(const nlohmann::json& j);
  bool operator==(const ProcOutputMeta&) const = default;
};

// ------------------------------------------------------------ proc.input

// OPEN {"op":"proc.input", pid, close}; the bytes follow as DATA on kStdin,
// then END. They are written to the process's stdin (a PTY's keystrokes);
// credit is returned as the process takes them. With `close` its stdin is
// closed after them (for a PTY: an end-of-file character is written).
// S221 when the process exited or its stdin is closed or was never opened.
struct ProcInputRequest {
  static constexpr std::string_view kOp = op::kProcInput;
  int64_t pid = 0;
  bool close = false;

  nlohmann::json ToJson() const;
  static Result<ProcInputRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcInputRequest&) const = default;
};

struct ProcInputResult {
  int64_t bytes_written = 0;

  nlohmann::json ToJson() const;
  static Result<ProcInputResult> FromJson(const nlohmann::json& j);
  bool operator==(const ProcInputResult&) const = default;
};

// ------------------------------------------------------------ proc.signal

// Sent to the process's process group. S001 for a name outside
// SignalNames(); S221 when the process exited.
struct ProcSignalRequest {
  static constexpr std::string_view kOp = op::kProcSignal;
  int64_t pid = 0;
  std::string signal;  // "INT", "TERM", ...

  nlohmann::json ToJson() const;
  static Result<ProcSignalRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcSignalRequest&) const = default;
};

// ------------------------------------------------------------ proc.wait

// RESULT ProcInfo once the process exited, or when `timeout_ms` passed
// (then still running). Without timeout_ms: until it exits.
struct ProcWaitRequest {
  static constexpr std::string_view kOp = op::kProcWait;
  int64_t pid = 0;
  std::optional<int64_t> timeout_ms;  // >= 0

  nlohmann::json ToJson() const;
  static Result<ProcWaitRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcWaitRequest&) const = default;
};

// ------------------------------------------------------------ proc.resize

// The terminal of a PTY process takes the size (its foreground process
// group gets SIGWINCH). S221 for a process without a terminal or exited.
struct ProcResizeRequest {
  static constexpr std::string_view kOp = op::kProcResize;
  int64_t pid = 0;
  TermSize size;  // "rows", "cols"

  nlohmann::json ToJson() const;
  static Result<ProcResizeRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcResizeRequest&) const = default;
};

// ------------------------------------------------------------ proc.forget

// Removes an exited process from the table (its rings are freed). S221
// while it runs.
struct ProcForgetRequest {
  static constexpr std::string_view kOp = op::kProcForget;
  int64_t pid = 0;

  nlohmann::json ToJson() const;
  static Result<ProcForgetRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ProcForgetRequest&) const = default;
};

// proc.signal, proc.resize and proc.forget answer RESULT {} (EmptyResult).
// An unknown pid is S220 for every proc.* op.

}  // namespace skiff::proto
