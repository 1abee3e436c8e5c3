#include "sandbox/registry.h"

#include <algorithm>
#include <tuple>

#include "base/text.h"

namespace skiff {

SandboxRegistry::SandboxRegistry(const Config& config, const std::map<std::string, uint32_t>& pool_targets)
    : config_(config) {
  for (const auto& [image, n] : pool_targets) pools_[image].target = n;
}

Status SandboxRegistry::Reserve() {
  std::lock_guard<std::mutex> lk(mu_);
  if (shutting_down_) return Platform("sandbox", "the daemon is shutting down");
  if (sandboxes_.size() + reserved_ >= config_.max_concurrent_sandboxes)
    return Error(Code::kS400, "resource limit exceeded: max_concurrent_sandboxes (" +
                                  std::to_string(config_.max_concurrent_sandboxes) + ") reached");
  ++reserved_;
  return OkStatus();
}

void SandboxRegistry::Unreserve() {
  std::lock_guard<std::mutex> lk(mu_);
  --reserved_;
  teardown_cv_.notify_all();
}

uint32_t SandboxRegistry::InUse() {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<uint32_t>(sandboxes_.size()) + reserved_;
}

void SandboxRegistry::WaitCreates() {
  std::unique_lock<std::mutex> lk(mu_);
  teardown_cv_.wait(lk, [&] { return reserved_ == 0; });
}

void SandboxRegistry::TeardownRefused(std::unique_lock<std::mutex>& lk, Sandbox& sb) {
  sb.MoveTo(SandboxState::kStopping);
  lk.unlock();
  sb.Teardown();
  lk.lock();
  sb.MoveTo(SandboxState::kStopped);
}

Result<std::shared_ptr<Sandbox>> SandboxRegistry::ClaimId(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) return it->second;
  if (claimed_ids_.count(id) > 0)
    return InvalidRequest("field 'sandbox_id': a create of sandbox " + id + " is already in progress");
  if (tearing_down_.count(id) > 0)
    return InvalidRequest("field 'sandbox_id': sandbox " + id + " is still being stopped");
  claimed_ids_.insert(id);
  return std::shared_ptr<Sandbox>();
}

void SandboxRegistry::ReleaseId(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  claimed_ids_.erase(id);
}

Status SandboxRegistry::Register(const std::shared_ptr<Sandbox>& sb) {
  std::unique_lock<std::mutex> lk(mu_);
  if (shutting_down_) {
    TeardownRefused(lk, *sb);
    return Platform("sandbox", "the daemon is shutting down");
  }
  sb->MoveTo(SandboxState::kReady);
  sandboxes_[sb->id] = sb;
  return OkStatus();
}

Result<std::shared_ptr<Sandbox>> SandboxRegistry::Lookup(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return SandboxNotFound(id);
  if (it->second->stopping()) return Error(Code::kS004, "sandbox already stopped: " + id);
  if (it->second->state == SandboxState::kPaused) return SandboxPaused(id);
  return it->second;
}

Result<std::shared_ptr<Sandbox>> SandboxRegistry::Find(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return SandboxNotFound(id);
  if (it->second->stopping()) return Error(Code::kS004, "sandbox already stopped: " + id);
  return it->second;
}

Status SandboxRegistry::SetPaused(Sandbox& sb, bool paused) {
  std::lock_guard<std::mutex> lk(mu_);
  if (sb.stopping()) return Error(Code::kS004, "sandbox already stopped: " + sb.id);
  bool is_paused = sb.state == SandboxState::kPaused;
  if (is_paused == paused)
    return Error(Code::kS006, "sandbox " + sb.id + (paused ? " is already paused" : " is not paused"));
  sb.MoveTo(paused ? SandboxState::kPaused : SandboxState::kReady);
  return OkStatus();
}

bool SandboxRegistry::Paused(const Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  return sb.state == SandboxState::kPaused;
}

bool SandboxRegistry::Stopping(const Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  return sb.stopping();
}

Status SandboxRegistry::AcquireExecSlot(Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  if (sb.stopping()) return Error(Code::kS004, "sandbox already stopped: " + sb.id);
  if (sb.state == SandboxState::kPaused) return SandboxPaused(sb.id);
  if (sb.exec_in_flight >= config_.exec_cap())
    return Error(Code::kS003, "sandbox " + sb.id +
                                  " is at its exec concurrency cap (max_concurrent_exec_per_sandbox=" +
                                  std::to_string(config_.exec_cap()) + ")");
  ++sb.exec_in_flight;
  return OkStatus();
}

void SandboxRegistry::ReleaseExecSlot(Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  --sb.exec_in_flight;
  sb.Touch();
}

std::vector<ListEntry> SandboxRegistry::List() {
  std::vector<ListEntry> out;
  int64_t now = NowUnixMillis();
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, sb] : sandboxes_) {
    ListEntry e;
    e.sandbox_id = sb->id;
    e.name = sb->name;
    e.image = sb->image;
    e.age_secs = (now - sb->created_unix_ms) / 1000;
    e.exec_in_flight = sb->exec_in_flight;
    uint32_t cap = std::max<uint32_t>(config_.max_concurrent_exec_per_sandbox, 1);
    e.exec_slots_free = cap > sb->exec_in_flight ? cap - sb->exec_in_flight : 0;
    e.stopped = sb->stopping();
    e.state = sb->stopping() ? "stopping" : sb->state == SandboxState::kPaused ? "paused" : "running";
    e.hibernated = sb->hibernated.load();
    e.isolation = sb->isolation;
    e.created_at = Rfc3339Millis(sb->created_unix_ms);
    e.last_activity_at = Rfc3339Millis(sb->last_activity_unix_ms);
    e.cpus = sb->cpus;
    e.memory_mb = sb->memory_mb;
    e.network = sb->network;
    e.tenant = sb->tenant;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const ListEntry& a, const ListEntry& b) {
    return std::tie(a.created_at, a.sandbox_id) < std::tie(b.created_at, b.sandbox_id);
  });
  return out;
}

std::optional<std::string> SandboxRegistry::TenantOf(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) return it->second->tenant;
  if (auto it = tearing_down_.find(id); it != tearing_down_.end()) return it->second->tenant;
  return std::nullopt;
}

Result<SandboxRegistry::StopTicket> SandboxRegistry::BeginStop(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) {
    StopTicket t{it->second, true};
    // Removed from the registry before stop returns, in both modes.
    sandboxes_.erase(it);
    t.sandbox->MoveTo(SandboxState::kStopping);
    tearing_down_[id] = t.sandbox;
    return t;
  }
  if (auto t = tearing_down_.find(id); t != tearing_down_.end())
    return StopTicket{t->second, false};  // a stop or reap is in progress: join it
  return SandboxNotFound(id);
}

std::vector<std::shared_ptr<Sandbox>> SandboxRegistry::TakeExpired(
    const std::function<bool(const Sandbox&)>& expired) {
  std::vector<std::shared_ptr<Sandbox>> victims;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
    auto& sb = it->second;
    if (sb->state == SandboxState::kReady && expired(*sb)) {
      sb->MoveTo(SandboxState::kStopping);
      victims.push_back(sb);
      tearing_down_[sb->id] = sb;
      it = sandboxes_.erase(it);
    } else {
      ++it;
    }
  }
  return victims;
}

std::vector<std::shared_ptr<Sandbox>> SandboxRegistry::Select(
    const std::function<bool(const Sandbox&)>& pick) {
  std::vector<std::shared_ptr<Sandbox>> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, sb] : sandboxes_)
    if (sb->state == SandboxState::kReady && pick(*sb)) out.push_back(sb);
  return out;
}

SandboxRegistry::Removed SandboxRegistry::RemoveDead(const std::shared_ptr<Sandbox>& s) {
  Removed removed = Removed::kNone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (s->stopping()) return Removed::kNone;
    s->MoveTo(SandboxState::kStopping);
    if (auto it = sandboxes_.find(s->id); it != sandboxes_.end() && it->second == s) {
      sandboxes_.erase(it);
      removed = Removed::kLive;
    } else if (auto p = pools_.find(s->image); p != pools_.end()) {
      auto& ready = p->second.ready;
      if (auto r = std::find(ready.begin(), ready.end(), s); r != ready.end()) {
        ready.erase(r);
        removed = Removed::kPooled;
      }
    }
  }
  if (removed == Removed::kPooled) pool_cv_.notify_all();
  return removed;
}

void SandboxRegistry::FinishTeardown(const std::shared_ptr<Sandbox>& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  // A joined stop or reap may have recorded the end already.
  if (sb->state == SandboxState::kStopping) sb->MoveTo(SandboxState::kStopped);
  tearing_down_.erase(sb->id);
  teardown_cv_.notify_all();
}

void SandboxRegistry::BackgroundTeardownStarted() {
  std::lock_guard<std::mutex> lk(mu_);
  ++pending_teardowns_;
}

void SandboxRegistry::BackgroundTeardownFinished(std::shared_ptr<Sandbox> sb) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A stop that joined this teardown may have recorded the end already.
    if (sb->state == SandboxState::kStopping) sb->MoveTo(SandboxState::kStopped);
    tearing_down_.erase(sb->id);
  }
  sb.reset();  // outside the lock: destroying a sandbox joins its reader thread
  std::lock_guard<std::mutex> lk(mu_);
  --pending_teardowns_;
  teardown_cv_.notify_all();
}

void SandboxRegistry::WaitTeardowns() {
  std::unique_lock<std::mutex> lk(mu_);
  teardown_cv_.wait(lk, [&] { return pending_teardowns_ == 0 && tearing_down_.empty(); });
}

std::vector<std::shared_ptr<Sandbox>> SandboxRegistry::BeginShutdown() {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutting_down_ = true;
    for (auto& [id, sb] : sandboxes_) {
      sb->MoveTo(SandboxState::kStopping);
      all.push_back(sb);
    }
    sandboxes_.clear();
    for (auto& [image, p] : pools_) {
      for (auto& sb : p.ready) {
        sb->MoveTo(SandboxState::kStopping);
        all.push_back(sb);
      }
      p.ready.clear();
    }
  }
  pool_cv_.notify_all();
  return all;
}

void SandboxRegistry::MarkStopped(Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  sb.MoveTo(SandboxState::kStopped);
}

Result<std::shared_ptr<Sandbox>> SandboxRegistry::ClaimPooled(const std::string& image, bool matches,
                                                              const std::function<void(Sandbox&)>& adopt) {
  std::shared_ptr<Sandbox> sb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    Pool& pool = pools_.at(image);
    if (shutting_down_) return Platform("sandbox", "the daemon is shutting down");
    while (matches && !pool.ready.empty() && !sb) {
      sb = std::move(pool.ready.front());
      pool.ready.pop_front();
      if (sb->stopping()) sb.reset();  // its agent died; the death handler tears it down
    }
    if (sb) {
      ++pool.hits;
      adopt(*sb);
      sandboxes_[sb->id] = sb;
    } else {
      ++pool.misses;
    }
  }
  pool_cv_.notify_all();
  return sb;
}

std::string SandboxRegistry::WaitForPoolNeed() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!shutting_down_) {
    auto now = Clock::now();
    auto wake = Clock::time_point::max();
    for (auto& [name, p] : pools_) {
      if (p.ready.size() >= p.target) continue;
      if (p.retry_at <= now) return name;
      wake = std::min(wake, p.retry_at);
    }
    if (wake == Clock::time_point::max())
      pool_cv_.wait(lk);
    else
      pool_cv_.wait_until(lk, wake);
  }
  return std::string();
}

Status SandboxRegistry::AddPooled(const std::string& image, const std::shared_ptr<Sandbox>& sb) {
  std::unique_lock<std::mutex> lk(mu_);
  if (shutting_down_) {
    TeardownRefused(lk, *sb);
    return Platform("sandbox", "the daemon is shutting down");
  }
  Pool& p = pools_.at(image);
  p.consecutive_failures = 0;
  sb->MoveTo(SandboxState::kReady);
  p.ready.push_back(sb);
  return OkStatus();
}

std::pair<uint32_t, SandboxRegistry::Clock::duration> SandboxRegistry::PoolFillFailed(
    const std::string& image, const std::function<Clock::duration(uint32_t)>& backoff_for) {
  std::lock_guard<std::mutex> lk(mu_);
  Pool& p = pools_.at(image);
  ++p.fill_failures;
  auto backoff = backoff_for(p.consecutive_failures++);
  p.retry_at = Clock::now() + backoff;
  return {p.consecutive_failures, backoff};
}

std::vector<PoolStatus> SandboxRegistry::PoolStats() {
  std::vector<PoolStatus> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [image, p] : pools_) {
    PoolStatus st;
    st.image = image;
    st.target = p.target;
    st.ready = static_cast<uint32_t>(p.ready.size());
    st.hits = p.hits;
    st.misses = p.misses;
    st.fill_failures = p.fill_failures;
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace skiff
