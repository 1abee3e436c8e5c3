// Hibernated sandboxes across a daemon restart (docs/snapshots.md): a
// hibernation's record names its sandbox, so the next daemon lists it
// again — paused, hibernated, same id, name and settings — and a resume
// wakes it as if the daemon had never gone. One that cannot be taken up
// (its image or backend gone, its save unfit for this host) becomes an
// ordinary snapshot instead, so nothing of it is lost.
#include "base/log.h"
#include "base/text.h"
#include "sandbox/manager.h"

namespace skiff {

void SandboxManager::AdoptHibernated() {
  for (const SnapshotRecord& rec : snapshots_.Hibernations()) {
    Status st = AdoptOne(rec);
    if (st.ok()) continue;
    const std::string name = "hibernated-" + rec.sandbox->sandbox_id;
    SKIFF_LOG(Warn) << "sandbox " << rec.sandbox->sandbox_id
                    << ": hibernated by an earlier daemon, cannot be taken up: " << st.error().message()
                    << "; its state is kept as snapshot " << name;
    if (Result<SnapshotRecord> kept = snapshots_.Publish(rec.snapshot_id, name); !kept.ok())
      SKIFF_LOG(Warn) << "snapshots: " << kept.error().message();
  }
}

Status SandboxManager::AdoptOne(const SnapshotRecord& rec) {
  const HibernatedSandbox& h = *rec.sandbox;
  if (registry_.Find(h.sandbox_id).ok()) return Platform("sandbox", "a sandbox with its id exists");
  auto iso = isolators_.find(rec.isolation);
  if (iso == isolators_.end())
    return Platform("isolation", "isolation '" + rec.isolation + "' is not available on this host");
  if (config_.isolation != "auto" && rec.isolation != config_.isolation)
    return Platform("isolation", "isolation '" + rec.isolation + "' is not permitted on this daemon");
  if (!catalog_.Known(rec.image) || !config_.ImageAllowed(rec.image))
    return Error(Code::kS100, "image '" + rec.image + "' is not in the catalog or not allowed");
  SKIFF_ASSIGN_OR_RETURN(ResolvedImage img, catalog_.Resolve(rec.image, rec.isolation == "microvm"));

  auto sb = std::make_shared<Sandbox>();
  sb->id = h.sandbox_id;
  SandboxPolicy policy = PrepareBoot(
      *sb, {rec.image, rec.isolation, rec.cpus, rec.memory_mb, h.network, snapshots_.Dir(rec.snapshot_id)},
      img);
  SKIFF_ASSIGN_OR_RETURN(sb->instance, iso->second->Dormant(policy));
  SKIFF_ASSIGN_OR_RETURN(sb->client, proto::Client::Dormant());
  sb->name = h.name;
  sb->tenant = rec.tenant;
  sb->env = h.env;
  sb->idle_timeout_secs = h.idle_timeout_secs;
  sb->pause_on_idle = h.pause_on_idle;
  sb->hibernate_on_idle = h.hibernate_on_idle;
  sb->auto_resume = h.auto_resume;
  sb->created_unix_ms = h.created_unix_ms;
  sb->Touch();
  sb->hibernated_snapshot = rec.snapshot_id;
  sb->hibernated = true;
  // Registered before the store counts it as used: a refusal here leaves
  // the saved state where it is (AdoptHibernated publishes it).
  SKIFF_RETURN_IF_ERROR(registry_.Reserve());
  Status registered = registry_.Register(sb);
  registry_.Unreserve();
  SKIFF_RETURN_IF_ERROR(registered);
  SKIFF_RETURN_IF_ERROR(registry_.SetPaused(*sb, true));
  const std::string sid = rec.snapshot_id, user = sb->id;
  snapshots_.Use(sid, user);
  {
    std::lock_guard<std::mutex> lk(sb->pause_mu);
    sb->hibernation =
        std::shared_ptr<void>(nullptr, [this, sid, user](void*) { snapshots_.Unuse(sid, user); });
  }
  WatchAgent(sb);
  SKIFF_LOG(Info) << "sandbox " << sb->id << ": hibernated, taken up from snapshot " << sid;
  return OkStatus();
}

}  // namespace skiff
