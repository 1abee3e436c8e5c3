#include "protocol/exec_messages.h"

#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

json ExecRequest::ToJson() const {
  json j{{"op", kOp}, {"argv", argv}, {"env", env}, {"stdin", has_stdin}, {"output_limit", output_limit}};
  if (cwd) j["cwd"] = *cwd;
  if (timeout_ms) j["timeout_ms"] = *timeout_ms;
  if (user) j["user"] = *user;
  return j;
}

Result<ExecRequest> ExecRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ExecRequest r;
  auto argv = j.find("argv");
  if (argv == j.end() || !argv->is_array() || argv->empty())
    return InvalidRequest("argv: expected a non-empty array of strings");
  for (const auto& a : *argv) {
    if (!a.is_string()) return InvalidRequest("argv: expected strings");
    std::string v = a.get<std::string>();
    if (v.find('\0') != std::string::npos) return InvalidRequest("argv: NUL byte");
    r.argv.push_back(std::move(v));
  }
  if (r.argv[0].empty()) return InvalidRequest("no program given");
  if (!field::Missing(j, "env")) {
    const json& env = j["env"];
    if (!env.is_array()) return InvalidRequest("env: expected an array of \"K=V\"");
    for (const auto& e : env) {
      if (!e.is_string()) return InvalidRequest("env: expected strings");
      std::string v = e.get<std::string>();
      if (v.find('\0') != std::string::npos) return InvalidRequest("env: NUL byte");
      r.env.push_back(std::move(v));
    }
  }
  SKIFF_ASSIGN_OR_RETURN(r.cwd, field::OptString(j, "cwd"));
  if (r.cwd && r.cwd->find('\0') != std::string::npos) return InvalidRequest("cwd: NUL byte");
  SKIFF_ASSIGN_OR_RETURN(r.user, field::OptString(j, "user"));
  SKIFF_ASSIGN_OR_RETURN(r.timeout_ms, field::OptInt(j, "timeout_ms"));
  SKIFF_ASSIGN_OR_RETURN(r.output_limit, field::Int(j, "output_limit", r.output_limit));
  SKIFF_ASSIGN_OR_RETURN(r.has_stdin, field::Bool(j, "stdin", false));
  if (r.output_limit < 0) return InvalidRequest("output_limit: expected an integer >= 0");
  if (r.timeout_ms && *r.timeout_ms < 0) return InvalidRequest("timeout_ms: expected an integer >= 0");
  return r;
}

json ExecStarted::ToJson() const { return json{{"pid", pid}}; }

Result<ExecStarted> ExecStarted::FromJson(const json& j) {
  auto parse = [&]() -> Result<ExecStarted> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "META"));
    ExecStarted m;
    SKIFF_ASSIGN_OR_RETURN(m.pid, field::IntIn(j, "pid", 1, INT32_MAX));
    return m;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("exec META", r.error());
  return r;
}

json ExecResult::ToJson() const {
  return json{{"exit_code", exit_code},
              {"signal", signal},
              {"stdout_truncated", stdout_truncated},
              {"stderr_truncated", stderr_truncated},
              {"timed_out", timed_out},
              {"cancelled", cancelled},
              {"duration_ms", duration_ms}};
}

Result<ExecResult> ExecResult::FromJson(const json& j) {
  auto parse = [&]() -> Result<ExecResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    ExecResult r;
    SKIFF_ASSIGN_OR_RETURN(int64_t code, field::IntIn(j, "exit_code", 0, 255 + 128));
    SKIFF_ASSIGN_OR_RETURN(int64_t sig, field::IntIn(j, "signal", 0, 127));
    r.exit_code = static_cast<int>(code);
    r.signal = static_cast<int>(sig);
    SKIFF_ASSIGN_OR_RETURN(r.stdout_truncated, field::RequiredBool(j, "stdout_truncated"));
    SKIFF_ASSIGN_OR_RETURN(r.stderr_truncated, field::RequiredBool(j, "stderr_truncated"));
    SKIFF_ASSIGN_OR_RETURN(r.timed_out, field::RequiredBool(j, "timed_out"));
    SKIFF_ASSIGN_OR_RETURN(r.cancelled, field::RequiredBool(j, "cancelled"));
    SKIFF_ASSIGN_OR_RETURN(r.duration_ms, field::IntIn(j, "duration_ms", 0, INT64_MAX));
    return r;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("exec RESULT", r.error());
  return r;
}

}  // namespace skiff::proto
