#include "sandbox/warm_pool.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "base/thread.h"

namespace skiff {

WarmPool::WarmPool(SandboxRegistry& registry, BootFn boot, WatchFn watch)
    : registry_(registry), boot_(std::move(boot)), watch_(std::move(watch)) {}

WarmPool::~WarmPool() { Join(); }

void WarmPool::Start() {
  if (!registry_.HasPools()) return;
  auto t = StartThread("pool filler", [this] { Loop(); });
  if (!t.ok()) {
    SKIFF_LOG(Error) << "warm pool: " << t.error().message() << "; pools stay empty";
    return;
  }
  filler_ = std::move(t).value();
}

void WarmPool::Join() {
  // A boot in progress finishes, sees the shutdown and tears down.
  std::lock_guard<std::mutex> lk(join_mu_);
  if (filler_.joinable() && filler_.get_id() != std::this_thread::get_id()) filler_.join();
}

void WarmPool::Loop() {
  using Clock = SandboxRegistry::Clock;
  constexpr auto kBackoffMin = std::chrono::seconds(1);
  constexpr auto kBackoffMax = std::chrono::seconds(60);
  for (;;) {
    std::string image = registry_.WaitForPoolNeed();
    if (image.empty()) return;  // shutting down
    auto booted = boot_(image);
    if (!booted.ok()) {
      auto [in_a_row, backoff] = registry_.PoolFillFailed(image, [&](uint32_t failures_before) {
        uint32_t shift = std::min<uint32_t>(failures_before, 6);
        return std::min<Clock::duration>(kBackoffMin * (1u << shift), kBackoffMax);
      });
      SKIFF_LOG(Warn) << "pool " << image << ": boot failed (" << in_a_row << " in a row), retrying in "
                      << std::chrono::duration_cast<std::chrono::seconds>(backoff).count()
                      << " s: " << booted.error().message();
      continue;
    }
    std::shared_ptr<Sandbox> sb = std::move(booted).value();
    if (!registry_.AddPooled(image, sb).ok()) return;  // shut down meanwhile: torn down
    watch_(sb);
  }
}

}  // namespace skiff
