// One call of a function as a transport sees it: what Invoke()
// (functions/registry.h) hands back, and the HTTP status it answers with.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "functions/engine_errors.h"

namespace skiff {

// Exactly one of the four is set: `result`; `error` (an S-code error, send
// ErrorToWire); `engine_error` (send EngineFault::ToJson()); `relayed_error`
// (the error body another worker answered, passed on verbatim by a fleet
// router, docs/multihost.md).
struct Invocation {
  std::optional<nlohmann::json> result;
  std::optional<Error> error;
  std::optional<EngineFault> engine_error;
  std::optional<nlohmann::json> relayed_error;
  int http_status() const;  // 200, the S-code's status, or the engine fault's
};

}  // namespace skiff
