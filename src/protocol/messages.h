// The messages of the agent protocol, defined once as types for both sides:
// the host builds requests with ToJson and reads answers with FromJson; the
// agent reads requests with FromJson and builds answers with ToJson. Every
// FromJson checks each field's type strictly (the JSON may be hostile):
// requests are refused with the agent's codes (S001 "invalid request: ...",
// S210 for a bad mode or sed form), answers with S300 (a malformed answer
// of the agent). ToJson produces exactly the wire JSON below. The HELLO
// frames are in hello.h, the op names in ops.h.
//
// Each OPEN is a JSON object {"op": <name>, ...}:
//
//   op          request (type)                           agent answers (types)
//   ----------  ---------------------------------------  ---------------------------------------
//   info        - (InfoRequest)                          RESULT {proto, agent, kernel, ready_ms, pid,
//                                                        restored} (InfoResult)
//   exec        argv[], env[] ("K=V"), cwd, timeout_ms,  META {"pid"} once started (ExecStarted);
//               stdin (bool: DATA on kStdin follows),    DATA/END on kStdout/kStderr (at most
//               output_limit (bytes per stream),         output_limit bytes each, excess drained);
//               user? (name|uid[:group|gid], resolved    RESULT {exit_code, signal,
//               in the sandbox's own /etc)               stdout_truncated, stderr_truncated,
//               (ExecRequest)                            timed_out, cancelled, duration_ms}
//                                                        (ExecResult). Spawn ENOENT/EACCES/ENOEXEC
//                                                        are a RESULT (127/126 + stderr text);
//                                                        a bad cwd is ERROR S211/S212.
//   fs.ls       path (FsLsRequest)                       RESULT {"entries":[FsEntry]} (FsLsResult)
//   fs.stat     path (FsStatRequest)                     RESULT FsEntry
//   fs.mkdir    path, mode (int), parents                RESULT {"created"} (FsMkdirResult)
//               (FsMkdirRequest)
//   fs.write    path, mode (int), parents, metadata?;    RESULT {"bytes_written", "metadata_set"?}
//               body as                                  (FsWriteResult)
//               DATA on kStdin, then END (abort: CANCEL)
//               (FsWriteRequest)
//   fs.read     path (FsReadRequest)                     META {size, mode, mtime} (FsReadMeta),
//                                                        DATA on kStdout, END kStdout, RESULT {}
//                                                        (EmptyResult)
//   fs.rm       path, recursive (FsRmRequest)            RESULT {"removed":true} (FsRmResult)
//   fs.mv       src, dst, overwrite (FsMvRequest)        RESULT {"moved":true} (FsMvResult)
//   fs.chmod    path, mode (int), uid?, gid?, recursive  RESULT {"updated"} (FsChmodResult)
//               (FsChmodRequest)
//   fs.grep     path, pattern, recursive, ignore_case,   RESULT {"matches":[FsGrepMatch],
//               include_glob[], exclude_glob[],                  "truncated"} (FsGrepResult)
//               max_matches, max_line_bytes
//               (FsGrepRequest)
//   fs.sed      files[] | path, pattern, replacement,    RESULT {"results":[FsSedFileResult],
//               regex, first_only, ignore_case,                  "total_replacements"}
//               recursive, include_glob[], exclude_glob[]        (FsSedResult)
//               (FsSedRequest)
//   fs.watch    path, recursive (FsWatchRequest)         META {} once watching, DATA on kStdout:
//                                                        FsWatchEvent JSON lines {name, type}
//                                                        under credit; CANCEL: RESULT {}; the
//                                                        directory gone: END kStdout, RESULT {}
//                                                        (fs_watch_messages.h)
//   proc.start  argv[], env[], cwd?, user?, tag?, pty?     RESULT ProcInfo: the process runs on in the
//               {rows, cols}, stdin, buffer_bytes?,      agent's process table (process_messages.h)
//               timeout_ms? (ProcStartRequest)
//   proc.list   - (ProcListRequest)                      RESULT {"processes":[ProcInfo]} (ProcListResult)
//   proc.output pid, stdout_from, stderr_from, follow    META {stdout_from, stderr_from}, DATA on
//               (ProcOutputRequest)                      kStdout/kStderr, META {gap} when the ring
//                                                        overwrote unsent bytes, END both, RESULT
//                                                        ProcInfo (ProcOutputMeta)
//   proc.input  pid, close; bytes as DATA on kStdin,     RESULT {"bytes_written"} (ProcInputResult)
//               then END (ProcInputRequest)
//   proc.signal pid, signal ("INT", ...)                 RESULT {} (EmptyResult)
//   proc.wait   pid, timeout_ms? (ProcWaitRequest)       RESULT ProcInfo (exited, or running at the
//                                                        timeout)
//   proc.resize pid, rows, cols (ProcResizeRequest)      RESULT {} (EmptyResult)
//   proc.forget pid (ProcForgetRequest)                  RESULT {} (EmptyResult)
//   shutdown    - (ShutdownRequest)                      RESULT {} (EmptyResult) then the agent
//                                                        kills every process and exits (the VM
//                                                        powers off)
//   quiesce     - (QuiesceRequest)                       META {} (EmptyResult), then nothing more
//                                                        from the agent until the host ends
//                                                        stdin (RESULT {}) or cancels; a snapshot
//                                                        is taken in between (docs/snapshots.md)
//   clock       realtime_ns (ClockRequest)               RESULT {} (EmptyResult): a VM guest sets
//                                                        its clock (after a pause stopped it);
//                                                        S219 elsewhere
//   usage       - (UsageRequest)                         RESULT {cpu_count, cpu_busy_ticks,
//                                                        cpu_total_ticks, mem_used_bytes,
//                                                        mem_total_bytes, disk_used_bytes,
//                                                        disk_total_bytes} (UsageResult): the
//                                                        system's own counters as the agent sees
//                                                        them (a VM guest's; the microVM's
//                                                        sandbox::metrics)
//   port.connect port (1..65535) (PortConnectRequest)    META {"address"} once a TCP connection
//                                                        to 127.0.0.1:port (else [::1]:port) is
//                                                        up (PortConnectMeta); DATA on kStdin is
//                                                        written to it, END kStdin half-closes
//                                                        it; what it sends is DATA on kStdout,
//                                                        its end END kStdout; RESULT {bytes_in,
//                                                        bytes_out} (PortConnectResult) once both
//                                                        directions ended; ERROR S222 when
//                                                        nothing listens; CANCEL closes it
//
// Details of the agent's answers (additive to the table above):
//   - exec RESULT "signal" is the terminating signal number, 0 when the
//     process exited normally; "timed_out" means the agent's own deadline
//     (timeout_ms from OPEN) killed the process group; "cancelled" a CANCEL.
//     Without "timeout_ms" the agent sets no deadline.
//   - fs.write: the temporary file exists from OPEN; DATA is written as it
//     arrives (credit is returned once written); END commits. CANCEL removes
//     the temporary file and answers ERROR S218.
//   - A RESULT whose JSON exceeds kMaxPayload (e.g. a large fs.grep) is sent
//     as DATA on kStdout (under the usual credit), END kStdout, then RESULT
//     {"result_in_data": true}: the host concatenates the DATA and parses it.
//   - ERROR (AgentError) is {"code":"Sxxx","message":"<prefix><detail>"} and
//     may carry "fix" (fs.mkdir / fs.write missing parent: {"parents": true})
//     and "details".
//
// Messages are those of the spec (docs/api.md#filesystem-rules-sandboxfs, docs/errors.md#message-templates).
// An unknown op is ERROR S219 "operation not supported by this sandbox's agent: <op>" and the channel keeps
// serving. Field values arrive already validated by the host, but the agent re-checks types: it trusts
// nothing it is sent.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "protocol/exec_messages.h"
#include "protocol/fs_messages.h"
#include "protocol/fs_watch_messages.h"
#include "protocol/ops.h"
#include "protocol/process_messages.h"

namespace skiff::proto {

struct InfoRequest {
  static constexpr std::string_view kOp = op::kInfo;

  nlohmann::json ToJson() const;
  static Result<InfoRequest> FromJson(const nlohmann::json& j);
  bool operator==(const InfoRequest&) const = default;
};

struct InfoResult {
  uint32_t proto = 0;
  std::string agent;     // "skiff-agent/<version>"
  std::string kernel;    // uname release
  int64_t ready_ms = 0;  // boot-clock ms when the agent said HELLO
  int64_t pid = 0;
  bool restored = false;  // resumed from a snapshot

  nlohmann::json ToJson() const;
  static Result<InfoResult> FromJson(const nlohmann::json& j);
  bool operator==(const InfoResult&) const = default;
};

struct ShutdownRequest {
  static constexpr std::string_view kOp = op::kShutdown;

  nlohmann::json ToJson() const;
  static Result<ShutdownRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ShutdownRequest&) const = default;
};

// The channel at rest for a snapshot: the agent answers META once every byte
// it queued before it is written, then writes nothing (its output waits)
// until the host ends stdin or cancels the stream. The host writes nothing
// between the OPEN and that END, so a VM saved meanwhile holds no partial
// frame in either direction; a copy restored from it is given a resume HELLO
// instead, and drops the source's streams (hello.h).
struct QuiesceRequest {
  static constexpr std::string_view kOp = op::kQuiesce;

  nlohmann::json ToJson() const;
  static Result<QuiesceRequest> FromJson(const nlohmann::json& j);
  bool operator==(const QuiesceRequest&) const = default;
};

// The host's wall clock for a VM guest whose clock stood still while its
// vCPUs were stopped (an in-memory pause). Nanoseconds since the epoch,
// after 2000-01-01 and before 2200-01-01.
struct ClockRequest {
  static constexpr std::string_view kOp = op::kClock;
  int64_t realtime_ns = 0;

  nlohmann::json ToJson() const;
  static Result<ClockRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ClockRequest&) const = default;
};

// The counters of the system the agent runs in (op "usage"), read by the
// host for sandbox::metrics on the microVM. For that host the agent is
// hostile: FromJson refuses (S300 naming the op) anything but integers
// >= 0 within the bounds below, with busy <= total and used <= total.
struct UsageRequest {
  static constexpr std::string_view kOp = op::kUsage;

  nlohmann::json ToJson() const;
  static Result<UsageRequest> FromJson(const nlohmann::json& j);
  bool operator==(const UsageRequest&) const = default;
};

inline constexpr uint32_t kMaxUsageCpus = 4096;
inline constexpr uint64_t kMaxUsageTicks = uint64_t{1} << 62;  // cumulative CPU ticks
inline constexpr uint64_t kMaxUsageBytes = uint64_t{1} << 60;  // 1 EiB

struct UsageResult {
  uint32_t cpu_count = 0;  // CPUs online (the "cpuN" lines of /proc/stat), 1..kMaxUsageCpus
  // Cumulative ticks of all CPUs since boot (/proc/stat "cpu", USER_HZ):
  // busy is user + nice + system + irq + softirq; total adds idle, iowait
  // and steal.
  uint64_t cpu_busy_ticks = 0;
  uint64_t cpu_total_ticks = 0;
  uint64_t mem_used_bytes = 0;   // MemTotal - MemAvailable (/proc/meminfo)
  uint64_t mem_total_bytes = 0;  // MemTotal
  // statfs of "/" (the writable layer: an overlay reports its upper
  // filesystem) plus /tmp when that is a mount of its own.
  uint64_t disk_used_bytes = 0;
  uint64_t disk_total_bytes = 0;

  nlohmann::json ToJson() const;
  static Result<UsageResult> FromJson(const nlohmann::json& j);
  bool operator==(const UsageResult&) const = default;
};

// A TCP connection to a port of the sandbox's own loopback (op
// "port.connect"): the host relays a caller's bytes (E2B's getHost(port))
// without the sandbox having any network. Only 127.0.0.1 and ::1 are
// dialled, never another address.
struct PortConnectRequest {
  static constexpr std::string_view kOp = op::kPortConnect;
  uint16_t port = 0;  // 1..65535

  nlohmann::json ToJson() const;
  static Result<PortConnectRequest> FromJson(const nlohmann::json& j);
  bool operator==(const PortConnectRequest&) const = default;
};

// META once connected: which loopback address answered ("127.0.0.1" or "::1").
struct PortConnectMeta {
  std::string address;

  nlohmann::json ToJson() const;
  static Result<PortConnectMeta> FromJson(const nlohmann::json& j);
  bool operator==(const PortConnectMeta&) const = default;
};

// Counts can never exceed what a connection can carry in a sandbox's life.
inline constexpr int64_t kMaxPortBytes = int64_t{1} << 60;

// RESULT once both directions ended: bytes written to the socket (from the
// host) and read from it (to the host).
struct PortConnectResult {
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;

  nlohmann::json ToJson() const;
  static Result<PortConnectResult> FromJson(const nlohmann::json& j);
  bool operator==(const PortConnectResult&) const = default;
};

// RESULT {} (fs.read, shutdown).
struct EmptyResult {
  nlohmann::json ToJson() const;
  static Result<EmptyResult> FromJson(const nlohmann::json& j);
  bool operator==(const EmptyResult&) const = default;
};

// ERROR {"code":"Sxxx", "message", "fix"?, "details"?}.
// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct AgentError {
  Code code = Code::kS300;
  std::string message;
  nlohmann::json fix = nullptr;  // an object, or null: absent
  std::optional<nlohmann::json> details;

  static AgentError FromError(const Error& e);
  Error ToError() const;

  nlohmann::json ToJson() const;
  // S300 when the code is not a known S-code, the message is not a string
  // or fix is neither absent nor an object.
  static Result<AgentError> FromJson(const nlohmann::json& j);
  bool operator==(const AgentError&) const = default;
};

}  // namespace skiff::proto
