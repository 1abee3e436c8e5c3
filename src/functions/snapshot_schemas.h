// The schemas of the snapshot functions (sandbox::snapshot,
// sandbox::snapshot::list, sandbox::snapshot::delete, sandbox::fork) and
// their shared definition (snapshot), in the vocabulary of
// functions/schema_builders.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "functions/schemas.h"

namespace skiff::fn {

// True when `id` is one of the snapshot functions; then *s is set.
bool SnapshotSchemas(std::string_view id, FunctionSchemas* s);
// Adds `snapshot` to the shared definitions.
void AddSnapshotDefinitions(nlohmann::json& defs);

}  // namespace skiff::fn
