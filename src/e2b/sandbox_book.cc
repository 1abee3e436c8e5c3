#include "e2b/sandbox_book.h"

#include <algorithm>

namespace skiff::e2b {

void SandboxBook::Add(SandboxRecord r) {
  std::lock_guard<std::mutex> lk(mu_);
  std::string id = r.sandbox_id;
  records_[id] = std::move(r);
}

std::optional<SandboxRecord> SandboxBook::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void SandboxBook::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  records_.erase(id);
}

bool SandboxBook::SetEnd(const std::string& id, int64_t end_ms, bool extend_only) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return false;
  it->second.end_ms = extend_only ? std::max(it->second.end_ms, end_ms) : end_ms;
  return true;
}

std::vector<SandboxRecord> SandboxBook::All() const {
  std::vector<SandboxRecord> out;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [id, r] : records_) out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const SandboxRecord& a, const SandboxRecord& b) {
    return a.started_ms < b.started_ms;
  });
  return out;
}

std::vector<std::string> SandboxBook::Expired(int64_t now_ms) const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, r] : records_)
    if (r.end_ms <= now_ms) out.push_back(id);
  return out;
}

}  // namespace skiff::e2b
