// How the fleet router calls functions through the engine: an interface
// (the worker link implements it; tests use a double), with the blocking
// and fan-out forms the router is written in.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/iii_codec.h"

namespace skiff::fleet {

using api::iii::CallOutcome;

class EngineCalls {
 public:
  virtual ~EngineCalls() = default;
  // Calls `function_id` in namespace `ns` ("" = default); `done` runs once
  // with the answer, kTimeout after `deadline`, or kLinkLost.
  virtual void Call(const std::string& function_id, const std::string& ns, nlohmann::json data,
                    std::chrono::milliseconds deadline, std::function<void(CallOutcome)> done) = 0;
};

CallOutcome CallAndWait(EngineCalls& calls, const std::string& function_id, const std::string& ns,
                        const nlohmann::json& data, std::chrono::milliseconds deadline);
// The same call to every namespace at once; the answers in that order.
std::vector<CallOutcome> CallEach(EngineCalls& calls, const std::string& function_id,
                                  const std::vector<std::string>& namespaces, const nlohmann::json& data,
                                  std::chrono::milliseconds deadline);

}  // namespace skiff::fleet
