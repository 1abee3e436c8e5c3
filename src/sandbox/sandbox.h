// Sandbox: the record of one running sandbox (its shape, image facts, the
// isolation instance and the agent connection) and its lifecycle state.
// The state and the exec count are guarded by the registry's mutex
// (registry.h); teardown has its own lock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "images/catalog.h"
#include "isolation/isolator.h"
#include "protocol/client.h"
#include "sandbox/lifecycle.h"
#include "sandbox/types.h"

namespace skiff {

// SIGTERM-to-SIGKILL grace of a sandbox's instance on teardown.
inline constexpr auto kStopGrace = std::chrono::milliseconds(200);

class Sandbox {
 public:
  std::string id;
  std::string image;
  std::string isolation;
  std::optional<std::string> name;
  std::string tenant;  // CreateSpec::tenant; set before it is registered, then fixed
  uint32_t cpus = 1;
  uint32_t memory_mb = 512;
  bool network = false;
  uint64_t idle_timeout_secs = 300;
  bool pause_on_idle = false;  // CreateSpec::pause_on_idle
  bool auto_resume = false;    // CreateSpec::auto_resume
  // Held by a pause or resume for its whole length (pause.cc).
  std::mutex pause_mu;
  Env env;                             // create-time env (layer 3)
  std::vector<std::string> image_env;  // layer 2
  std::string image_workdir;
  std::string image_user;
  std::vector<ImageService> image_services;  // the image's declared services
  // Shared lease on the image's store entry, held until the sandbox is torn
  // down so no gc or `skiff image rm` (of any process) deletes its files.
  std::shared_ptr<const images::ImageLease> image_lease;
  // A jail created from a snapshot reads its files until torn down: this
  // handle keeps the snapshot from being deleted until then.
  std::shared_ptr<void> snapshot_use;
  // Hibernated (pause.cc): the store's internal snapshot holding it, and the
  // handle that removes that snapshot when the sandbox goes. Guarded by
  // pause_mu.
  std::string hibernated_snapshot;
  std::shared_ptr<void> hibernation;
  bool hibernate_on_idle = false;       // CreateSpec::hibernate_on_idle
  std::atomic<bool> hibernated{false};  // !hibernated_snapshot.empty(), for readers without pause_mu
  int64_t created_unix_ms = 0;
  std::atomic<int64_t> last_activity_unix_ms{0};
  std::atomic<int64_t> last_activity_mono_ms{0};

  std::unique_ptr<Instance> instance;
  std::shared_ptr<proto::Client> client;

  // Guarded by SandboxRegistry's mutex.
  uint32_t exec_in_flight = 0;
  SandboxState state = SandboxState::kStarting;

  // Caller holds SandboxRegistry's mutex.
  bool stopping() const { return IsStopping(state); }
  // Logs an illegal transition (and makes it anyway).
  void MoveTo(SandboxState next);

  void Touch();

  // Kills everything and releases host resources. Idempotent; concurrent
  // callers wait for the first one to finish.
  void Teardown();

 private:
  std::mutex td_mu_;
  std::condition_variable td_cv_;
  bool td_started_ = false;
  bool torn_down_ = false;
};

}  // namespace skiff
