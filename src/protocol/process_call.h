// The one-shot live-process operations as one value: a request answered by
// a single RESULT (proc.output and proc.input stream, and have their own
// calls). As with FsCall, the host checks the agent's answer against the
// type the op answers with, so a malformed or hostile RESULT never reaches
// a caller.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "base/error.h"
#include "protocol/process_messages.h"

namespace skiff::proto {

using ProcessCall = std::variant<ProcStartRequest, ProcListRequest, ProcSignalRequest, ProcWaitRequest,
                                 ProcResizeRequest, ProcForgetRequest>;

// The OPEN payload of `call` ({"op": ..., fields}).
nlohmann::json ToJson(const ProcessCall& call);
std::string_view OpName(const ProcessCall& call);

// The agent's RESULT for `call`, read by the op's answer type (proc.start
// and proc.wait: ProcInfo, proc.list: ProcListResult, the rest: {}) and
// written back. A RESULT that does not read is S300 naming the op.
Result<nlohmann::json> CheckAnswer(const ProcessCall& call, nlohmann::json result);

}  // namespace skiff::proto
