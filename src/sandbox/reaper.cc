#include "sandbox/reaper.h"

#include <chrono>

#include "base/log.h"
#include "base/text.h"
#include "base/thread.h"

namespace skiff {

Reaper::Reaper(SandboxRegistry& registry, const Config& config, SandboxStats& stats, TeardownFn teardown,
               PauseFn pause)
    : registry_(registry),
      config_(config),
      stats_(stats),
      teardown_(std::move(teardown)),
      pause_(std::move(pause)) {}

Reaper::~Reaper() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void Reaper::Start() {
  auto t = StartThread("reaper", [this] { Loop(); });
  if (!t.ok()) {
    SKIFF_LOG(Error) << "reaper: " << t.error().message() << "; idle sandboxes are not reaped";
    return;
  }
  thread_ = std::move(t).value();
}

void Reaper::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void Reaper::ReapOnce() {
  int64_t now = MonotonicMillis();
  int64_t busy_grace = static_cast<int64_t>(config_.exec_timeout_cap()) + 60000;
  auto idle = [&](const Sandbox& sb) {
    int64_t idle_ms = now - sb.last_activity_mono_ms;
    int64_t limit = static_cast<int64_t>(sb.idle_timeout_secs) * 1000;
    if (sb.exec_in_flight > 0) limit += busy_grace;
    return idle_ms > limit;
  };
  // Paused, not stopped: each pause takes milliseconds (a freeze, a QMP
  // command), bounded by the backend's own timeout.
  for (auto& sb : registry_.Select([&](const Sandbox& sb) { return sb.pause_on_idle && idle(sb); }))
    pause_(sb);
  auto victims = registry_.TakeExpired([&](const Sandbox& sb) { return !sb.pause_on_idle && idle(sb); });
  for (auto& sb : victims) {
    SKIFF_LOG(Info) << "reaping idle sandbox " << sb->id;
    stats_.reaped++;
    teardown_(sb);
  }
}

void Reaper::Loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::seconds(10));
    if (stop_) break;
    lk.unlock();
    ReapOnce();
    lk.lock();
  }
}

}  // namespace skiff
