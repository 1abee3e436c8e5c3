// Pause and resume of a live sandbox (SandboxManager::Pause, Resume and the
// auto-resume of calls that need it running). The backend stops and starts
// the processes (Instance::Pause/Resume); the registry records the state,
// which every call that needs the agent checks (S005).
#include <mutex>

#include "base/log.h"
#include "sandbox/manager.h"

namespace skiff {

Status SandboxManager::Pause(const std::string& sandbox_id) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  // One pause or resume of a sandbox at a time; a stop may run alongside
  // (the instance serialises it against Pause, and the registry refuses
  // the state change of a sandbox whose stop has begun).
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (registry_.Paused(*sb)) return Error(Code::kS006, "sandbox " + sandbox_id + " is already paused");
  Status st = sb->instance->Pause();
  if (!st.ok()) {
    if (registry_.Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
    return std::move(st).error().With("while pausing sandbox " + sandbox_id);
  }
  if (Status moved = registry_.SetPaused(*sb, true); !moved.ok()) {
    // Stopped meanwhile: its teardown kills the frozen processes anyway.
    return moved;
  }
  stats_.paused++;
  SKIFF_LOG(Info) << "sandbox " << sandbox_id << ": paused";
  return OkStatus();
}

Status SandboxManager::Resume(const std::string& sandbox_id) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (!registry_.Paused(*sb)) return Error(Code::kS006, "sandbox " + sandbox_id + " is not paused");
  Status st = sb->instance->Resume();
  if (!st.ok()) {
    if (registry_.Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
    return std::move(st).error().With("while resuming sandbox " + sandbox_id);
  }
  // Activity: the idle clock starts again from the resume.
  sb->Touch();
  SKIFF_RETURN_IF_ERROR(registry_.SetPaused(*sb, false));
  stats_.resumed++;
  SKIFF_LOG(Info) << "sandbox " << sandbox_id << ": resumed";
  return OkStatus();
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Running(const std::string& sandbox_id) {
  Result<std::shared_ptr<Sandbox>> sb = registry_.Lookup(sandbox_id);
  if (sb.ok() || sb.error().code() != Code::kS005) return sb;
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> paused, registry_.Find(sandbox_id));
  if (!paused->auto_resume) return sb;
  Status st = Resume(sandbox_id);
  // S006: another call resumed it first.
  if (!st.ok() && st.error().code() != Code::kS006) return std::move(st).error();
  return registry_.Lookup(sandbox_id);
}

void SandboxManager::PauseIdle(const std::shared_ptr<Sandbox>& sb) {
  Status st = Pause(sb->id);
  if (st.ok()) {
    SKIFF_LOG(Info) << "sandbox " << sb->id << ": paused after " << sb->idle_timeout_secs << " s idle";
  } else if (st.error().code() != Code::kS004 && st.error().code() != Code::kS006) {
    SKIFF_LOG(Warn) << "sandbox " << sb->id << ": idle pause failed: " << st.error().message();
  }
}

}  // namespace skiff
