// Strict readers of the fields of the agent protocol's JSON messages, shared
// by every FromJson of messages.h. Each reads obj[key] of a JSON object and
// checks its type; a wrong type is S001 "invalid request: <key>: <what>"
// (the agent's answer to a bad request). The message types turn these into
// S300 where the JSON came from the agent (AnswerError below).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace skiff::proto::field {

// The object is a request for `op`: a JSON object whose "op" is `op`.
Status RequireOp(const nlohmann::json& j, std::string_view op);
// `what` is a JSON object (S001 "<what> is not a JSON object").
Status RequireObject(const nlohmann::json& j, std::string_view what);

// Absent or null.
bool Missing(const nlohmann::json& obj, const char* key);

// A non-empty path without NUL bytes.
Result<std::string> Path(const nlohmann::json& obj, const char* key);
// A required string ("<key>: expected a string").
Result<std::string> String(const nlohmann::json& obj, const char* key);
// An optional string: absent or null give nullopt.
Result<std::optional<std::string>> OptString(const nlohmann::json& obj, const char* key);
// A boolean; absent or null give `def`.
Result<bool> Bool(const nlohmann::json& obj, const char* key, bool def);
// A required boolean.
Result<bool> RequiredBool(const nlohmann::json& obj, const char* key);
// An integer; absent or null give `def`. Unsigned values above INT64_MAX
// saturate; a float, string or anything else is S001.
Result<int64_t> Int(const nlohmann::json& obj, const char* key, int64_t def);
// An optional integer (absent or null: nullopt), saturating like Int.
Result<std::optional<int64_t>> OptInt(const nlohmann::json& obj, const char* key);
// A required integer in [lo, hi] ("<key>: expected an integer in [lo, hi]").
Result<int64_t> IntIn(const nlohmann::json& obj, const char* key, int64_t lo, int64_t hi);
// An optional array of strings (absent or null: empty).
Result<std::vector<std::string>> Strings(const nlohmann::json& obj, const char* key);
// A required array of strings.
Result<std::vector<std::string>> RequiredStrings(const nlohmann::json& obj, const char* key);
// A required array ("<key>: expected an array").
Result<const nlohmann::json*> Array(const nlohmann::json& obj, const char* key);

// A mode on the wire: an integer 0..07777; nullopt for anything else.
std::optional<uint32_t> ModeFromJson(const nlohmann::json& v);
// A mode field; absent or null give `def`, or S001 "<key>: required" without
// one. An invalid mode is S210 "invalid octal mode: <json>".
Result<uint32_t> Mode(const nlohmann::json& obj, const char* key, std::optional<uint32_t> def);
// A mode as the agent reports it: four octal digits ("0644").
Result<std::string> ModeText(const nlohmann::json& obj, const char* key);

// The error for a malformed message from the agent: S300
// "platform failure: sandbox: agent sent a malformed <what> (<detail>)".
Error AnswerError(std::string_view what, const Error& detail);

}  // namespace skiff::proto::field
