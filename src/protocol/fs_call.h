// The one-shot fs operations as one value: a request answered by a single
// RESULT, with no body stream (fs.write and fs.read stream, and have their
// own calls). The host hands an FsCall to the agent and checks the agent's
// answer against the type that op answers with, so a malformed or hostile
// RESULT never reaches a caller.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "base/error.h"
#include "protocol/fs_messages.h"

namespace skiff::proto {

using FsCall = std::variant<FsLsRequest, FsStatRequest, FsMkdirRequest, FsRmRequest, FsMvRequest,
                            FsChmodRequest, FsGrepRequest, FsSedRequest>;

// The OPEN payload of `call` ({"op": ..., fields}).
nlohmann::json ToJson(const FsCall& call);
std::string_view OpName(const FsCall& call);

// The agent's RESULT for `call`, read by the op's answer type (fs.ls:
// FsLsResult, fs.stat: FsEntry, fs.mkdir: FsMkdirResult, ...) and written
// back: the caller gets exactly the fields the op answers with. A RESULT
// that does not read is S300 naming the op. `result` is freed once read, so
// a large answer is never held in two parsed forms at once.
Result<nlohmann::json> CheckAnswer(const FsCall& call, nlohmann::json result);

}  // namespace skiff::proto
