// Reading proto3-JSON the way connect-es writes it and protobuf accepts it
// (docs/e2b.md#envd): a field by its camelCase or snake_case name, integers
// as numbers or strings, bytes as standard or URL-safe base64, padded or
// not. Each reader names the field in its error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::e2b {

// The member `camel` (or `snake`, if given) of `msg`; null when absent.
const nlohmann::json* Member(const nlohmann::json& msg, std::string_view camel, std::string_view snake = {});

// Optional fields; absent or null read as nullopt.
Result<std::optional<std::string>> OptString(const nlohmann::json& msg, std::string_view camel,
                                             std::string_view snake = {});
Result<std::optional<uint64_t>> OptUint(const nlohmann::json& msg, std::string_view camel, uint64_t max,
                                        std::string_view snake = {});
Result<std::optional<bool>> OptBool(const nlohmann::json& msg, std::string_view camel,
                                    std::string_view snake = {});
// A proto3 `bytes` value.
Result<std::string> Bytes(const nlohmann::json& value, std::string_view field);

// Parses a request message (a JSON object), or invalid_argument.
Result<nlohmann::json> ParseMessage(std::string_view text);

}  // namespace skiff::e2b
