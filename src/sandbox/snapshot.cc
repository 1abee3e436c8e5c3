// Snapshots and forks of live sandboxes (SandboxManager::Snapshot, Fork and
// create from a snapshot; docs/snapshots.md). The backend saves
// (Instance::Snapshot); a VM's agent channel is quiesced around the save
// (protocol/messages.h), so the copy holds no half-sent frame; the store
// keeps the result with its record (snapshot_store.h).
#include <chrono>

#include "base/log.h"
#include "base/text.h"
#include "sandbox/manager.h"

namespace skiff {
namespace {

constexpr auto kQuiesceTimeout = std::chrono::seconds(10);
constexpr uint32_t kMaxForks = 16;

}  // namespace

SnapshotRecord SandboxManager::RecordOf(const Sandbox& sb, const SnapshotContents& saved, bool internal) {
  SnapshotRecord r;
  r.source_sandbox_id = sb.id;
  r.image = sb.image;
  r.isolation = sb.isolation;
  r.cpus = sb.cpus;
  r.memory_mb = sb.memory_mb;
  r.memory = saved.memory;
  r.network = sb.network;
  r.size_bytes = saved.bytes;
  r.created_unix_ms = NowUnixMillis();
  r.tenant = sb.tenant;
  r.internal = internal;
  return r;
}

Result<SnapshotRecord> SandboxManager::SaveSnapshot(const std::shared_ptr<Sandbox>& sb,
                                                    const std::string& name, bool internal) {
  // No pause or resume meanwhile (a paused sandbox stays paused).
  std::lock_guard<std::mutex> lk(sb->pause_mu);
  if (!sb->hibernated_snapshot.empty())
    return Error(Code::kS005, "sandbox " + sb->id + " is hibernated: resume it before a snapshot or fork");
  SKIFF_ASSIGN_OR_RETURN(SnapshotStore::Pending pending, snapshots_.Begin(name, internal));
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<proto::Stream> quiesced;
  if (sb->instance->SnapshotNeedsQuiesce()) {
    Result<std::shared_ptr<proto::Stream>> q =
        sb->client->Quiesce(std::chrono::steady_clock::now() + kQuiesceTimeout);
    if (!q.ok()) {
      snapshots_.Abort(pending);
      return std::move(q).error().With("while quiescing sandbox " + sb->id + " for its snapshot");
    }
    quiesced = std::move(q).value();
  }
  Result<SnapshotContents> saved = sb->instance->Snapshot(pending.dir, pending.room);
  if (quiesced) {
    Status released = sb->client->Release(quiesced, std::chrono::steady_clock::now() + kQuiesceTimeout);
    if (!released.ok())
      SKIFF_LOG(Warn) << "sandbox " << sb->id << ": after its snapshot: " << released.error().message();
  }
  if (!saved.ok()) {
    snapshots_.Abort(pending);
    if (registry_.Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sb->id);
    return std::move(saved).error().With("while saving sandbox " + sb->id);
  }
  SnapshotRecord r = RecordOf(*sb, *saved, internal);
  r.name = name;
  SKIFF_ASSIGN_OR_RETURN(SnapshotRecord rec, snapshots_.Commit(pending, std::move(r)));
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  SKIFF_LOG(Info) << "sandbox " << sb->id << ": snapshot " << rec.snapshot_id << " ("
                  << (rec.memory ? "memory+disk" : "disk") << ", " << (rec.size_bytes >> 10) << " KiB) in "
                  << ms << " ms";
  return rec;
}

Result<std::shared_ptr<void>> SandboxManager::BeginStateOp() {
  std::lock_guard<std::mutex> lk(state_ops_mu_);
  if (state_ops_closed_) return Platform("sandbox", "the daemon is shutting down");
  state_ops_++;
  return std::shared_ptr<void>(nullptr, [this](void*) {
    std::lock_guard<std::mutex> g(state_ops_mu_);
    if (--state_ops_ == 0) state_ops_cv_.notify_all();
  });
}

Result<SnapshotRecord> SandboxManager::Snapshot(const std::string& sandbox_id, const std::string& name) {
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<void> op, BeginStateOp());
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  return SaveSnapshot(sb, name, false);
}

Result<SnapshotRecord> SandboxManager::SnapshotForCreate(const CreateSpec& spec) {
  SKIFF_ASSIGN_OR_RETURN(SnapshotRecord rec, snapshots_.Get(*spec.snapshot));
  // Another tenant's snapshot is as unknown as a missing one.
  if (rec.tenant != spec.tenant) return Error(Code::kS007, "snapshot " + *spec.snapshot + " not found");
  auto differs = [&](const char* field, const std::string& asked, const std::string& has) {
    return InvalidRequest(std::string("field '") + field + "': the snapshot's is " + has + ", not " + asked +
                          " (leave it out to take the snapshot's)");
  };
  if (!spec.image.empty() && spec.image != rec.image) return differs("image", spec.image, rec.image);
  if (spec.isolation && *spec.isolation != rec.isolation)
    return differs("isolation", *spec.isolation, rec.isolation);
  if (spec.cpus && *spec.cpus != rec.cpus)
    return differs("cpus", std::to_string(*spec.cpus), std::to_string(rec.cpus));
  if (spec.memory_mb && *spec.memory_mb != rec.memory_mb)
    return differs("memory_mb", std::to_string(*spec.memory_mb), std::to_string(rec.memory_mb));
  // A VM saved with its NIC runs on with one, and one saved without has
  // none to use (a jail's copy takes files only: its network is its own).
  if (rec.memory && spec.network != rec.network)
    return InvalidRequest(std::string("field 'network': the snapshot was taken ") +
                          (rec.network ? "with network: true; a sandbox from it needs network: true too"
                                       : "without network; a sandbox from it cannot have network: true"));
  return rec;
}

Result<std::vector<CreateResult>> SandboxManager::Fork(const std::string& sandbox_id, uint32_t count) {
  if (count < 1 || count > kMaxForks)
    return InvalidRequest("field 'count': must be between 1 and " + std::to_string(kMaxForks));
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<void> op, BeginStateOp());
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, registry_.Find(sandbox_id));
  SKIFF_ASSIGN_OR_RETURN(SnapshotRecord rec, SaveSnapshot(sb, "", true));
  // The fork's snapshot: removed once no copy uses it (a microVM copy is
  // done with it when it has started).
  auto holder = NewUuid();
  snapshots_.Use(rec.snapshot_id, holder);
  std::vector<CreateResult> out;
  Status failed = OkStatus();
  for (uint32_t i = 0; i < count; ++i) {
    CreateSpec spec;
    spec.snapshot = rec.snapshot_id;
    spec.tenant = sb->tenant;
    spec.env = sb->env;
    spec.network = sb->network;
    spec.idle_timeout_secs = sb->idle_timeout_secs;
    spec.pause_on_idle = sb->pause_on_idle;
    spec.hibernate_on_idle = sb->hibernate_on_idle;
    spec.auto_resume = sb->auto_resume;
    Result<CreateResult> c = Create(spec);
    if (!c.ok()) {
      failed = std::move(c).error();
      break;
    }
    out.push_back(std::move(c).value());
  }
  if (!failed.ok()) {
    // All or nothing: the copies made so far go.
    for (const CreateResult& c : out) (void)Stop(c.sandbox_id, true);
    snapshots_.Unuse(rec.snapshot_id, holder);
    return std::move(failed).error().With("while forking sandbox " + sandbox_id);
  }
  snapshots_.Unuse(rec.snapshot_id, holder);
  return out;
}

}  // namespace skiff
