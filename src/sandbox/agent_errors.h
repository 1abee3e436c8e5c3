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

// The error of a stream that ended without its answer: the agent's ERROR
// (its S004 as the sandbox's stop), or the connection's end (a kClosed
// event's reason, else `client_reason`) mapped by AgentConnectionError; a
// stop of the sandbox under way (`stopping`) makes it S004.
Error StreamEndedError(AgentCall call, const proto::Event& ev, proto::CloseReason client_reason,
                       bool stopping, std::string_view sandbox_id);
// An Open that failed with `e`: the connection's end, mapped as above.
Error OpenFailedError(AgentCall call, const Error& e, proto::CloseReason client_reason, bool stopping,
                      std::string_view sandbox_id);

}  // namespace skiff
