// How failures of an agent connection become S-codes. Every call site that
// reads an agent's ERROR event or the end of its connection goes through
// here, so the messages (and how a stop is told apart from an agent death)
// are decided in one place.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"
#include "protocol/client.h"

namespace skiff {

// The agent's ERROR event ({"code","message","fix"}) as an Error; an ERROR
// that does not read as proto::AgentError is S300 saying so.
Error FromAgentError(const nlohmann::json& j);

// S004 "sandbox already stopped: <id>".
Error SandboxStopped(std::string_view sandbox_id);

// What the failed call was doing when the connection ended.
enum class AgentCall {
  kFs,       // an fs op (open, stream or result)
  kExec,     // an exec stream
  kProcess,  // a live-process op or stream (proc.*)
};

// Maps the end of an agent connection to the call's error: `reason` is why
// it ended (proto::Client::close_reason(), or a kClosed event's), `failure`
// the text for the message. Closed by the host (a stop, reap or shutdown):
// S004 "sandbox already stopped: <id>". Otherwise, for kFs: S216 "fs i/o
// error: sandbox transport: <failure>"; for kExec and kProcess: S300 "the sandbox's agent
// died (<failure>)[: <exit_report()>]" (`exit_report` is asked only then).
Error AgentConnectionError(AgentCall call, proto::CloseReason reason, std::string_view failure,
                           std::string_view sandbox_id,
                           const std::function<std::string()>& exit_report = nullptr);

}  // namespace skiff
