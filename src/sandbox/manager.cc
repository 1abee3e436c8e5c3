#include "sandbox/manager.h"

#include <algorithm>

#include "base/log.h"
#include "base/paths.h"
#include "base/text.h"
#include "base/thread.h"
#include "base/unique_fd.h"
#include "sandbox/dir_watch_client.h"
#include "sandbox/fs_client.h"
#include "sandbox/lifecycle.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBootTimeout = std::chrono::seconds(30);

// The pools of `config` a create can claim from: a pooled sandbox has the
// default shape; if the image's caps forbid that shape, none is pooled.
std::map<std::string, uint32_t> PoolTargets(const Config& config) {
  std::map<std::string, uint32_t> targets;
  for (const auto& [image, n] : config.pool) {
    if (n == 0) continue;
    if (auto c = config.per_image_caps.find(image);
        c != config.per_image_caps.end() &&
        ((c->second.max_cpus && config.default_cpus > *c->second.max_cpus) ||
         (c->second.max_memory_mb && config.default_memory_mb > *c->second.max_memory_mb))) {
      SKIFF_LOG(Warn) << "pool " << image << ": default_cpus/default_memory_mb exceed the image's "
                      << "per_image_caps; no sandbox of it is pooled";
      continue;
    }
    targets[image] = n;
  }
  return targets;
}

}  // namespace

SandboxManager::SandboxManager(Config config, std::map<std::string, std::unique_ptr<Isolator>> isolators,
                               HostProbes host)
    : config_(std::move(config)),
      host_(std::move(host)),
      isolators_(std::move(isolators)),
      catalog_(ImagePolicyFor(config_)),
      registry_(config_, PoolTargets(config_)),
      snapshots_(config_.snapshot_dir.empty() ? paths::DataDir() + "/snapshots" : config_.snapshot_dir,
                 config_.snapshot_max_bytes, config_.snapshot_max_count),
      pool_(
          registry_,
          [this](const std::string& image) {
            return Boot({image, default_isolation_, config_.default_cpus, config_.default_memory_mb, false});
          },
          [this](const std::shared_ptr<Sandbox>& sb) { WatchAgent(sb); }),
      reaper_(
          registry_, config_, stats_,
          [this](const std::shared_ptr<Sandbox>& sb) { TeardownInBackground(sb); },
          [this](const std::shared_ptr<Sandbox>& sb) { PauseIdle(sb); }) {
  if (config_.isolation == "auto") {
    default_isolation_ = (isolators_.count("microvm") && KvmUsable()) ? "microvm" : "jail";
    if (!isolators_.count(default_isolation_) && !isolators_.empty())
      default_isolation_ = isolators_.begin()->first;
  } else {
    default_isolation_ = config_.isolation;
  }
  snapshots_.Load();
  AdoptHibernated();
  reaper_.Start();
  pool_.Start();
}

SandboxManager::~SandboxManager() { Shutdown(); }

std::vector<std::string> SandboxManager::available_isolations() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : isolators_) out.push_back(k);
  return out;
}

std::string SandboxManager::microvm_accel() const {
  if (!isolators_.count("microvm")) return {};
  return KvmUsable() ? "kvm" : "tcg";
}

nlohmann::json SandboxManager::Doctor() {
  nlohmann::json d = {{"default_isolation", default_isolation_},
                      {"kvm", KvmUsable()},
                      {"isolation_available", available_isolations()}};
  for (auto& [k, iso] : isolators_) d[k] = iso->Doctor();
  d["network"] = host_.network_doctor ? host_.network_doctor() : nlohmann::json();
  nlohmann::json images = nlohmann::json::array();
  for (auto& e : catalog_.List())
    images.push_back({{"name", e.name}, {"installed", e.installed}, {"allowed", e.allowed}});
  d["images"] = images;
  return d;
}

std::vector<CatalogEntry> SandboxManager::CatalogList() { return catalog_.List(); }

HostFacts SandboxManager::Host() {
  HostFacts h;
  h.boot_id = boot_id_;
  h.max_sandboxes = config_.max_concurrent_sandboxes;
  h.sandboxes = registry_.InUse();
  for (const auto& p : registry_.PoolStats()) h.pooled_ready += p.ready;
  return h;
}

Result<CreateResult> SandboxManager::Create(const CreateSpec& request) {
  auto t0 = Clock::now();
  CreateSpec spec = request;
  std::string restore_dir;
  std::optional<SnapshotRecord> from;
  if (request.snapshot) {
    SKIFF_ASSIGN_OR_RETURN(from, SnapshotForCreate(request));
    spec.image = from->image;
    spec.isolation = from->isolation;
    spec.cpus = from->cpus;
    spec.memory_mb = from->memory_mb;
    restore_dir = snapshots_.Dir(from->snapshot_id);
  }
  uint32_t cpus = spec.cpus.value_or(config_.default_cpus);
  uint32_t memory_mb = spec.memory_mb.value_or(config_.default_memory_mb);
  if (cpus < 1 || cpus > 255) return InvalidRequest("field 'cpus': must be between 1 and 255");
  if (memory_mb < 64) return InvalidRequest("field 'memory_mb': must be at least 64");
  if (spec.isolation && *spec.isolation != "microvm" && *spec.isolation != "jail")
    return InvalidRequest("field 'isolation': expected \"microvm\" or \"jail\", got \"" + *spec.isolation +
                          "\"");

  // A caller-chosen id: a retry of a create that already made this
  // sandbox answers it; otherwise the id is held until the end of this
  // create, so two creates never race for it.
  bool holds_id = false;
  ScopedCleanup release_id([&] {
    if (holds_id) registry_.ReleaseId(*spec.sandbox_id);
  });
  if (spec.sandbox_id) {
    SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> existing, registry_.ClaimId(*spec.sandbox_id));
    if (existing) {
      bool same = existing->tenant == spec.tenant && (spec.snapshot || existing->image == spec.image) &&
                  (!spec.isolation || *spec.isolation == existing->isolation);
      if (!same) return InvalidRequest("field 'sandbox_id': " + *spec.sandbox_id + " is already in use");
      return CreateResult{existing->id, existing->image, existing->isolation, existing->image_services};
    }
    holds_id = true;
  }

  // Step 2: reserve a slot atomically (live sandboxes + creates in progress).
  SKIFF_RETURN_IF_ERROR(registry_.Reserve());
  ScopedCleanup release([&] { registry_.Unreserve(); });

  // Step 3: known and allowlisted.
  if (!catalog_.Known(spec.image) || !config_.ImageAllowed(spec.image)) {
    std::string names;
    for (const auto& e : catalog_.List())
      if (e.allowed) names += (names.empty() ? "" : ", ") + e.name;
    return Error(Code::kS100, "image '" + spec.image +
                                  "' is not in the catalog or not allowed; allowed images: " +
                                  (names.empty() ? "none" : names));
  }
  // Step 4: per-image caps.
  if (auto it = config_.per_image_caps.find(spec.image); it != config_.per_image_caps.end()) {
    if (it->second.max_cpus && cpus > *it->second.max_cpus)
      return Error(Code::kS400, "resource limit exceeded: cpus=" + std::to_string(cpus) +
                                    " exceeds per-image cap " + std::to_string(*it->second.max_cpus));
    if (it->second.max_memory_mb && memory_mb > *it->second.max_memory_mb)
      return Error(Code::kS400, "resource limit exceeded: memory_mb=" + std::to_string(memory_mb) +
                                    " exceeds per-image cap " + std::to_string(*it->second.max_memory_mb));
  }
  // Step 5: isolation available and permitted.
  std::string isolation = spec.isolation.value_or(default_isolation_);
  if (config_.isolation != "auto" && isolation != config_.isolation)
    return Platform("isolation", "isolation '" + isolation +
                                     "' is not permitted on this daemon (configured: " + config_.isolation +
                                     ")");
  if (!isolators_.count(isolation))
    return Platform("isolation", "isolation '" + isolation + "' is not available on this host");
  // Warm pool (docs/configuration.md#warm-pool): a create matching the pooled shape claims a
  // booted sandbox; claim and registration are one step in the registry.
  if (registry_.HasPool(spec.image) && restore_dir.empty() && !spec.sandbox_id) {
    bool matches = cpus == config_.default_cpus && memory_mb == config_.default_memory_mb && !spec.network &&
                   isolation == default_isolation_;
    SKIFF_ASSIGN_OR_RETURN(
        std::shared_ptr<Sandbox> sb, registry_.ClaimPooled(spec.image, matches, [&](Sandbox& claimed) {
          claimed.name = spec.name;
          claimed.tenant = spec.tenant;
          claimed.env = spec.env;
          claimed.idle_timeout_secs = spec.idle_timeout_secs.value_or(config_.default_idle_timeout_secs);
          claimed.pause_on_idle = spec.pause_on_idle;
          claimed.hibernate_on_idle = spec.hibernate_on_idle;
          claimed.auto_resume = spec.auto_resume;
          claimed.created_unix_ms = NowUnixMillis();
          claimed.Touch();
        }));
    if (sb) {
      stats_.created++;
      NotifyCreated(sb->image, true, t0);
      return CreateResult{sb->id, sb->image, sb->isolation, sb->image_services};
    }
  }

  // Steps 6 and 7: image installed (or installed now), boot.
  BootParams bp{
      spec.image, isolation, cpus, memory_mb, spec.network, restore_dir, spec.sandbox_id.value_or("")};
  // A jail mounts the snapshot's files for its whole life (jail_snapshot.h):
  // it is in use from before the boot (then under a placeholder) to the end.
  auto use_by = [this](const std::string& sid, const std::string& user) {
    snapshots_.Use(sid, user);
    return std::shared_ptr<void>(nullptr, [this, sid, user](void*) { snapshots_.Unuse(sid, user); });
  };
  const bool uses_snapshot = from && isolation == "jail";
  std::shared_ptr<void> booting =
      uses_snapshot ? use_by(from->snapshot_id, "creating-" + NewUuid()) : nullptr;
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, Boot(bp));
  if (uses_snapshot) sb->snapshot_use = use_by(from->snapshot_id, sb->id);
  booting.reset();
  sb->name = spec.name;
  sb->tenant = spec.tenant;
  sb->idle_timeout_secs = spec.idle_timeout_secs.value_or(config_.default_idle_timeout_secs);
  sb->pause_on_idle = spec.pause_on_idle;
  sb->hibernate_on_idle = spec.hibernate_on_idle;
  sb->auto_resume = spec.auto_resume;
  sb->env = spec.env;
  // docs/security.md#networking-network-true loopback rewrite: create-time env only, listed ports only.
  if (spec.network && !config_.network.host_ports.empty() && host_.rewrite_loopback)
    for (auto& kv : sb->env) kv.second = host_.rewrite_loopback(kv.second, config_.network.host_ports);
  sb->created_unix_ms = NowUnixMillis();
  sb->Touch();

  SKIFF_RETURN_IF_ERROR(registry_.Register(sb));
  WatchAgent(sb);
  stats_.created++;
  NotifyCreated(sb->image, false, t0);
  return CreateResult{sb->id, sb->image, sb->isolation, sb->image_services};
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Boot(const BootParams& p) {
  auto iso_it = isolators_.find(p.isolation);
  if (iso_it == isolators_.end())
    return Platform("isolation", "isolation '" + p.isolation + "' is not available on this host");
  SKIFF_ASSIGN_OR_RETURN(ResolvedImage img, catalog_.Resolve(p.image, p.isolation == "microvm"));

  auto sb = std::make_shared<Sandbox>();
  sb->id = p.id.empty() ? NewUuid() : p.id;
  SandboxPolicy policy = PrepareBoot(*sb, p, img);
  auto deadline = Clock::now() + kBootTimeout;
  SKIFF_ASSIGN_OR_RETURN(sb->instance, iso_it->second->Start(policy));
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  auto client =
      proto::Client::Connect(sb->instance->TakeChannel(), std::max(left, std::chrono::milliseconds(1)));
  if (!client.ok()) {
    std::string report = sb->instance->ExitReport();
    sb->instance->Stop(kStopGrace);
    Error e = std::move(client).error();
    std::string msg = e.message();
    if (!report.empty()) msg += "; " + report;
    return Error(Code::kS300, msg);
  }
  sb->client = std::move(client).value();
  return sb;
}

SandboxPolicy SandboxManager::PrepareBoot(Sandbox& sb, const BootParams& p, const ResolvedImage& img) const {
  sb.image = p.image;
  sb.isolation = p.isolation;
  sb.cpus = p.cpus;
  sb.memory_mb = p.memory_mb;
  sb.network = p.network;
  sb.image_env = img.env;
  sb.image_workdir = img.workdir;
  sb.image_user = img.user;
  sb.image_services = img.services;
  sb.image_lease = img.lease;

  SandboxPolicy policy;
  policy.id = sb.id;
  policy.hostname = "skiff-" + sb.id.substr(0, 8);
  policy.rootfs = img.rootfs;
  policy.cpus = p.cpus;
  policy.memory_mb = p.memory_mb;
  policy.network = p.network;
  if (p.network) {
    policy.net_host_ports = config_.network.host_ports;
    policy.net_allow = config_.network.allow;
  }
  policy.state_dir = paths::RuntimeDir() + "/sandboxes/" + sb.id;
  policy.restore_dir = p.restore_dir;
  return policy;
}

void SandboxManager::WatchAgent(const std::shared_ptr<Sandbox>& sb) {
  // A sandbox whose agent dies unexpectedly is removed (docs/api.md#differences-from-the-agreed-contract q).
  std::weak_ptr<Sandbox> weak = sb;
  sb->client->SetOnDeath([this, weak](const std::string& why) {
    if (auto s = weak.lock()) OnAgentDeath(s, why);
  });
  if (!sb->client->alive()) OnAgentDeath(sb, sb->client->failure());
}

void SandboxManager::OnAgentDeath(const std::shared_ptr<Sandbox>& s, const std::string& why) {
  auto removed = registry_.RemoveDead(s);
  if (removed == SandboxRegistry::Removed::kNone) return;
  SKIFF_LOG(Warn) << (removed == SandboxRegistry::Removed::kPooled ? "pooled sandbox " : "sandbox ") << s->id
                  << " died: " << why;
  TeardownInBackground(s);
}

void SandboxManager::NotifyCreated(const std::string& image, bool pooled, Clock::time_point t0) {
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(observer_mu_);
  if (observer_) observer_(image, pooled, secs);
}

void SandboxManager::SetCreateObserver(CreateObserver observer) {
  std::lock_guard<std::mutex> lk(observer_mu_);
  observer_ = std::move(observer);
}

void SandboxManager::TeardownInBackground(std::shared_ptr<Sandbox> sb) {
  registry_.BackgroundTeardownStarted();
  const std::string id = sb->id;
  // The sandbox travels in a shared slot: the body moves it out, so its
  // last reference ends inside BackgroundTeardownFinished whichever copy of
  // the body runs (the thread's, or this one when no thread can be had).
  auto slot = std::make_shared<std::shared_ptr<Sandbox>>(std::move(sb));
  auto body = [this, slot] {
    std::shared_ptr<Sandbox> s = std::move(*slot);
    if (!s) return;
    s->Teardown();
    registry_.BackgroundTeardownFinished(std::move(s));
  };
  auto t = StartThread("teardown " + id, body);
  if (t.ok()) {
    t->detach();
    return;
  }
  // No thread to spare: tear down here. Slower for the caller (which may be
  // an agent's reader thread), but nothing is left behind.
  SKIFF_LOG(Error) << "sandbox " << id << ": " << t.error().message() << "; tearing down inline";
  RunGuarded("teardown " + id, body);
}

std::chrono::milliseconds SandboxManager::FsTimeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(config_.fs_timeout_ms));
}

Status SandboxManager::Stop(const std::string& sandbox_id, bool wait) {
  SKIFF_ASSIGN_OR_RETURN(SandboxRegistry::StopTicket t, registry_.BeginStop(sandbox_id));
  if (wait) {
    t.sandbox->Teardown();
    registry_.FinishTeardown(t.sandbox);
  } else if (t.first) {
    TeardownInBackground(t.sandbox);
  }
  return OkStatus();
}

std::vector<ListEntry> SandboxManager::List() { return registry_.List(); }

Result<nlohmann::json> SandboxManager::Fs(const std::string& sandbox_id, const proto::FsCall& call) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return FsClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Call(call);
}

Result<nlohmann::json> SandboxManager::FsWrite(const std::string& sandbox_id, const std::string& path,
                                               uint32_t mode, bool parents, const ByteSource& source,
                                               const proto::FileMetadata& metadata) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return FsClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Write(path, mode, parents, source, metadata);
}

Status SandboxManager::FsRead(const std::string& sandbox_id, const std::string& path,
                              const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return FsClient(
             *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout())
      .Read(path, on_meta, sink);
}

Status SandboxManager::FsWatch(const std::string& sandbox_id, const proto::FsWatchRequest& req,
                               FsWatchSink& sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(sandbox_id));
  return WatchDirectory(
      *sb, [this, &sb] { return registry_.Stopping(*sb); }, FsTimeout(), req, sink);
}

void SandboxManager::Shutdown() {
  // Hibernated sandboxes outlive the daemon: their saved state stays for
  // the next one (AdoptHibernated).
  snapshots_.Close();
  {
    std::lock_guard<std::mutex> lk(state_ops_mu_);
    state_ops_closed_ = true;  // no new snapshot, fork or hibernation
  }
  std::vector<std::shared_ptr<Sandbox>> all = registry_.BeginShutdown();
  reaper_.Stop();
  for (auto& sb : all) {
    sb->Teardown();
    registry_.MarkStopped(*sb);
  }
  // Creates still booting end in Register, which tears them down now.
  registry_.WaitCreates();
  pool_.Join();
  registry_.WaitTeardowns();
  // Those in progress end once their sandboxes are gone (their saves fail
  // or commit, a fork's creates are refused) and leave no files behind.
  std::unique_lock<std::mutex> lk(state_ops_mu_);
  state_ops_cv_.wait(lk, [this] { return state_ops_ == 0; });
}

}  // namespace skiff
