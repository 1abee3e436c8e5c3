// The host functions a fleet router calls (docs/multihost.md):
// skiff::host::status (identity, backends and room, to place creates by) and
// skiff::host::has (does this host hold a sandbox). They answer for the
// caller's own sandboxes, like every other function.
#pragma once

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "functions/function_def.h"

namespace skiff::fn {

Result<nlohmann::json> HandleHostStatus(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleHostHas(const nlohmann::json& payload, CallContext& ctx);

}  // namespace skiff::fn
