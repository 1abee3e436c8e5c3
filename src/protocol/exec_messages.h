// The exec request and its answers (see the table in messages.h).
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

// Output cap per channel when the request names none.
inline constexpr uint64_t kDefaultOutputLimit = 1u << 20;

// OPEN {"op":"exec", argv, env, cwd?, timeout_ms?, stdin, output_limit, user?}.
// FromJson checks types only: env entries without '=' are kept (the agent
// ignores them), an empty cwd stays empty (the agent runs in "/"), `user`
// is resolved by the agent. Errors are S001 in the agent's order: argv,
// env, cwd, user, timeout_ms, output_limit, stdin.
struct ExecRequest {
  static constexpr std::string_view kOp = op::kExec;
  std::vector<std::string> argv;  // non-empty, argv[0] non-empty, no NUL
  std::vector<std::string> env;   // "K=V", no NUL
  std::optional<std::string> cwd;
  std::optional<int64_t> timeout_ms;                                 // >= 0; absent: no deadline
  bool has_stdin = false;                                            // "stdin": DATA on kStdin follows
  int64_t output_limit = static_cast<int64_t>(kDefaultOutputLimit);  // >= 0, bytes per stream
  std::optional<std::string> user;                                   // name|uid[:group|gid]

  nlohmann::json ToJson() const;
  static Result<ExecRequest> FromJson(const nlohmann::json& j);
  bool operator==(const ExecRequest&) const = default;
};

// META {"pid"} once the process started.
struct ExecStarted {
  int64_t pid = 0;  // > 0

  nlohmann::json ToJson() const;
  static Result<ExecStarted> FromJson(const nlohmann::json& j);
  bool operator==(const ExecStarted&) const = default;
};

// RESULT of an exec. `signal` is the terminating signal (0: exited);
// `exit_code` is then 128 + signal. A program that could not be started is
// a RESULT too (127/126, the reason on stderr).
struct ExecResult {
  int exit_code = 0;  // 0..255, or 128 + signal
  int signal = 0;     // 0..127
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  bool timed_out = false;
  bool cancelled = false;
  int64_t duration_ms = 0;  // >= 0

  nlohmann::json ToJson() const;
  // Errors are S300 (a malformed answer of the agent).
  static Result<ExecResult> FromJson(const nlohmann::json& j);
  bool operator==(const ExecResult&) const = default;
};

}  // namespace skiff::proto
