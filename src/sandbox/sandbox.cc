#include "sandbox/sandbox.h"

#include "base/log.h"
#include "base/text.h"

namespace skiff {

void Sandbox::MoveTo(SandboxState next) {
  if (!CanTransition(state, next))
    SKIFF_LOG(Error) << "sandbox " << id << ": illegal state change " << SandboxStateName(state) << " -> "
                     << SandboxStateName(next);
  state = next;
}

void Sandbox::Touch() {
  last_activity_unix_ms = NowUnixMillis();
  last_activity_mono_ms = MonotonicMillis();
}

void Sandbox::Teardown() {
  std::unique_lock<std::mutex> lk(td_mu_);
  if (td_started_) {
    td_cv_.wait(lk, [&] { return torn_down_; });
    return;
  }
  td_started_ = true;
  lk.unlock();
  if (client) client->Close();
  if (instance) instance->Stop(kStopGrace);
  image_lease.reset();  // nothing runs from the image any more
  snapshot_use.reset();
  hibernation.reset();
  lk.lock();
  torn_down_ = true;
  td_cv_.notify_all();
}

}  // namespace skiff
