// A small JSON Schema (draft-07) validator covering the keywords skiff's own
// schemas use: type (string or list), properties, required, items,
// additionalProperties (schema form), enum, const, minimum, maximum,
// minItems, maxItems, minLength, anyOf, oneOf, allOf, $ref to
// "#/definitions/<name>". Unknown keywords are ignored. Used by the tests
// (documented examples, live responses) and available to e2e suites.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace skiff {

// Validates `instance` against `schema` (whose root holds `definitions`).
// Returns the list of violations, each "<json pointer>: <problem>"; empty
// means valid.
std::vector<std::string> ValidateJsonSchema(const nlohmann::json& schema, const nlohmann::json& instance);

}  // namespace skiff
