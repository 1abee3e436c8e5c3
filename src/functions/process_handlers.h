// The sandbox::process::* handlers (docs/api.md#sandboxprocessstart): live
// processes that outlive the call that started them. Each decodes and checks
// its request (S001) before the service call, as every handler does
// (docs/api.md#conventions).
#pragma once

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "functions/function_def.h"

namespace skiff::fn {

Result<nlohmann::json> HandleProcessStart(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessList(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessOutput(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessInput(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessSignal(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessWait(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessResize(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleProcessForget(const nlohmann::json& payload, CallContext& ctx);

}  // namespace skiff::fn
