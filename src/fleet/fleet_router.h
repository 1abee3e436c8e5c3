// The fleet router (docs/multihost.md): answers the public sandbox::*
// functions by calling the hosts, each a skiff daemon registered in its
// own engine namespace. A create goes to the host with the most room that
// offers the backend (spilling over on S400); every call naming a sandbox
// goes to the host holding it; lists fan out and merge. A host that left
// the engine makes its sandboxes' calls S301 ("host lost"); a host whose
// probes go unanswered gets no new sandboxes. Where each sandbox lives is
// cached in memory and recorded in the engine's state (placement_index.h).
#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "fleet/engine_calls.h"
#include "fleet/host_table.h"
#include "fleet/placement_index.h"
#include "fleet/sandbox_locator.h"
#include "functions/invocation.h"

namespace skiff::fleet {

struct RouterOptions {
  // Hosts are the `iii-sandbox` workers whose namespace starts with this.
  std::string host_prefix = "skiff.";
  // How long a probe (workers list, host status) may take before the host
  // counts as silent.
  std::chrono::milliseconds probe_deadline{2000};
};

class FleetRouter {
 public:
  FleetRouter(EngineCalls& calls, RouterOptions options);

  // One probe round: which hosts the engine has, and each one's status.
  // S300 when the engine cannot keep namespaces apart (it lists workers
  // without a namespace: iii before 0.23) or does not answer.
  Status Probe();
  // Answers one call of a public function.
  Invocation Handle(const std::string& function_id, const nlohmann::json& payload);

  // Whether a probe found the engine unable to keep namespaces apart.
  bool engine_too_old() const { return engine_too_old_; }
  const HostTable& hosts() const { return hosts_; }
  const SandboxLocator& locator() const { return locator_; }

 private:
  // The connected hosts from engine::workers::list.
  Result<std::set<std::string>> ListHosts();
  Invocation Create(const nlohmann::json& payload);
  Invocation Run(const nlohmann::json& payload);
  // list-style functions: every healthy host's array under `key`, each
  // element given a `host` field.
  Invocation FanOut(const std::string& function_id, const nlohmann::json& payload, const char* key);
  // snapshot::delete: the first host that has it.
  Invocation FirstThatHas(const std::string& function_id, const nlohmann::json& payload);
  // A call naming a sandbox: to its host.
  Invocation ToSandbox(const std::string& function_id, const nlohmann::json& payload, const std::string& id);
  // A call that fails validation (or names no sandbox): any healthy host
  // answers it exactly as it would directly.
  Invocation ToAnyHost(const std::string& function_id, const nlohmann::json& payload);
  Result<Placement> Locate(const std::string& sandbox_id);
  // The answer of a host call, as the router's own.
  Invocation Relay(const std::string& ns, const CallOutcome& o, const std::string& sandbox_id);
  // Re-reads which hosts are connected (after a call hints one is gone).
  void RefreshConnected();
  Error HostLost(const std::string& sandbox_id, const std::string& ns) const;
  Error NoHosts() const;
  Error NoRoom(const std::string& isolation) const;

  EngineCalls& calls_;
  RouterOptions opt_;
  HostTable hosts_;
  SandboxLocator locator_;  // what this router knows, in memory
  PlacementIndex index_;    // the same, in the engine's state (outlives the router)
  std::atomic<bool> engine_too_old_{false};
};

// The S-code a host's error body carries ({"code":"invocation_failed",
// "message":"handler error: {...S-code object...}"}), or "" for any other
// error (an engine fault).
std::string SCodeOf(const nlohmann::json& error_body);

}  // namespace skiff::fleet
