#include "sandbox/agent_errors.h"

#include <string>

#include "protocol/messages.h"

namespace skiff {

Error FromAgentError(const nlohmann::json& j) {
  auto e = proto::AgentError::FromJson(j);
  if (!e.ok()) return std::move(e).error();
  return e->ToError();
}

Error SandboxStopped(std::string_view sandbox_id) {
  return Error(Code::kS004, "sandbox already stopped: " + std::string(sandbox_id));
}

Error AgentConnectionError(AgentCall call, proto::CloseReason reason, std::string_view failure,
                           std::string_view sandbox_id, const std::function<std::string()>& exit_report) {
  if (reason == proto::CloseReason::kClosedByHost) return SandboxStopped(sandbox_id);
  switch (call) {
    case AgentCall::kFs:
      return Error(Code::kS216, "fs i/o error: sandbox transport: " + std::string(failure));
    case AgentCall::kExec:
    case AgentCall::kProcess: {
      std::string report = exit_report ? exit_report() : std::string();
      return Platform("sandbox", "the sandbox's agent died (" + std::string(failure) + ")" +
                                     (report.empty() ? std::string() : ": " + report));
    }
  }
  return Error(Code::kS300, std::string(failure));
}

Error StreamEndedError(AgentCall call, const proto::Event& ev, proto::CloseReason client_reason,
                       bool stopping, std::string_view sandbox_id) {
  if (ev.kind == proto::Event::Kind::kError) {
    Error e = FromAgentError(ev.json);
    if (e.code() == Code::kS004) return SandboxStopped(sandbox_id);
    return e;
  }
  if (stopping) return SandboxStopped(sandbox_id);
  proto::CloseReason reason = ev.kind == proto::Event::Kind::kClosed ? ev.close_reason : client_reason;
  return AgentConnectionError(call, reason, ev.json.value("message", std::string()), sandbox_id);
}

Error OpenFailedError(AgentCall call, const Error& e, proto::CloseReason client_reason, bool stopping,
                      std::string_view sandbox_id) {
  proto::Event closed;  // kClosed
  closed.json = {{"message", e.message()}};
  closed.close_reason = client_reason;
  return StreamEndedError(call, closed, client_reason, stopping, sandbox_id);
}

}  // namespace skiff
