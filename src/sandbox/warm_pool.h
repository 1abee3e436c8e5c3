// WarmPool: the background filler that keeps every warm pool (docs/configuration.md#warm-pool)
// at its target, one boot at a time, oldest need first. A failed boot is
// logged and retried after 1 s, doubling up to 60 s. The pools' contents
// live in the registry (registry.h), so a claim is one step with the
// create's registration.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/error.h"
#include "sandbox/registry.h"
#include "sandbox/sandbox.h"

namespace skiff {

class WarmPool {
 public:
  // Boots a sandbox of `image` in the pooled shape.
  using BootFn = std::function<Result<std::shared_ptr<Sandbox>>(const std::string& image)>;
  // Arms removal on agent death of a pooled sandbox.
  using WatchFn = std::function<void(const std::shared_ptr<Sandbox>&)>;

  WarmPool(SandboxRegistry& registry, BootFn boot, WatchFn watch);
  ~WarmPool();  // joins the filler

  // Starts the filler when the registry has pools. A filler that cannot be
  // started is logged; the pools then stay empty and creates boot fresh.
  void Start();
  // Waits for the filler to end (after the registry's shutdown began).
  void Join();

 private:
  void Loop();

  SandboxRegistry& registry_;
  BootFn boot_;
  WatchFn watch_;
  std::thread filler_;
  std::mutex join_mu_;
};

}  // namespace skiff
