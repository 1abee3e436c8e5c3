// Which sandbox a call waits on, so that it runs on that sandbox's lane
// (docs/architecture.md#concurrency): every call that reaches an existing
// sandbox's agent shares that sandbox's lane, a stop has a lane of its own
// per sandbox (it never waits behind the calls it ends), and calls that
// reach no existing sandbox (create, run, list, the engine's functions) run
// on the shared pool.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::api {

struct CallTarget {
  std::string sandbox_id;
  bool stop = false;    // sandbox::stop
  bool stream = false;  // a followed output stream: its own lane, so it never holds the sandbox's calls

  // The lane's key: "sandbox:<id>", "stop:<id>" or "stream:<id>".
  std::string LaneKey() const;
};

// The sandbox a function call names, if it is sandbox-scoped and its
// sandbox_id is a plausible id (a string of at most 64 bytes); nullopt
// otherwise (the call then fails validation on the pool, or reaches no
// existing sandbox).
std::optional<CallTarget> CallTargetOf(std::string_view function_id, const nlohmann::json& payload);

}  // namespace skiff::api
