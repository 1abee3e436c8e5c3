// Draft-07 request/response schemas of every function (docs/architecture.md#transports-and-their-limits
// schema rules): root type object, a description on every property, `required` listing exactly the required
// fields, defaults, shared `definitions`, at least one example, never additionalProperties:false, and
// Extension fields described "Extension: …". Defaults and limits come from functions/decode.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace skiff::fn {

// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct FunctionSchemas {
  nlohmann::json request;
  nlohmann::json response;
};

// The schemas of a registered function id (sandbox::* and engine::*).
// An unknown id gives two null values.
FunctionSchemas SchemasFor(std::string_view id);

// Every shared definition, keyed by name (env, channel_ref, fs_entry,
// grep_match, sed_result, list_entry, catalog_entry, run_file).
const nlohmann::json& AllDefinitions();

}  // namespace skiff::fn
