// SandboxManager's live-process calls (docs/api.md#sandboxprocessstart):
// the sandbox's lookup, a start's environment layers, and the agent's
// answers through ProcessClient; and forwarded connections to a port of
// the sandbox (PortClient).
#include <utility>
#include <variant>

#include "sandbox/command_env.h"
#include "sandbox/manager.h"
#include "sandbox/port_client.h"
#include "sandbox/process_client.h"

namespace skiff {

namespace {

// The caller's "K=V" entries as the last environment layer.
Env CallerEnv(const std::vector<std::string>& kv) {
  Env env;
  for (const auto& e : kv) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  return env;
}

}  // namespace

Result<nlohmann::json> SandboxManager::Process(const std::string& sandbox_id,
                                               const proto::ProcessCall& call) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  ProcessClient client(
      *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout());
  if (const auto* start = std::get_if<proto::ProcStartRequest>(&call)) {
    proto::ProcStartRequest req = *start;
    req.env = LayeredEnv(*sb, CallerEnv(start->env));
    req.cwd = CommandCwd(*sb, start->cwd);
    if (!req.user) req.user = ImageUser(*sb);
    stats_.execs++;
    return client.Call(req);
  }
  return client.Call(call);
}

Result<proto::ProcInfo> SandboxManager::ProcessOutput(const std::string& sandbox_id,
                                                      const proto::ProcOutputRequest& req,
                                                      ProcessOutputSink& sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return ProcessClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Output(req, sink);
}

Result<proto::ProcInputResult> SandboxManager::ProcessInput(const std::string& sandbox_id,
                                                            const proto::ProcInputRequest& req,
                                                            const ByteSource& source) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return ProcessClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Input(req, source);
}

Result<proto::PortConnectResult> SandboxManager::PortRelay(const std::string& sandbox_id, uint16_t port,
                                                           const ByteSource& upstream, PortSink& sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return PortClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Relay(port, upstream, sink);
}

}  // namespace skiff
