// Small, pure helpers of the HTTP and WebSocket transports: URL decoding,
// query strings, request routing, bounded JSON parsing, constant-time token
// comparison. No I/O here, so every piece is unit-tested directly.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/json_limits.h"
#include "base/text.h"  // PercentDecode, PercentEncode

namespace skiff::api {

inline constexpr size_t kMaxPayloadBytes = 32u << 20;  // docs/api.md#limits-and-defaults
using skiff::kMaxJsonDepth;

// Splits "a=1&b=x%20y" into decoded pairs; the first occurrence of a key wins.
// nullopt when an escape is malformed.
std::optional<std::map<std::string, std::string>> ParseQuery(std::string_view query);

// The request target split into its decoded path and raw query.
struct Target {
  std::string path;   // decoded
  std::string query;  // raw (after '?')
};
std::optional<Target> SplitTarget(std::string_view target);

enum class Route {
  kNotFound,
  kFunctionCall,   // /v1/functions/{id}   (GET = info, POST = call)
  kFunctionList,   // /v1/functions
  kFiles,          // /v1/sandboxes/{id}/files
  kProcessOutput,  // /v1/sandboxes/{id}/processes/{pid}/output
  kProcessTty,     // /v1/sandboxes/{id}/processes/{pid}/tty (WebSocket)
  kRun,            // /v1/run
  kHealthz,
  kMetrics,
  kOpenApi,  // /openapi.json
  kEngine,   // /
  kOtel,     // /otel
  kChannel,  // /ws/channels/{id}
};
struct RouteMatch {
  Route route = Route::kNotFound;
  std::string param;   // function id, sandbox id or channel id (decoded)
  std::string param2;  // kProcessOutput, kProcessTty: the pid, as written
};
RouteMatch MatchRoute(std::string_view decoded_path);

using skiff::JsonDepth;

// Parses a request payload: empty -> {}, depth-limited, errors are S001
// "invalid request: payload is not valid JSON: <detail>".
Result<nlohmann::json> ParsePayload(std::string_view body);

// A decimal integer of path or query text ("0".."max", digits only), or
// nullopt for anything else, an overflow included.
std::optional<int64_t> ParseDecimal(std::string_view text, int64_t max);

// Compact JSON that never throws on invalid UTF-8 (replaced with U+FFFD).
std::string Dump(const nlohmann::json& j);
// The size of Dump(j), counted without building the string.
size_t DumpedSize(const nlohmann::json& j);

// "Bearer <token>" -> token; nullopt otherwise.
std::optional<std::string_view> BearerToken(std::string_view authorization);

// Mode string of docs/api.md#conventions ("0755", "4755"); nullopt when invalid.
std::optional<uint32_t> ParseModeString(std::string_view s);

}  // namespace skiff::api
