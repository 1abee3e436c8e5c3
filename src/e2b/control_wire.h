// The control plane's JSON on the wire (docs/e2b.md): reading a request's
// body, its fields and its page query, E2B's Sandbox objects, and skiff's
// errors as E2B's error bodies ({"code": <status>, "message": ...}; the SDK
// reads the body's code). Shared by every control-plane endpoint.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "e2b/exchange.h"
#include "e2b/sandbox_book.h"

namespace skiff::e2b {

// The body as a JSON object ({} when empty), or an S001 error.
Result<nlohmann::json> Body(const std::string& body);
// A string -> string map field (absent or null: empty), or an error naming it.
Result<std::map<std::string, std::string>> StringMap(const nlohmann::json& body, const char* key);
// An optional non-negative integer number of seconds.
Result<std::optional<uint64_t>> Seconds(const nlohmann::json& body, const char* key);
// The `limit` query parameter of a paged list: 1..1000, 100 when absent.
Result<size_t> PageLimit(const Request& req);

// skiff's error as E2B's error body, with the status the SDK maps to the
// matching error class.
Reply Failed(const Error& e);

// E2B's Sandbox (what create, connect and fork answer) and ListedSandbox.
nlohmann::json SandboxJson(const SandboxRecord& r);
nlohmann::json ListedJson(const SandboxRecord& r, bool paused);

}  // namespace skiff::e2b
