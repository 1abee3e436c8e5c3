// Bounds on JSON from anyone the daemon does not trust: API callers and
// agents (a microVM's guest controls its agent). Nesting is checked before
// parsing, so a deeply nested document never reaches recursive code.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace skiff {

inline constexpr size_t kMaxJsonDepth = 256;

// JSON nesting depth of `text` (brackets outside strings); stops counting
// once it exceeds `limit` and returns limit + 1.
size_t JsonDepth(std::string_view text, size_t limit);

// nlohmann::json::parse(text, nullptr, false), except that a document nested
// deeper than `max_depth` is refused unparsed: either way the result
// is_discarded().
nlohmann::json ParseJsonBounded(std::string_view text, size_t max_depth = kMaxJsonDepth);

}  // namespace skiff
