// Field accessors for the JSON requests of the filesystem operations
// (spec §3), and the mapping of an errno to the spec's typed fs error.
// Every accessor type-checks its field: a wrong type is S001.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace skiff::agent {

// "<prefix><what>" for errno `err` (spec §3.0); S216 appends the errno name.
Error FsError(int err, std::string_view what);

// A non-empty path without NUL bytes.
Result<std::string> ReqPath(const nlohmann::json& req, const char* key);
Result<bool> ReqBool(const nlohmann::json& req, const char* key, bool def);
// Unsigned values above INT64_MAX saturate.
Result<int64_t> ReqInt(const nlohmann::json& req, const char* key, int64_t def);
// An optional array of strings (absent or null: empty).
Result<std::vector<std::string>> ReqStrings(const nlohmann::json& req, const char* key);
// An octal mode; absent or null gives `def`, or S001 "required" without one.
// An invalid mode is S210.
Result<uint32_t> ReqMode(const nlohmann::json& req, const char* key, std::optional<uint32_t> def);

}  // namespace skiff::agent
