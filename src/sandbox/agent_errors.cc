#include "sandbox/agent_errors.h"

#include <string>

namespace skiff {

Error FromAgentError(const nlohmann::json& j) {
  auto code = CodeFromName(j.value("code", std::string("S300"))).value_or(Code::kS300);
  Error e(code, j.value("message", std::string("agent error")));
  if (j.contains("fix") && j["fix"].is_object()) e.set_fix(j["fix"]);
  return e;
}

Error SandboxStopped(std::string_view sandbox_id) {
  return Error(Code::kS004, "sandbox already stopped: " + std::string(sandbox_id));
}

Error AgentConnectionError(AgentCall call, std::string_view failure, std::string_view sandbox_id,
                           const std::function<std::string()>& exit_report) {
  // The text proto::Client gives a connection the host closed itself.
  if (failure == "closed by host") return SandboxStopped(sandbox_id);
  switch (call) {
    case AgentCall::kFs:
      return Error(Code::kS216, "fs i/o error: sandbox transport: " + std::string(failure));
    case AgentCall::kExec: {
      std::string report = exit_report ? exit_report() : std::string();
      return Platform("sandbox", "the sandbox's agent died (" + std::string(failure) + ")" +
                                     (report.empty() ? std::string() : ": " + report));
    }
  }
  return Error(Code::kS300, std::string(failure));
}

}  // namespace skiff
