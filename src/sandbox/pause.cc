// Pause and resume of a live sandbox (SandboxManager::Pause, Resume and the
// auto-resume of calls that need it running). The backend stops and starts
// the processes (Instance::Pause/Resume); the registry records the state,
// which every call that needs the agent checks (S005).
#include <time.h>

#include <chrono>
#include <mutex>

#include "base/log.h"
#include "base/text.h"
#include "protocol/messages.h"
#include "sandbox/manager.h"

namespace skiff {
namespace {

constexpr auto kClockTimeout = std::chrono::seconds(5);

}  // namespace

Status SandboxManager::Pause(const std::string& sandbox_id) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  // One pause or resume of a sandbox at a time; a stop may run alongside
  // (the instance serialises it against Pause, and the registry refuses
  // the state change of a sandbox whose stop has begun).
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (registry_.Paused(*sb)) return Error(Code::kS006, "sandbox " + sandbox_id + " is already paused");
  // (A hibernated sandbox is paused too.) What the backend needs to answer
  // sandbox::metrics while paused is read first, while the agent runs.
  sb->instance->BeforePause(*sb->client);
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

Status SandboxManager::Hibernate(const std::string& sandbox_id) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<void> op, BeginStateOp());
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (!sb->hibernated_snapshot.empty())
    return Error(Code::kS006, "sandbox " + sandbox_id + " is already hibernated");
  SKIFF_RETURN_IF_ERROR(sb->instance->CanHibernate());
  auto t0 = std::chrono::steady_clock::now();
  // No new calls from here on (S005, or a resume with auto_resume); the
  // agent must answer the quiesce, so one paused in memory runs for it.
  const bool was_paused = registry_.Paused(*sb);
  if (was_paused) {
    SKIFF_RETURN_IF_ERROR(sb->instance->Resume());
  } else {
    SKIFF_RETURN_IF_ERROR(registry_.SetPaused(*sb, true));
  }
  auto undo = [&] {
    if (was_paused) {
      (void)sb->instance->Pause();
    } else {
      (void)registry_.SetPaused(*sb, false);
    }
  };
  Result<SnapshotStore::Pending> pending = snapshots_.Begin("", true);
  if (!pending.ok()) {
    undo();
    return std::move(pending).error().With("while hibernating sandbox " + sandbox_id);
  }
  // Past the save there is no way back to running (below), so the room the
  // state may need is checked first: the guest's memory and device state.
  const uint64_t need = (uint64_t{sb->memory_mb} << 20) + (uint64_t{64} << 20);
  if (pending->room < need) {
    snapshots_.Abort(*pending);
    undo();
    return Error(Code::kS400, "resource limit exceeded: hibernating sandbox " + sandbox_id + " needs up to " +
                                  std::to_string(need >> 20) + " MiB of snapshot room, " +
                                  std::to_string(pending->room >> 20) +
                                  " MiB are left under snapshot_max_bytes");
  }
  Result<std::shared_ptr<proto::Stream>> q =
      sb->client->Quiesce(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  if (!q.ok()) {
    snapshots_.Abort(*pending);
    undo();
    return std::move(q).error().With("while hibernating sandbox " + sandbox_id);
  }
  // The channel stops being read before the VMM goes (its end of file is
  // then no agent death); requests in flight end.
  if (Status st = sb->client->Suspend(); !st.ok()) {
    snapshots_.Abort(*pending);
    undo();
    return std::move(st).error().With("while hibernating sandbox " + sandbox_id);
  }
  Result<SnapshotContents> saved = sb->instance->Hibernate(pending->dir, pending->room);
  if (!saved.ok()) {
    // Its agent is quiesced and its channel suspended: it cannot go on.
    snapshots_.Abort(*pending);
    (void)Stop(sandbox_id, false);
    return std::move(saved).error().With("hibernating sandbox " + sandbox_id + " failed, so it was stopped");
  }
  SnapshotRecord r = RecordOf(*sb, *saved, true);
  // What a later daemon needs to take the sandbox up again (AdoptHibernated).
  HibernatedSandbox h;
  h.sandbox_id = sb->id;
  h.name = sb->name;
  h.env = sb->env;
  h.idle_timeout_secs = sb->idle_timeout_secs;
  h.pause_on_idle = sb->pause_on_idle;
  h.hibernate_on_idle = sb->hibernate_on_idle;
  h.auto_resume = sb->auto_resume;
  h.created_unix_ms = sb->created_unix_ms;
  h.network = sb->network;
  r.sandbox = std::move(h);
  Result<SnapshotRecord> rec = snapshots_.Commit(*pending, std::move(r));
  if (!rec.ok()) return std::move(rec).error().With("while hibernating sandbox " + sandbox_id);
  const std::string sid = rec->snapshot_id, user = sb->id;
  snapshots_.Use(sid, user);
  sb->hibernation = std::shared_ptr<void>(nullptr, [this, sid, user](void*) { snapshots_.Unuse(sid, user); });
  sb->hibernated_snapshot = sid;
  sb->hibernated = true;
  stats_.paused++;
  SKIFF_LOG(Info)
      << "sandbox " << sandbox_id << ": hibernated (" << (rec->size_bytes >> 20) << " MiB) in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
      << " ms";
  return OkStatus();
}

Status SandboxManager::Resume(const std::string& sandbox_id) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (!registry_.Paused(*sb)) return Error(Code::kS006, "sandbox " + sandbox_id + " is not paused");
  if (!sb->hibernated_snapshot.empty()) {
    // Hibernated: the same sandbox starts again from its saved state.
    Result<UniqueFd> ch = sb->instance->Wake(snapshots_.Dir(sb->hibernated_snapshot));
    if (!ch.ok()) return std::move(ch).error().With("while waking sandbox " + sandbox_id);
    // A failed rebind is the agent's death: the sandbox is torn down.
    SKIFF_RETURN_IF_ERROR(sb->client->Rebind(std::move(ch).value(), std::chrono::seconds(30)));
    sb->hibernated_snapshot.clear();
    sb->hibernated = false;
    sb->hibernation.reset();  // its saved state is no longer needed
    sb->Touch();
    SKIFF_RETURN_IF_ERROR(registry_.SetPaused(*sb, false));
    stats_.resumed++;
    SKIFF_LOG(Info) << "sandbox " << sandbox_id << ": woke from hibernation";
    return OkStatus();
  }
  Status st = sb->instance->Resume();
  if (!st.ok()) {
    if (registry_.Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
    return std::move(st).error().With("while resuming sandbox " + sandbox_id);
  }
  // The guest's clock stood still while it was paused: it is set to the
  // host's before anything else reaches the agent. (A failure leaves the
  // sandbox running, its clock behind; logged.)
  if (sb->instance->ClockStopsWhilePaused()) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    proto::ClockRequest clock{int64_t{now.tv_sec} * 1000000000 + now.tv_nsec};
    Result<nlohmann::json> set = sb->client->Call(clock, std::chrono::steady_clock::now() + kClockTimeout);
    if (!set.ok())
      SKIFF_LOG(Warn) << "sandbox " << sandbox_id
                      << ": setting its clock after the resume: " << set.error().message();
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

Result<SandboxMetrics> SandboxManager::Metrics(const std::string& sandbox_id) {
  // Read-only: a paused sandbox is not resumed (the jail reads it from the
  // host's side, the microVM answers the sample taken before its pause).
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (!sb->hibernated_snapshot.empty())
    return Error(Code::kS005, "sandbox " + sb->id + " is hibernated: resume it to read its metrics");
  SandboxMetrics m;
  Result<ResourceUsage> u = sb->instance->Usage(*sb->client);
  if (!u.ok()) {
    if (registry_.Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sb->id);
    return std::move(u).error();
  }
  m.usage = *u;
  m.timestamp_unix_ms = NowUnixMillis();
  return m;
}

void SandboxManager::PauseIdle(const std::shared_ptr<Sandbox>& sb) {
  Status st = sb->hibernate_on_idle ? Hibernate(sb->id) : Pause(sb->id);
  if (st.ok()) {
    SKIFF_LOG(Info) << "sandbox " << sb->id << ": paused after " << sb->idle_timeout_secs << " s idle";
  } else if (st.error().code() != Code::kS004 && st.error().code() != Code::kS006) {
    SKIFF_LOG(Warn) << "sandbox " << sb->id << ": idle pause failed: " << st.error().message();
  }
}

}  // namespace skiff
