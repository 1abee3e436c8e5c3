// SandboxRegistry: where every sandbox is (live, being torn down, or ready
// in a warm pool) and the caps on them, under one mutex. Every lifecycle
// state change and every read of a lifecycle flag happens inside that lock,
// so a sandbox is always in exactly one place: a create's claim from a pool
// and its registration are one step, and an agent death at any moment finds
// the sandbox where it is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/config.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

class SandboxRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // `pool_targets`: image -> pooled sandboxes to keep ready (fixed for the
  // registry's life; only the pools' contents change).
  SandboxRegistry(const Config& config, const std::map<std::string, uint32_t>& pool_targets);

  // --- create
  // Reserves a create slot (live sandboxes + creates in progress): S400 at
  // max_concurrent_sandboxes, S300 when the daemon is shutting down.
  Status Reserve();
  void Unreserve();
  // Blocks until no create holds a reservation. After BeginShutdown a
  // create still booting finishes, is refused by Register (torn down) and
  // unreserves: Shutdown waits for that, so an exiting daemon leaves no
  // half-created sandbox (a VMM, its state, a template build) behind.
  void WaitCreates();
  // Live sandboxes (running, paused or being stopped) and creates in
  // progress: what counts against max_concurrent_sandboxes.
  uint32_t InUse();
  // Claims a caller-chosen id for a create. Null when it was free (it is
  // then held until ReleaseId); the sandbox when a live one has it (a
  // retried create); S001 while another create holds it or a teardown of
  // a sandbox with that id is still in progress.
  Result<std::shared_ptr<Sandbox>> ClaimId(const std::string& id);
  void ReleaseId(const std::string& id);
  // Registers a booted sandbox (Starting -> Ready). When the daemon is
  // shutting down it tears the sandbox down instead (-> Stopped) and fails.
  Status Register(const std::shared_ptr<Sandbox>& sb);

  // --- lookup and exec admission
  // S002 unknown, S004 a stop has begun, S005 paused.
  Result<std::shared_ptr<Sandbox>> Lookup(const std::string& id);
  // A live sandbox whether running or paused: S002 unknown, S004 a stop
  // has begun.
  Result<std::shared_ptr<Sandbox>> Find(const std::string& id);
  // Ready -> Paused (`paused`) or Paused -> Ready. S004 when a stop began
  // meanwhile, S006 when it is already in that state.
  Status SetPaused(Sandbox& sb, bool paused);
  // Whether `sb` is paused now.
  bool Paused(const Sandbox& sb);
  // Whether a stop of `sb` has begun.
  bool Stopping(const Sandbox& sb);
  // Takes an exec slot of `sb`: S004 stopping, S003 at the exec cap.
  Status AcquireExecSlot(Sandbox& sb);
  // Gives it back (and marks the sandbox active).
  void ReleaseExecSlot(Sandbox& sb);
  std::vector<ListEntry> List();
  // The tenant of a live sandbox or one being stopped; nullopt otherwise
  // (pooled sandboxes are nobody's until claimed).
  std::optional<std::string> TenantOf(const std::string& id);

  // --- stop, reap, death, teardown
  struct StopTicket {
    std::shared_ptr<Sandbox> sandbox;
    bool first = false;  // false: joins a stop or reap already in progress
  };
  // Takes a live sandbox out (Ready -> Stopping) before the stop returns,
  // or finds the stop or reap in progress. S002 when neither.
  Result<StopTicket> BeginStop(const std::string& id);
  // Takes out every running (not paused) sandbox `expired` holds for
  // (called under the lock; it may read guarded fields). Each is moved to
  // Stopping.
  std::vector<std::shared_ptr<Sandbox>> TakeExpired(const std::function<bool(const Sandbox&)>& expired);
  // The running sandboxes `pick` holds for (under the lock), left in place.
  std::vector<std::shared_ptr<Sandbox>> Select(const std::function<bool(const Sandbox&)>& pick);
  // Removes a sandbox whose agent died from the registry or its pool
  // (-> Stopping). kNone: a stop had already begun, nothing to do.
  enum class Removed { kNone, kLive, kPooled };
  Removed RemoveDead(const std::shared_ptr<Sandbox>& sb);
  // Records the end of a teardown begun by BeginStop/TakeExpired/RemoveDead:
  // Stopping -> Stopped (unless a joined stop recorded it), and forgets it.
  void FinishTeardown(const std::shared_ptr<Sandbox>& sb);
  // Background teardowns in flight, which Shutdown waits for.
  void BackgroundTeardownStarted();
  // Takes the caller's reference, which must be the last one outside the
  // registry: the sandbox (and its fds) is gone before the teardown counts
  // as finished, so a Shutdown that returns leaves nothing open.
  void BackgroundTeardownFinished(std::shared_ptr<Sandbox> sb);
  // Blocks until every teardown has ended: background ones, and stops or
  // reaps torn down inline (a `stop` with wait: true on an API thread), so
  // a daemon exiting after Shutdown never cuts one short.
  void WaitTeardowns();

  // --- shutdown
  // Refuses new work from now on; takes out every live and pooled sandbox
  // (-> Stopping) and wakes the pool filler.
  std::vector<std::shared_ptr<Sandbox>> BeginShutdown();
  // Stopping -> Stopped, for a sandbox torn down by the caller.
  void MarkStopped(Sandbox& sb);

  // --- warm pools
  bool HasPool(const std::string& image) const { return pools_.count(image) > 0; }
  bool HasPools() const { return !pools_.empty(); }
  // A create of `image`: when `matches` (the pooled shape), claims a ready
  // sandbox, lets `adopt` give it the create's settings and registers it,
  // all in one step. Null on a miss. S300 when shutting down.
  Result<std::shared_ptr<Sandbox>> ClaimPooled(const std::string& image, bool matches,
                                               const std::function<void(Sandbox&)>& adopt);
  // The filler: blocks until some pool is below its target and due for a
  // boot, and returns its image; "" once shutting down.
  std::string WaitForPoolNeed();
  // Adds a booted sandbox to `image`'s pool (Starting -> Ready). When the
  // daemon is shutting down it tears the sandbox down instead and fails.
  Status AddPooled(const std::string& image, const std::shared_ptr<Sandbox>& sb);
  // A failed fill boot of `image`: counts it, retries no sooner than
  // `backoff_for(failures before this one)` from now. Returns the failures
  // in a row, this one included, and the backoff chosen.
  std::pair<uint32_t, Clock::duration> PoolFillFailed(
      const std::string& image, const std::function<Clock::duration(uint32_t)>& backoff_for);
  std::vector<PoolStatus> PoolStats();

 private:
  struct Pool {
    uint32_t target = 0;
    std::deque<std::shared_ptr<Sandbox>> ready;
    uint64_t hits = 0, misses = 0, fill_failures = 0;
    uint32_t consecutive_failures = 0;
    Clock::time_point retry_at{};
  };
  // Tears `sb` down for a daemon that is shutting down; called with `lk`
  // held, returns with it held.
  void TeardownRefused(std::unique_lock<std::mutex>& lk, Sandbox& sb);

  const Config& config_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::map<std::string, std::shared_ptr<Sandbox>> tearing_down_;  // stop/reap in progress
  uint32_t reserved_ = 0;                                         // creates in progress
  std::set<std::string> claimed_ids_;                             // ClaimId, until ReleaseId
  bool shutting_down_ = false;
  uint32_t pending_teardowns_ = 0;
  std::condition_variable teardown_cv_;  // pending_teardowns_ or reserved_ went down
  // Warm pools by image; pool_cv_ wakes the filler.
  std::map<std::string, Pool> pools_;
  std::condition_variable pool_cv_;
};

}  // namespace skiff
