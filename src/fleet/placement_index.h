// The router's index of where each sandbox lives, kept in the engine's
// state (docs/multihost.md#routing) so that it outlives the router: a
// restarted or standby router finds a sandbox with one state::get instead
// of asking every host, and still knows which host held the sandbox of a
// host that has since left (S301, not S002). One record per sandbox under
// the scope kPlacementScope, keyed by sandbox id:
//   {"host": "<namespace>", "boot_id": "<the host's boot>"}.
// The engine's state is a help, never the authority: an engine without a
// state worker, a record that does not parse, or a call that does not
// answer in time each make the router fall back to asking the hosts.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "fleet/engine_calls.h"
#include "fleet/sandbox_locator.h"

namespace skiff::fleet {

inline constexpr const char* kPlacementScope = "skiff.fleet.placements";

class PlacementIndex {
 public:
  // `host_prefix`: a record naming a namespace outside it is ignored.
  PlacementIndex(EngineCalls& calls, std::string host_prefix, std::chrono::milliseconds deadline)
      : calls_(calls), host_prefix_(std::move(host_prefix)), deadline_(deadline) {}

  // Records (or replaces) where `sandbox_id` is. Waits for the engine's
  // answer, up to the deadline; a failure is logged and otherwise ignored.
  void Put(const std::string& sandbox_id, const Placement& p);
  // The record for `sandbox_id`, or nullopt (none, unreadable, no answer).
  std::optional<Placement> Get(const std::string& sandbox_id);
  void Forget(const std::string& sandbox_id);

  // Whether the engine answered the last call as a state store would
  // (false once it said it has no state functions).
  bool available() const { return available_; }

 private:
  // One state call; its result on success, nullopt otherwise (logged).
  std::optional<nlohmann::json> Call(const char* function_id, nlohmann::json data);

  EngineCalls& calls_;
  std::string host_prefix_;
  std::chrono::milliseconds deadline_;
  std::atomic<bool> available_{true};
  std::atomic<bool> said_unavailable_{false};
};

}  // namespace skiff::fleet
