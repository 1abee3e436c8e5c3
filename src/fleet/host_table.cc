#include "fleet/host_table.h"

namespace skiff::fleet {

void HostTable::SetConnected(const std::set<std::string>& namespaces) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [ns, h] : hosts_) {
    if (namespaces.count(ns) == 0) {
      h.state = HostState::kLost;
    } else if (h.state == HostState::kLost) {
      h.state = HostState::kSilent;  // back (maybe a new boot): healthy once a probe answers
    }
  }
  for (const auto& ns : namespaces) {
    auto [it, fresh] = hosts_.try_emplace(ns);
    if (fresh) it->second.state = HostState::kSilent;
  }
}

void HostTable::ProbeOk(const HostView& view, const std::string& boot_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(view.ns);
  if (it == hosts_.end() || it->second.state == HostState::kLost) return;  // left meanwhile
  it->second.state = HostState::kHealthy;
  it->second.view = view;
  it->second.boot_id = boot_id;
}

void HostTable::ProbeFailed(const std::string& ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  if (it != hosts_.end() && it->second.state != HostState::kLost) it->second.state = HostState::kSilent;
}

void HostTable::NotePlaced(const std::string& ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  if (it != hosts_.end() && it->second.view) it->second.view->sandboxes++;
}

void HostTable::NoteStopped(const std::string& ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  if (it != hosts_.end() && it->second.view && it->second.view->sandboxes > 0) it->second.view->sandboxes--;
}

void HostTable::MarkLost(const std::string& ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  if (it != hosts_.end()) it->second.state = HostState::kLost;
}

HostState HostTable::StateOf(const std::string& ns) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  return it == hosts_.end() ? HostState::kUnknown : it->second.state;
}

std::optional<std::string> HostTable::BootOf(const std::string& ns) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = hosts_.find(ns);
  if (it == hosts_.end()) return std::nullopt;
  return it->second.boot_id;
}

std::vector<HostView> HostTable::Healthy() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<HostView> out;
  for (const auto& [ns, h] : hosts_)
    if (h.state == HostState::kHealthy && h.view) out.push_back(*h.view);
  return out;
}

std::vector<std::string> HostTable::HealthyNamespaces() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [ns, h] : hosts_)
    if (h.state == HostState::kHealthy) out.push_back(ns);
  return out;
}

size_t HostTable::connected() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (const auto& [ns, h] : hosts_)
    if (h.state == HostState::kHealthy || h.state == HostState::kSilent) ++n;
  return n;
}

}  // namespace skiff::fleet
