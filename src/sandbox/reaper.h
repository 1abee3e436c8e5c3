// Reaper: every 10 s, takes idle sandboxes out of the registry and tears
// them down, or pauses those created with on_idle: pause. A sandbox is idle
// after idle_timeout_secs without activity; one with an exec in flight gets
// the exec timeout cap plus 60 s more. Paused sandboxes are never reaped.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "sandbox/config.h"
#include "sandbox/registry.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

class Reaper {
 public:
  // `teardown` tears a sandbox taken out of the registry down (in the
  // background) and records its end there.
  using TeardownFn = std::function<void(std::shared_ptr<Sandbox>)>;
  // `pause` pauses an idle sandbox created with on_idle: pause.
  using PauseFn = std::function<void(const std::shared_ptr<Sandbox>&)>;

  Reaper(SandboxRegistry& registry, const Config& config, SandboxStats& stats, TeardownFn teardown,
         PauseFn pause);
  ~Reaper();  // stops and joins

  // Starts the thread. One that cannot be started is logged: idle
  // sandboxes are then not reaped.
  void Start();
  // Ends the thread's loop (it is joined by the destructor).
  void Stop();
  // One pass.
  void ReapOnce();

 private:
  void Loop();

  SandboxRegistry& registry_;
  const Config& config_;
  SandboxStats& stats_;
  TeardownFn teardown_;
  PauseFn pause_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace skiff
