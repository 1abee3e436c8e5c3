// The schemas of the sandbox::process::* functions and their shared
// definitions (process_info, term_size), in the vocabulary of
// functions/schema_builders.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "functions/schemas.h"

namespace skiff::fn {

// Two null values for an id that is not a sandbox::process::* function.
FunctionSchemas ProcessSchemas(std::string_view id);
// Adds process_info and term_size to the shared definitions.
void AddProcessDefinitions(nlohmann::json& defs);

}  // namespace skiff::fn
