#include "e2b/watcher_table.h"

#include "base/text.h"

namespace skiff::e2b {

using nlohmann::json;

Error WatcherTable::NotFound(const std::string& id) {
  return Error(Code::kS211, "file not found: watcher with id " + id.substr(0, 64) + " not found");
}

Result<std::string> WatcherTable::Add(const std::string& sandbox_id, int64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  if (watchers_.size() >= limits_.max_total)
    return Error(Code::kS400, "resource limit exceeded: " + std::to_string(limits_.max_total) +
                                  " watchers are open; remove one with RemoveWatcher");
  size_t mine = 0;
  for (const auto& [id, w] : watchers_) mine += w.sandbox_id == sandbox_id;
  if (mine >= limits_.max_per_sandbox)
    return Error(Code::kS400, "resource limit exceeded: this sandbox has " + std::to_string(mine) +
                                  " watchers open; remove one with RemoveWatcher");
  std::string id = RandomHex(16);
  Watcher& w = watchers_[id];
  w.sandbox_id = sandbox_id;
  w.last_poll_ms = now_ms;
  return id;
}

bool WatcherTable::Push(const std::string& id, json event) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second.overflowed || it->second.ended) return false;
  Watcher& w = it->second;
  size_t size = event.dump(-1, ' ', false, json::error_handler_t::replace).size();
  if (w.events.size() >= limits_.max_events || w.bytes + size > limits_.max_bytes) {
    w.overflowed = true;
    w.events.clear();
    w.events.shrink_to_fit();
    w.bytes = 0;
    return false;
  }
  w.bytes += size;
  w.events.push_back(std::move(event));
  return true;
}

void WatcherTable::End(const std::string& id, const Status& why) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second.ended) return;
  it->second.ended = true;
  it->second.end = why;
}

bool WatcherTable::Wanted(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = watchers_.find(id);
  return it != watchers_.end() && !it->second.overflowed;
}

Result<std::vector<json>> WatcherTable::Take(const std::string& sandbox_id, const std::string& id,
                                             int64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second.sandbox_id != sandbox_id) return NotFound(id);
  Watcher& w = it->second;
  w.last_poll_ms = now_ms;
  if (w.overflowed) {
    watchers_.erase(it);
    return Error(Code::kS400, "resource limit exceeded: more than " + std::to_string(limits_.max_events) +
                                  " events or " + std::to_string(limits_.max_bytes) +
                                  " bytes of them waited for GetWatcherEvents, so events were lost; the "
                                  "watcher is removed, create a new one and poll it more often");
  }
  if (!w.events.empty()) {
    std::vector<json> out = std::move(w.events);
    w.events.clear();
    w.bytes = 0;
    return out;
  }
  if (w.ended) {
    Status end = w.end;
    watchers_.erase(it);
    if (end.ok()) return Error(Code::kS211, "file not found: the watched directory went away");
    return end.error();
  }
  return std::vector<json>{};
}

bool WatcherTable::Remove(const std::string& sandbox_id, const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second.sandbox_id != sandbox_id) return false;
  watchers_.erase(it);
  return true;
}

std::vector<std::string> WatcherTable::RemoveSandbox(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> gone;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    if (it->second.sandbox_id == sandbox_id) {
      gone.push_back(it->first);
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

std::vector<std::string> WatcherTable::Expire(int64_t now_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> gone;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    if (now_ms - it->second.last_poll_ms >= limits_.idle_ms) {
      gone.push_back(it->first);
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

std::vector<std::string> WatcherTable::RemoveAll() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> gone;
  for (const auto& [id, w] : watchers_) gone.push_back(id);
  watchers_.clear();
  return gone;
}

size_t WatcherTable::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return watchers_.size();
}

}  // namespace skiff::e2b
