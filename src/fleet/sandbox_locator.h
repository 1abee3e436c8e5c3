// Which host holds which sandbox, as far as the router knows
// (docs/multihost.md#routing): filled by the creates it placed and by
// asking the hosts (skiff::host::has) about ids it has not seen, e.g.
// after a router restart. Thread-safe and bounded.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace skiff::fleet {

struct Placement {
  std::string ns;       // the host's namespace
  std::string boot_id;  // the host's boot when the sandbox was placed there
};

class SandboxLocator {
 public:
  explicit SandboxLocator(size_t max_entries = 1u << 20) : max_(max_entries) {}
  void Put(const std::string& sandbox_id, Placement p);
  std::optional<Placement> Get(const std::string& sandbox_id) const;
  void Forget(const std::string& sandbox_id);
  size_t size() const;

 private:
  size_t max_;
  mutable std::mutex mu_;
  std::map<std::string, Placement> where_;
};

}  // namespace skiff::fleet
