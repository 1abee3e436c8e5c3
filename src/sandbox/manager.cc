#include "sandbox/manager.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/json_limits.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/text.h"
#include "isolation/jail/jail.h"
#include "isolation/microvm/microvm.h"
#include "isolation/net/sandbox_net.h"
#include "protocol/ops.h"
#include "sandbox/lifecycle.h"
#include "sandbox/run_step.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kOutputLimit = 1u << 20;
constexpr auto kBootTimeout = std::chrono::seconds(30);
constexpr auto kStopGrace = std::chrono::milliseconds(200);
constexpr uint64_t kDefaultExecTimeoutMs = 300000;

const char* kBasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Keeps the first kOutputLimit bytes of a stream.
struct Capture {
  std::string bytes;
  bool truncated = false;
  void Add(std::string_view b) {
    size_t room = kOutputLimit - std::min(kOutputLimit, bytes.size());
    if (b.size() > room) truncated = true;
    bytes.append(b.substr(0, std::min(room, b.size())));
  }
};

Error FromAgentError(const nlohmann::json& j) {
  auto code = CodeFromName(j.value("code", std::string("S300"))).value_or(Code::kS300);
  Error e(code, j.value("message", std::string("agent error")));
  if (j.contains("fix") && j["fix"].is_object()) e.set_fix(j["fix"]);
  return e;
}

bool KvmUsable() { return microvm::KvmUsable(); }

}  // namespace

// ------------------------------------------------------------------ Sandbox

class Sandbox {
 public:
  std::string id;
  std::string image;
  std::string isolation;
  std::optional<std::string> name;
  uint32_t cpus = 1;
  uint32_t memory_mb = 512;
  bool network = false;
  uint64_t idle_timeout_secs = 300;
  Env env;                             // create-time env (layer 3)
  std::vector<std::string> image_env;  // layer 2
  std::string image_workdir;
  std::string image_user;
  // Shared lease on the image's store entry, held until the sandbox is torn
  // down so no gc or `skiff image rm` (of any process) deletes its files.
  std::shared_ptr<const images::ImageLease> image_lease;
  int64_t created_unix_ms = 0;
  std::atomic<int64_t> last_activity_unix_ms{0};
  std::atomic<int64_t> last_activity_mono_ms{0};

  std::unique_ptr<Instance> instance;
  std::shared_ptr<proto::Client> client;

  // Guarded by SandboxManager::mu_.
  uint32_t exec_in_flight = 0;
  SandboxState state = SandboxState::kStarting;

  // Caller holds SandboxManager::mu_.
  bool stopping() const { return IsStopping(state); }
  void MoveTo(SandboxState next) {
    if (!CanTransition(state, next))
      SKIFF_LOG(Error) << "sandbox " << id << ": illegal state change " << SandboxStateName(state) << " -> "
                       << SandboxStateName(next);
    state = next;
  }

  // Teardown state.
  std::mutex td_mu;
  std::condition_variable td_cv;
  bool td_started = false;
  bool torn_down = false;

  void Touch() {
    last_activity_unix_ms = NowUnixMillis();
    last_activity_mono_ms = MonotonicMillis();
  }

  // Kills everything and releases host resources. Idempotent; concurrent
  // callers wait for the first one to finish.
  void Teardown() {
    std::unique_lock<std::mutex> lk(td_mu);
    if (td_started) {
      td_cv.wait(lk, [&] { return torn_down; });
      return;
    }
    td_started = true;
    lk.unlock();
    if (client) client->Close();
    if (instance) instance->Stop(kStopGrace);
    image_lease.reset();  // nothing runs from the image any more
    lk.lock();
    torn_down = true;
    td_cv.notify_all();
  }

  void WaitTornDown() {
    std::unique_lock<std::mutex> lk(td_mu);
    td_cv.wait(lk, [&] { return torn_down; });
  }
};

// ------------------------------------------------------------------ JSON

nlohmann::json ExecResult::ToJson() const {
  nlohmann::json j = {
      {"stdout", stdout_text},
      {"stderr", stderr_text},
      {"exit_code", exit_code},
      {"timed_out", false},
      {"duration_ms", duration_ms},
      {"success", exit_code == 0},
      {"stdout_truncated", stdout_truncated},
      {"stderr_truncated", stderr_truncated},
  };
  if (sandbox_id) j["sandbox_id"] = *sandbox_id;
  return j;
}

nlohmann::json ListEntry::ToJson() const {
  return {
      {"sandbox_id", sandbox_id},
      {"name", name ? nlohmann::json(*name) : nlohmann::json(nullptr)},
      {"image", image},
      {"age_secs", age_secs},
      {"exec_in_progress", exec_in_flight > 0},
      {"exec_in_flight", exec_in_flight},
      {"exec_slots_free", exec_slots_free},
      {"stopped", stopped},
      {"isolation", isolation},
      {"created_at", created_at},
      {"last_activity_at", last_activity_at},
      {"cpus", cpus},
      {"memory_mb", memory_mb},
      {"network", network},
  };
}

// ------------------------------------------------------------------ Manager

SandboxManager::SandboxManager(Config config, std::map<std::string, std::unique_ptr<Isolator>> isolators)
    : config_(std::move(config)), isolators_(std::move(isolators)), catalog_(ImagePolicyFor(config_)) {
  if (config_.isolation == "auto") {
    default_isolation_ = (isolators_.count("microvm") && KvmUsable()) ? "microvm" : "jail";
    if (!isolators_.count(default_isolation_) && !isolators_.empty())
      default_isolation_ = isolators_.begin()->first;
  } else {
    default_isolation_ = config_.isolation;
  }
  for (const auto& [image, n] : config_.pool) {
    if (n == 0) continue;
    // A pooled sandbox has the default shape; if the image's caps forbid
    // that shape, no create could ever claim one.
    if (auto c = config_.per_image_caps.find(image);
        c != config_.per_image_caps.end() &&
        ((c->second.max_cpus && config_.default_cpus > *c->second.max_cpus) ||
         (c->second.max_memory_mb && config_.default_memory_mb > *c->second.max_memory_mb))) {
      SKIFF_LOG(Warn) << "pool " << image << ": default_cpus/default_memory_mb exceed the image's "
                      << "per_image_caps; no sandbox of it is pooled";
      continue;
    }
    pools_[image].target = n;
  }
  reaper_ = std::thread([this] { ReaperLoop(); });
  if (!pools_.empty()) pool_filler_ = std::thread([this] { PoolLoop(); });
}

SandboxManager::~SandboxManager() {
  Shutdown();
  if (reaper_.joinable()) reaper_.join();
}

Result<std::unique_ptr<SandboxManager>> SandboxManager::FromConfig(Config config) {
  std::map<std::string, std::unique_ptr<Isolator>> isolators;
  std::vector<std::string> why;
  auto add = [&](std::unique_ptr<Isolator> iso) {
    std::string kind(iso->kind());
    auto st = iso->Available();
    if (st.ok()) {
      iso->CleanupOrphans();
      isolators.emplace(kind, std::move(iso));
    } else {
      why.push_back(kind + ": " + st.error().message());
      SKIFF_LOG(Info) << "isolation " << kind << " unavailable: " << st.error().message();
    }
  };
  if (config.isolation != "microvm") add(MakeJailIsolator());
  if (config.isolation != "jail") add(MakeMicrovmIsolator());
  if (config.isolation != "auto" && !isolators.count(config.isolation)) {
    std::string detail = "configured isolation '" + config.isolation + "' is not available";
    for (auto& w : why) detail += "; " + w;
    return Platform("isolation", detail);
  }
  if (isolators.empty()) {
    std::string detail = "no isolation backend is available on this host";
    for (auto& w : why) detail += "; " + w;
    return Platform("isolation", detail);
  }
  auto m = std::make_unique<SandboxManager>(std::move(config), std::move(isolators));
  if (m->config_.isolation == "microvm" && !KvmUsable())
    SKIFF_LOG(Warn) << "isolation microvm without usable /dev/kvm: VMs run under TCG emulation";
  SKIFF_LOG(Info) << "default isolation: " << m->default_isolation_;
  return m;
}

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
  d["network"] = net::Doctor();
  nlohmann::json images = nlohmann::json::array();
  for (auto& e : catalog_.List())
    images.push_back({{"name", e.name}, {"installed", e.installed}, {"allowed", e.allowed}});
  d["images"] = images;
  return d;
}

std::vector<CatalogEntry> SandboxManager::CatalogList() { return catalog_.List(); }

Result<CreateResult> SandboxManager::Create(const CreateSpec& spec) {
  auto t0 = Clock::now();
  uint32_t cpus = spec.cpus.value_or(config_.default_cpus);
  uint32_t memory_mb = spec.memory_mb.value_or(config_.default_memory_mb);
  if (cpus < 1 || cpus > 255) return InvalidRequest("field 'cpus': must be between 1 and 255");
  if (memory_mb < 64) return InvalidRequest("field 'memory_mb': must be at least 64");
  if (spec.isolation && *spec.isolation != "microvm" && *spec.isolation != "jail")
    return InvalidRequest("field 'isolation': expected \"microvm\" or \"jail\", got \"" + *spec.isolation +
                          "\"");

  // Step 2: reserve a slot atomically (live sandboxes + creates in progress).
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) return Platform("sandbox", "the daemon is shutting down");
    if (sandboxes_.size() + reserved_ >= config_.max_concurrent_sandboxes)
      return Error(Code::kS400, "resource limit exceeded: max_concurrent_sandboxes (" +
                                    std::to_string(config_.max_concurrent_sandboxes) + ") reached");
    ++reserved_;
  }
  ScopedCleanup release([&] {
    std::lock_guard<std::mutex> lk(mu_);
    --reserved_;
  });

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
  // Warm pool (spec §7.3): a create matching the pooled shape claims a
  // booted sandbox. Claim and registration are one step under mu_, so an
  // agent death at any moment finds the sandbox in exactly one place. The
  // set of pools is fixed at construction; only their contents change.
  if (auto pit = pools_.find(spec.image); pit != pools_.end()) {
    bool matches = cpus == config_.default_cpus && memory_mb == config_.default_memory_mb && !spec.network &&
                   isolation == default_isolation_;
    std::shared_ptr<Sandbox> sb;
    {
      std::lock_guard<std::mutex> lk(mu_);
      Pool& pool = pit->second;
      if (shutting_down_) return Platform("sandbox", "the daemon is shutting down");
      while (matches && !pool.ready.empty() && !sb) {
        sb = std::move(pool.ready.front());
        pool.ready.pop_front();
        if (sb->stopping()) sb.reset();  // its agent died; the death handler tears it down
      }
      if (sb) {
        ++pool.hits;
        sb->name = spec.name;
        sb->env = spec.env;
        sb->idle_timeout_secs = spec.idle_timeout_secs.value_or(config_.default_idle_timeout_secs);
        sb->created_unix_ms = NowUnixMillis();
        sb->Touch();
        sandboxes_[sb->id] = sb;
      } else {
        ++pool.misses;
      }
    }
    pool_cv_.notify_all();
    if (sb) {
      stats_.created++;
      NotifyCreated(sb->image, true, t0);
      return CreateResult{sb->id, sb->image, sb->isolation};
    }
  }

  // Steps 6 and 7: image installed (or installed now), boot.
  BootParams bp{spec.image, isolation, cpus, memory_mb, spec.network};
  SKIFF_ASSIGN_OR_RETURN(std::shared_ptr<Sandbox> sb, Boot(bp));
  sb->name = spec.name;
  sb->idle_timeout_secs = spec.idle_timeout_secs.value_or(config_.default_idle_timeout_secs);
  sb->env = spec.env;
  // Spec §6.3 loopback rewrite: create-time env only, listed ports only.
  if (spec.network && !config_.network.host_ports.empty())
    for (auto& kv : sb->env) kv.second = net::RewriteLoopback(kv.second, config_.network.host_ports);
  sb->created_unix_ms = NowUnixMillis();
  sb->Touch();

  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) {
      sb->MoveTo(SandboxState::kStopping);
      sb->Teardown();
      sb->MoveTo(SandboxState::kStopped);
      return Platform("sandbox", "the daemon is shutting down");
    }
    sb->MoveTo(SandboxState::kReady);
    sandboxes_[sb->id] = sb;
  }
  WatchAgent(sb);
  stats_.created++;
  NotifyCreated(sb->image, false, t0);
  return CreateResult{sb->id, sb->image, sb->isolation};
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Boot(const BootParams& p) {
  auto iso_it = isolators_.find(p.isolation);
  if (iso_it == isolators_.end())
    return Platform("isolation", "isolation '" + p.isolation + "' is not available on this host");
  SKIFF_ASSIGN_OR_RETURN(ResolvedImage img, catalog_.Resolve(p.image, p.isolation == "microvm"));

  auto sb = std::make_shared<Sandbox>();
  sb->id = NewUuid();
  sb->image = p.image;
  sb->isolation = p.isolation;
  sb->cpus = p.cpus;
  sb->memory_mb = p.memory_mb;
  sb->network = p.network;
  sb->image_env = img.env;
  sb->image_workdir = img.workdir;
  sb->image_user = img.user;
  sb->image_lease = img.lease;

  SandboxPolicy policy;
  policy.id = sb->id;
  policy.hostname = "skiff-" + sb->id.substr(0, 8);
  policy.rootfs = img.rootfs;
  policy.cpus = p.cpus;
  policy.memory_mb = p.memory_mb;
  policy.network = p.network;
  if (p.network) {
    policy.net_host_ports = config_.network.host_ports;
    policy.net_allow = config_.network.allow;
  }
  policy.state_dir = paths::RuntimeDir() + "/sandboxes/" + sb->id;

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

void SandboxManager::WatchAgent(const std::shared_ptr<Sandbox>& sb) {
  // A sandbox whose agent dies unexpectedly is removed (spec §4 q).
  std::weak_ptr<Sandbox> weak = sb;
  sb->client->SetOnDeath([this, weak](const std::string& why) {
    if (auto s = weak.lock()) OnAgentDeath(s, why);
  });
  if (!sb->client->alive()) OnAgentDeath(sb, sb->client->failure());
}

void SandboxManager::OnAgentDeath(const std::shared_ptr<Sandbox>& s, const std::string& why) {
  bool remove = false, pooled = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (s->stopping()) return;
    s->MoveTo(SandboxState::kStopping);
    if (auto it = sandboxes_.find(s->id); it != sandboxes_.end() && it->second == s) {
      sandboxes_.erase(it);
      remove = true;
    } else if (auto p = pools_.find(s->image); p != pools_.end()) {
      auto& ready = p->second.ready;
      if (auto r = std::find(ready.begin(), ready.end(), s); r != ready.end()) {
        ready.erase(r);
        remove = pooled = true;
      }
    }
  }
  if (!remove) return;
  SKIFF_LOG(Warn) << (pooled ? "pooled sandbox " : "sandbox ") << s->id << " died: " << why;
  TeardownInBackground(s);
  if (pooled) pool_cv_.notify_all();
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

std::vector<SandboxManager::PoolStatus> SandboxManager::PoolStats() {
  std::vector<PoolStatus> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [image, p] : pools_) {
    PoolStatus st;
    st.image = image;
    st.target = p.target;
    st.ready = static_cast<uint32_t>(p.ready.size());
    st.hits = p.hits;
    st.misses = p.misses;
    st.fill_failures = p.fill_failures;
    out.push_back(std::move(st));
  }
  return out;
}

bool SandboxManager::Stopping(const Sandbox& sb) {
  std::lock_guard<std::mutex> lk(mu_);
  return sb.stopping();
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Lookup(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return Error(Code::kS002, "sandbox not found: " + id);
  if (it->second->stopping()) return Error(Code::kS004, "sandbox already stopped: " + id);
  return it->second;
}

Result<ExecResult> SandboxManager::Exec(const ExecSpec& spec, OutputSink* sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Lookup(spec.sandbox_id));
  // Admission: take an exec slot atomically.
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (sb->stopping()) return Error(Code::kS004, "sandbox already stopped: " + sb->id);
    if (sb->exec_in_flight >= config_.exec_cap())
      return Error(Code::kS003, "sandbox " + sb->id +
                                    " is at its exec concurrency cap (max_concurrent_exec_per_sandbox=" +
                                    std::to_string(config_.exec_cap()) + ")");
    ++sb->exec_in_flight;
  }
  stats_.execs++;
  sb->Touch();
  auto start = Clock::now();
  ScopedCleanup release([&] {
    std::lock_guard<std::mutex> lk(mu_);
    --sb->exec_in_flight;
    sb->Touch();
  });

  uint64_t effective = std::min(spec.timeout_ms.value_or(kDefaultExecTimeoutMs), config_.exec_timeout_cap());
  if (effective == 0) return Error(Code::kS200, "exec timed out after 0 ms");

  // Environment layers (spec §2.2.3): base, image, sandbox, exec; later wins.
  std::vector<std::pair<std::string, std::string>> layered = {{"PATH", kBasePath}, {"HOME", "/root"}};
  for (const auto& kv : sb->image_env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) layered.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& kv : sb->env) layered.push_back(kv);
  for (const auto& kv : spec.env) layered.push_back(kv);
  std::vector<std::string> env;
  std::set<std::string> seen;
  for (auto it = layered.rbegin(); it != layered.rend(); ++it)
    if (seen.insert(it->first).second) env.push_back(it->first + "=" + it->second);
  std::reverse(env.begin(), env.end());

  std::string cwd = spec.workdir.value_or(sb->image_workdir.empty() ? "/" : sb->image_workdir);
  nlohmann::json req = {{"op", proto::op::kExec},
                        {"argv", spec.argv},
                        {"env", env},
                        {"cwd", cwd},
                        {"timeout_ms", effective},
                        {"stdin", !spec.stdin_bytes.empty()},
                        {"output_limit", kOutputLimit}};
  // The image's User (OCI config), resolved by the agent inside the sandbox;
  // root needs no switch.
  if (!sb->image_user.empty() && sb->image_user != "root" && sb->image_user != "0" && sb->image_user != "0:0")
    req["user"] = sb->image_user;
  auto stream_or = sb->client->Open(req);
  if (!stream_or.ok()) {
    if (Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sb->id);
    return Platform("exec", stream_or.error().message());
  }
  std::shared_ptr<proto::Stream> stream = std::move(stream_or).value();

  // Feed stdin from a separate thread: the agent can only accept it as fast
  // as the process reads, and we must keep draining its output meanwhile.
  std::thread feeder;
  if (!spec.stdin_bytes.empty()) {
    feeder = std::thread([stream, &spec] {
      if (stream->Send(proto::kStdin, spec.stdin_bytes).ok()) (void)stream->End(proto::kStdin);
    });
  } else {
    (void)stream->End(proto::kStdin);
  }
  ScopedCleanup join([&] {
    if (feeder.joinable()) {
      stream->Cancel();
      feeder.join();
    }
  });

  Capture out, err;
  auto details = [&](uint64_t ms) {
    return nlohmann::json{{"stdout", SanitizeUtf8(out.bytes)},
                          {"stderr", SanitizeUtf8(err.bytes)},
                          {"duration_ms", ms},
                          {"stdout_truncated", out.truncated},
                          {"stderr_truncated", err.truncated}};
  };
  auto elapsed = [&] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  };
  // The agent enforces the deadline; this host-side one is a safety net.
  auto host_deadline = start + std::chrono::milliseconds(effective) + std::chrono::seconds(10);
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto ev = stream->Next(host_deadline);
    if (!ev) {
      stream->Cancel();
      return Error(Code::kS200, "exec timed out after " + std::to_string(effective) + " ms")
          .set_details(details(elapsed()));
    }
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel == proto::kStdout) {
          out.Add(ev->data);
          if (sink) sink->OnStdout(ev->data);
        } else if (ev->channel == proto::kStderr) {
          err.Add(ev->data);
          if (sink) sink->OnStderr(ev->data);
        }
        if (MonotonicMillis() - last_touch > 1000) {
          sb->Touch();
          last_touch = MonotonicMillis();
        }
        break;
      case proto::Event::Kind::kMeta:
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult: {
        const auto& r = ev->json;
        uint64_t ms = elapsed();
        out.truncated = out.truncated || r.value("stdout_truncated", false);
        err.truncated = err.truncated || r.value("stderr_truncated", false);
        if (r.value("timed_out", false))
          return Error(Code::kS200, "exec timed out after " + std::to_string(effective) + " ms")
              .set_details(details(ms));
        if (r.value("cancelled", false) || Stopping(*sb))
          return Error(Code::kS004, "sandbox already stopped: " + sb->id).set_details(details(ms));
        ExecResult res;
        res.exit_code = r.value("exit_code", 0);
        res.stdout_text = SanitizeUtf8(out.bytes);
        res.stderr_text = SanitizeUtf8(err.bytes);
        res.stdout_truncated = out.truncated;
        res.stderr_truncated = err.truncated;
        res.duration_ms = ms;
        return res;
      }
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed: {
        uint64_t ms = elapsed();
        // Closed by us = a stop or reap cut the exec short (S004); anything
        // else means the agent (and with it the sandbox) died (S300).
        if (sb->client->failure() == "closed by host")
          return Error(Code::kS004, "sandbox already stopped: " + sb->id).set_details(details(ms));
        std::string report = sb->instance ? sb->instance->ExitReport() : "";
        return Platform("sandbox", "the sandbox's agent died (" + sb->client->failure() + ")" +
                                       (report.empty() ? std::string() : ": " + report))
            .set_details(details(ms));
      }
    }
  }
}

void SandboxManager::TeardownInBackground(std::shared_ptr<Sandbox> sb) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++pending_teardowns_;
  }
  std::thread([this, sb = std::move(sb)] {
    sb->Teardown();
    std::lock_guard<std::mutex> lk(mu_);
    // A stop that joined this teardown may have recorded the end already.
    if (sb->state == SandboxState::kStopping) sb->MoveTo(SandboxState::kStopped);
    tearing_down_.erase(sb->id);
    --pending_teardowns_;
    teardown_cv_.notify_all();
  }).detach();
}

Status SandboxManager::Stop(const std::string& sandbox_id, bool wait) {
  std::shared_ptr<Sandbox> sb;
  bool first = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = sandboxes_.find(sandbox_id);
    if (it != sandboxes_.end()) {
      sb = it->second;
      // Removed from the registry before stop returns, in both modes.
      sandboxes_.erase(it);
      sb->MoveTo(SandboxState::kStopping);
      tearing_down_[sandbox_id] = sb;
      first = true;
    } else if (auto t = tearing_down_.find(sandbox_id); t != tearing_down_.end()) {
      sb = t->second;  // a stop or reap is in progress: join it
    } else {
      return Error(Code::kS002, "sandbox not found: " + sandbox_id);
    }
  }
  if (wait) {
    sb->Teardown();
    std::lock_guard<std::mutex> lk(mu_);
    // A joined stop or reap may have recorded the end already.
    if (sb->state == SandboxState::kStopping) sb->MoveTo(SandboxState::kStopped);
    tearing_down_.erase(sandbox_id);
  } else if (first) {
    TeardownInBackground(sb);
  }
  return OkStatus();
}

std::vector<ListEntry> SandboxManager::List() {
  std::vector<ListEntry> out;
  int64_t now = NowUnixMillis();
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, sb] : sandboxes_) {
    ListEntry e;
    e.sandbox_id = sb->id;
    e.name = sb->name;
    e.image = sb->image;
    e.age_secs = (now - sb->created_unix_ms) / 1000;
    e.exec_in_flight = sb->exec_in_flight;
    uint32_t cap = std::max<uint32_t>(config_.max_concurrent_exec_per_sandbox, 1);
    e.exec_slots_free = cap > sb->exec_in_flight ? cap - sb->exec_in_flight : 0;
    e.stopped = sb->stopping();
    e.isolation = sb->isolation;
    e.created_at = Rfc3339Millis(sb->created_unix_ms);
    e.last_activity_at = Rfc3339Millis(sb->last_activity_unix_ms);
    e.cpus = sb->cpus;
    e.memory_mb = sb->memory_mb;
    e.network = sb->network;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const ListEntry& a, const ListEntry& b) {
    return std::tie(a.created_at, a.sandbox_id) < std::tie(b.created_at, b.sandbox_id);
  });
  return out;
}

// ------------------------------------------------------------------ fs

namespace {

// Reads a stream to its final event, for fs calls.
Result<nlohmann::json> FinishFs(proto::Stream& s, bool stopping_hint) {
  // A result too large for one frame arrives as DATA on kStdout first.
  std::string spill;
  constexpr size_t kMaxSpill = 80u << 20;
  for (;;) {
    auto ev = s.Next();
    if (!ev) continue;
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel == proto::kStdout && spill.size() + ev->data.size() <= kMaxSpill)
          spill.append(ev->data);
        break;
      case proto::Event::Kind::kResult: {
        if (!ev->json.value("result_in_data", false)) return std::move(ev->json);
        auto j = ParseJsonBounded(spill);
        if (j.is_discarded()) return Error(Code::kS216, "fs i/o error: sandbox transport: malformed result");
        return j;
      }
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed: {
        std::string why = ev->json.value("message", std::string());
        if (why == "closed by host" || stopping_hint) return Error(Code::kS004, "sandbox already stopped");
        return Error(Code::kS216, "fs i/o error: sandbox transport: " + why);
      }
      default:
        break;
    }
  }
}

}  // namespace

Result<nlohmann::json> SandboxManager::Fs(const std::string& sandbox_id, const nlohmann::json& op) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Lookup(sandbox_id));
  sb->Touch();
  ScopedCleanup touch([&] { sb->Touch(); });
  auto s = sb->client->Open(op);
  if (!s.ok()) return Error(Code::kS216, "fs i/o error: sandbox transport: " + s.error().message());
  (void)(*s)->End(proto::kStdin);
  auto r = FinishFs(**s, false);
  if (!r.ok() && r.error().code() == Code::kS004)
    return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
  return r;
}

Result<nlohmann::json> SandboxManager::FsWrite(const std::string& sandbox_id, const std::string& path,
                                               uint32_t mode, bool parents, const ByteSource& source) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Lookup(sandbox_id));
  sb->Touch();
  ScopedCleanup touch([&] { sb->Touch(); });
  nlohmann::json op = {{"op", proto::op::kFsWrite}, {"path", path}, {"mode", mode}, {"parents", parents}};
  auto so = sb->client->Open(op);
  if (!so.ok()) return Error(Code::kS216, "fs i/o error: sandbox transport: " + so.error().message());
  auto s = std::move(so).value();
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto chunk = source();
    if (!chunk.ok()) {
      s->Cancel();  // the agent removes its temp file; the target is untouched
      (void)FinishFs(*s, false);
      // A stop while the body stalled: the call ends as stopped (§2.3), not
      // as a stalled upload.
      if (Stopping(*sb)) return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
      return std::move(chunk).error();
    }
    if (chunk->empty()) {
      (void)s->End(proto::kStdin);
      break;
    }
    if (!s->Send(proto::kStdin, *chunk).ok()) break;  // the agent answered early (an error)
    if (MonotonicMillis() - last_touch > 1000) {
      sb->Touch();
      last_touch = MonotonicMillis();
    }
  }
  auto r = FinishFs(*s, false);
  if (!r.ok() && r.error().code() == Code::kS004)
    return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
  if (r.ok()) (*r)["path"] = path;
  return r;
}

Status SandboxManager::FsRead(const std::string& sandbox_id, const std::string& path,
                              const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Lookup(sandbox_id));
  sb->Touch();
  ScopedCleanup touch([&] { sb->Touch(); });
  auto so = sb->client->Open({{"op", proto::op::kFsRead}, {"path", path}});
  if (!so.ok()) return Error(Code::kS216, "fs i/o error: sandbox transport: " + so.error().message());
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto ev = s->Next();
    if (!ev) continue;
    switch (ev->kind) {
      case proto::Event::Kind::kMeta: {
        FsReadMeta m;
        m.size = ev->json.value("size", uint64_t{0});
        m.mode = ev->json.value("mode", std::string("0000"));
        m.mtime = ev->json.value("mtime", int64_t{0});
        if (on_meta) on_meta(m);
        break;
      }
      case proto::Event::Kind::kData:
        if (!sink(ev->data)) {
          s->Cancel();
          return Error(Code::kS216, "fs i/o error: download aborted by the reader");
        }
        if (MonotonicMillis() - last_touch > 1000) {
          sb->Touch();
          last_touch = MonotonicMillis();
        }
        break;
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult:
        return OkStatus();
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed: {
        std::string why = ev->json.value("message", std::string());
        if (why == "closed by host") return Error(Code::kS004, "sandbox already stopped: " + sandbox_id);
        return Error(Code::kS216, "fs i/o error: sandbox transport: " + why);
      }
    }
  }
}

// ------------------------------------------------------------------ run

Result<ExecResult> SandboxManager::Run(const RunSpec& spec, OutputSink* sink) {
  struct Lang {
    std::string program, ext;
  };
  Lang lang;
  const std::string& l = spec.lang;
  if (l == "node" || l == "js" || l == "javascript")
    lang = {"node", "js"};
  else if (l == "python" || l == "py")
    lang = {"python3", "py"};
  else if (l == "shell" || l == "sh")
    lang = {"/bin/sh", "sh"};
  else if (l == "bash")
    lang = {"/bin/bash", "sh"};
  else
    lang = {l, "txt"};

  CreateSpec cs = spec.create;
  auto created = Create(cs);
  if (!created.ok()) return WrapRunStep(created.error(), "create", "");
  std::string id = created->sandbox_id;
  auto finish = [&](Result<ExecResult> r) -> Result<ExecResult> {
    if (!spec.keep_sandbox) (void)Stop(id, /*wait=*/false);
    return r;
  };
  auto once = [](const std::string& body) {
    auto done = std::make_shared<bool>(false);
    return ByteSource([done, &body]() -> Result<std::string> {
      if (*done) return std::string();
      *done = true;
      return body;
    });
  };
  for (const auto& f : spec.files) {
    auto w = FsWrite(id, f.path, 0644, /*parents=*/true, once(f.content));
    if (!w.ok()) return finish(WrapRunStep(w.error(), "fs::write (sibling file)", id));
  }
  std::string file = "/tmp/run." + lang.ext;
  auto w = FsWrite(id, file, 0644, /*parents=*/true, once(spec.code));
  if (!w.ok()) return finish(WrapRunStep(w.error(), "fs::write (code)", id));
  if (l == "bash") {
    auto st = Fs(id, {{"op", proto::op::kFsStat}, {"path", "/bin/bash"}});
    if (!st.ok()) lang.program = "/bin/sh";
  }
  ExecSpec es;
  es.sandbox_id = id;
  es.argv = {lang.program, file};
  es.env = spec.create.env;
  es.stdin_bytes = spec.stdin_bytes;
  es.timeout_ms = spec.timeout_ms;
  es.workdir = spec.workdir;
  auto r = Exec(es, sink);
  if (!r.ok()) return finish(WrapRunStep(r.error(), "exec", id));
  if (spec.keep_sandbox) r->sandbox_id = id;
  return finish(std::move(r));
}

// ------------------------------------------------------------------ reaper

void SandboxManager::ReapOnce() {
  std::vector<std::shared_ptr<Sandbox>> victims;
  int64_t now = MonotonicMillis();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
      auto& sb = it->second;
      int64_t idle = now - sb->last_activity_mono_ms;
      int64_t limit = static_cast<int64_t>(sb->idle_timeout_secs) * 1000;
      if (sb->exec_in_flight > 0) limit += static_cast<int64_t>(config_.exec_timeout_cap()) + 60000;
      if (!sb->stopping() && idle > limit) {
        sb->MoveTo(SandboxState::kStopping);
        victims.push_back(sb);
        tearing_down_[sb->id] = sb;
        it = sandboxes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& sb : victims) {
    SKIFF_LOG(Info) << "reaping idle sandbox " << sb->id;
    stats_.reaped++;
    TeardownInBackground(sb);
  }
}

void SandboxManager::ReaperLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!shutting_down_) {
    reaper_cv_.wait_for(lk, std::chrono::seconds(10));
    if (shutting_down_) break;
    lk.unlock();
    ReapOnce();
    lk.lock();
  }
}

// Keeps every pool at its target: one boot at a time, oldest need first.
// A failed boot is logged and retried after 1 s, doubling up to 60 s.
void SandboxManager::PoolLoop() {
  constexpr auto kBackoffMin = std::chrono::seconds(1);
  constexpr auto kBackoffMax = std::chrono::seconds(60);
  std::unique_lock<std::mutex> lk(mu_);
  while (!shutting_down_) {
    auto now = Clock::now();
    auto wake = Clock::time_point::max();
    std::string image;
    for (auto& [name, p] : pools_) {
      if (p.ready.size() >= p.target) continue;
      if (p.retry_at <= now) {
        image = name;
        break;
      }
      wake = std::min(wake, p.retry_at);
    }
    if (image.empty()) {
      if (wake == Clock::time_point::max())
        pool_cv_.wait(lk);
      else
        pool_cv_.wait_until(lk, wake);
      continue;
    }
    lk.unlock();
    BootParams bp{image, default_isolation_, config_.default_cpus, config_.default_memory_mb, false};
    auto booted = Boot(bp);
    lk.lock();
    Pool& p = pools_[image];
    if (!booted.ok()) {
      ++p.fill_failures;
      uint32_t shift = std::min<uint32_t>(p.consecutive_failures++, 6);
      auto backoff = std::min<Clock::duration>(kBackoffMin * (1u << shift), kBackoffMax);
      p.retry_at = Clock::now() + backoff;
      SKIFF_LOG(Warn) << "pool " << image << ": boot failed (" << p.consecutive_failures
                      << " in a row), retrying in "
                      << std::chrono::duration_cast<std::chrono::seconds>(backoff).count()
                      << " s: " << booted.error().message();
      continue;
    }
    std::shared_ptr<Sandbox> sb = std::move(booted).value();
    if (shutting_down_) {
      sb->MoveTo(SandboxState::kStopping);
      lk.unlock();
      sb->Teardown();
      lk.lock();
      sb->MoveTo(SandboxState::kStopped);
      break;
    }
    p.consecutive_failures = 0;
    sb->MoveTo(SandboxState::kReady);
    p.ready.push_back(sb);
    lk.unlock();
    WatchAgent(sb);
    lk.lock();
  }
}

void SandboxManager::Shutdown() {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutting_down_ = true;
    for (auto& [id, sb] : sandboxes_) {
      sb->MoveTo(SandboxState::kStopping);
      all.push_back(sb);
    }
    sandboxes_.clear();
    for (auto& [image, p] : pools_) {
      for (auto& sb : p.ready) {
        sb->MoveTo(SandboxState::kStopping);
        all.push_back(sb);
      }
      p.ready.clear();
    }
  }
  reaper_cv_.notify_all();
  pool_cv_.notify_all();
  for (auto& sb : all) {
    sb->Teardown();
    std::lock_guard<std::mutex> lk(mu_);
    sb->MoveTo(SandboxState::kStopped);
  }
  {
    // A boot in progress finishes, sees shutting_down_ and tears down.
    std::lock_guard<std::mutex> lk(pool_join_mu_);
    if (pool_filler_.joinable() && pool_filler_.get_id() != std::this_thread::get_id()) pool_filler_.join();
  }
  std::unique_lock<std::mutex> lk(mu_);
  teardown_cv_.wait(lk, [&] { return pending_teardowns_ == 0; });
}

}  // namespace skiff
