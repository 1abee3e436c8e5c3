// What the E2B API remembers about each sandbox it created, beyond what
// skiff's own registry holds: the template it was asked for, its metadata,
// its envd access token, its global environment and its end of life (E2B's
// timeout is a lifetime, not an idle time). Thread-safe. In memory: a
// sandbox does not outlive the daemon, and neither does its record.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace skiff::e2b {

struct SandboxRecord {
  std::string sandbox_id;  // skiff's id
  std::string template_id;
  std::string alias;  // the template name asked for
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env_vars;
  std::string access_token;  // envdAccessToken
  // trafficAccessToken: set when the create asked network.allowPublicTraffic
  // false; a port's traffic must then carry it (E2B-Traffic-Access-Token).
  std::string traffic_token;
  int64_t started_ms = 0;  // wall clock
  int64_t end_ms = 0;      // wall clock: the sandbox is stopped then
  uint32_t cpus = 0;
  uint32_t memory_mb = 0;
  bool internet = false;
  bool auto_pause = false;   // lifecycle.onTimeout asked for pause
  bool auto_resume = false;  // autoResume.enabled
};

class SandboxBook {
 public:
  void Add(SandboxRecord r);
  std::optional<SandboxRecord> Get(const std::string& id) const;
  void Remove(const std::string& id);
  // Sets the end of life to `end_ms`; with `extend_only`, never earlier
  // than it is. False for an unknown id.
  bool SetEnd(const std::string& id, int64_t end_ms, bool extend_only);
  // Every record, by start time (oldest first), then id.
  std::vector<SandboxRecord> All() const;
  // The ids whose end of life is at or before `now_ms`.
  std::vector<std::string> Expired(int64_t now_ms) const;
  // The sandbox whose token is `token` and that passes `match`.
  template <class F>
  std::optional<SandboxRecord> Find(F&& match) const {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [id, r] : records_)
      if (match(r)) return r;
    return std::nullopt;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, SandboxRecord> records_;
};

}  // namespace skiff::e2b
