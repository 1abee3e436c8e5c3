#include "fleet/sandbox_locator.h"

namespace skiff::fleet {

void SandboxLocator::Put(const std::string& sandbox_id, Placement p) {
  std::lock_guard<std::mutex> l(mu_);
  // Full: drop an arbitrary entry; that sandbox is found again by asking
  // the hosts, so the cache never decides what exists.
  if (where_.size() >= max_ && where_.count(sandbox_id) == 0) where_.erase(where_.begin());
  where_[sandbox_id] = std::move(p);
}

std::optional<Placement> SandboxLocator::Get(const std::string& sandbox_id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = where_.find(sandbox_id);
  if (it == where_.end()) return std::nullopt;
  return it->second;
}

void SandboxLocator::Forget(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> l(mu_);
  where_.erase(sandbox_id);
}

size_t SandboxLocator::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return where_.size();
}

}  // namespace skiff::fleet
