// The snapshot functions (docs/api.md#sandboxsnapshot, docs/snapshots.md):
// sandbox::snapshot, sandbox::snapshot::list, sandbox::snapshot::delete and
// sandbox::fork. Each decodes and checks its request (S001) before the
// service call, as every handler does (docs/api.md#conventions).
#pragma once

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "functions/function_def.h"

namespace skiff::fn {

Result<nlohmann::json> HandleSnapshot(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleSnapshotList(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleSnapshotDelete(const nlohmann::json& payload, CallContext& ctx);
Result<nlohmann::json> HandleFork(const nlohmann::json& payload, CallContext& ctx);

}  // namespace skiff::fn
