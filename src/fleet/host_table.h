// The fleet's hosts as the router knows them (docs/multihost.md#failures):
// which are connected to the engine, which answer probes, their last
// status and boot id. Thread-safe; the probe loop writes, calls read.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fleet/placement.h"

namespace skiff::fleet {

enum class HostState {
  kUnknown,  // never seen
  kHealthy,  // connected, answered its last probe
  kSilent,   // connected, but its last probe got no answer in time (no placements)
  kLost,     // no longer connected to the engine (its sandboxes are lost)
};

class HostTable {
 public:
  // The host namespaces connected to the engine now (engine::workers::list).
  // A known host missing from it is lost; a new one is silent until probed.
  void SetConnected(const std::set<std::string>& namespaces);
  // A probe of `ns` answered: healthy, with this view and boot id.
  void ProbeOk(const HostView& view, const std::string& boot_id);
  // A probe of `ns` did not answer in time: silent.
  void ProbeFailed(const std::string& ns);
  // A create placed on `ns` succeeded: count it now, so creates between two
  // probes spread instead of all going to the host that looked emptiest.
  void NotePlaced(const std::string& ns);
  // A sandbox on `ns` was stopped through the router: one less, as above.
  void NoteStopped(const std::string& ns);
  // A call found `ns` gone before the next probe did.
  void MarkLost(const std::string& ns);

  HostState StateOf(const std::string& ns) const;
  // The boot id `ns` answered last; nullopt before its first answer.
  std::optional<std::string> BootOf(const std::string& ns) const;
  // Healthy hosts' last views (placement candidates).
  std::vector<HostView> Healthy() const;
  // Namespaces of healthy hosts.
  std::vector<std::string> HealthyNamespaces() const;
  // Connected hosts (healthy or silent).
  size_t connected() const;

 private:
  struct Host {
    HostState state = HostState::kUnknown;
    std::optional<HostView> view;
    std::optional<std::string> boot_id;
  };
  mutable std::mutex mu_;
  std::map<std::string, Host> hosts_;
};

}  // namespace skiff::fleet
