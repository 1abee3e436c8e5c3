#include "isolation/jail/jail.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "base/child_report.h"
#include "base/fd_pair.h"
#include "base/fd_passing.h"
#include "base/file_io.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/pidfd.h"
#include "base/thread.h"
#include "confine/confine.h"
#include "isolation/jail/cgroup_warmup.h"
#include "isolation/jail/child.h"
#include "isolation/jail/fs_paths.h"
#include "isolation/jail/jail_snapshot.h"
#include "isolation/jail/launcher_tie.h"
#include "isolation/jail/orphans.h"
#include "isolation/jail/rootfs_plan.h"
#include "isolation/jail/uid_slots.h"
#include "isolation/jail/user_namespace.h"
#include "isolation/net/sandbox_net.h"

namespace skiff {
namespace {

// Why a jail cannot hibernate (docs/snapshots.md, "The jail's processes").
constexpr std::string_view kJailHibernateNote =
    "jail: hibernation needs the sandbox's processes checkpointed with CRIU, and this host's criu cannot "
    "(Debian 12's criu 3.17 fails on kernels that map a vvar_vclock area, 6.13 and later; with criu 4.1 or "
    "later the jail's host-owned namespaces and host-side agent channel are still in the way); pause it in "
    "memory, or snapshot its files, instead";

std::string StatusText(int st) {
  if (WIFEXITED(st)) return "agent exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    const char* name = sigabbrev_np(sig);
    return "agent killed by signal " + std::to_string(sig) + " (SIG" + (name ? name : "?") + ")";
  }
  return "agent ended (wait status " + std::to_string(st) + ")";
}

}  // namespace

// ---------------------------------------------------------------------------
// Shared state: uid slots, cgroup hierarchy, confinement policy.

struct JailIsolator::Shared {
  JailOptions options;
  jail::Cgroups cgroups;
  std::optional<confine::ChildPolicy> confine;
  std::string confine_error;
  std::string subid_error;  // /etc/subuid|subgid unreadable or malformed: no start
  std::string lock_dir;     // <host runtime>/jail: seen by every skiff on the host
  std::unique_ptr<jail::UidSlots> slots;

  jail::CgroupWarmup warm;  // until the first sandbox init is in its cgroups

  std::string LiveLockPath(const std::string& id) const { return jail::LiveLockPath(lock_dir, id); }
};

namespace {

// ---------------------------------------------------------------------------
// One sandbox.

class JailInstance : public Instance {
 public:
  JailInstance(std::shared_ptr<JailIsolator::Shared> shared, std::string id)
      : shared_(std::move(shared)), id_(std::move(id)) {}
  ~JailInstance() override { Stop(std::chrono::milliseconds(0)); }

  UniqueFd TakeChannel() override {
    std::lock_guard<std::mutex> g(mu_);
    return std::move(channel_);
  }

  void Stop(std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> g(mu_);
    if (released_) return;
    if (proc_.valid() && !proc_.exited()) {
      // Killing PID 1 of the pid namespace kills every process in it; the
      // kernel reaps them all before init's exit is reported.
      bool gone = false;
      if (paused_) {
        // Frozen: the kill is queued, then delivered by the thaw; a frozen
        // init given SIGTERM would get no chance to act on it anyway.
        (void)proc_.Signal(SIGKILL);
        (void)cgroup_.Thaw();
        paused_ = false;
      } else if (grace.count() > 0) {
        (void)proc_.Signal(SIGTERM);
        auto r = proc_.Wait(grace);
        gone = r.ok() && r->has_value();
      }
      if (!gone) {
        (void)proc_.Signal(SIGKILL);
        (void)proc_.Wait(std::nullopt);
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    ReleaseLocked();
    SKIFF_LOG(Debug) << "jail: released " << id_ << " in "
                     << std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count()
                     << "us";
  }

  bool Running() override {
    std::lock_guard<std::mutex> g(mu_);
    if (!proc_.valid() || proc_.exited()) return false;
    auto r = proc_.Wait(std::chrono::milliseconds(0));
    return r.ok() && !r->has_value();
  }

  std::string ExitReport() override {
    std::lock_guard<std::mutex> g(mu_);
    if (proc_.valid() && !proc_.exited()) (void)proc_.Wait(std::chrono::milliseconds(0));
    if (!proc_.exited()) return "running";
    return StatusText(*proc_.status());
  }

  nlohmann::json Describe() override {
    std::lock_guard<std::mutex> g(mu_);
    return describe_;
  }

  Status Pause() override {
    std::lock_guard<std::mutex> g(mu_);
    if (released_) return Platform("isolation", "jail: the sandbox has stopped");
    // A process in an uninterruptible sleep (a read from a slow device)
    // can delay the freeze; beyond this the pause fails and it runs on.
    SKIFF_RETURN_IF_ERROR(cgroup_.Freeze(std::chrono::seconds(5)));
    paused_ = true;
    return OkStatus();
  }

  Status Resume() override {
    std::lock_guard<std::mutex> g(mu_);
    if (released_) return Platform("isolation", "jail: the sandbox has stopped");
    SKIFF_RETURN_IF_ERROR(cgroup_.Thaw());
    paused_ = false;
    return OkStatus();
  }

  bool SnapshotNeedsQuiesce() const override { return false; }
  bool ClockStopsWhilePaused() const override { return false; }

  // Hibernation needs the processes checkpointed (CRIU), not only the files
  // (docs/snapshots.md, "The jail's processes").
  Result<SnapshotContents> Hibernate(const std::string&, uint64_t) override {
    return Platform("snapshot", std::string(kJailHibernateNote));
  }
  Result<UniqueFd> Wake(const std::string&) override {
    return Platform("snapshot", std::string(kJailHibernateNote));
  }
  Status CanHibernate() override { return Platform("snapshot", std::string(kJailHibernateNote)); }

  // The files (uppers and /tmp), with every process frozen meanwhile so
  // that the copy is of one moment; processes are not saved.
  Result<SnapshotContents> Snapshot(const std::string& dir, uint64_t max_bytes) override {
    std::lock_guard<std::mutex> g(mu_);
    if (released_) return Platform("isolation", "jail: the sandbox has stopped");
    if (!state_root_ || !tmp_root_ || !shm_root_)
      return Platform("snapshot", "jail: this sandbox's files are out of reach");
    bool froze = false;
    if (!paused_) {
      if (Status st = cgroup_.Freeze(std::chrono::seconds(5)); !st.ok())
        return std::move(st).error().With("jail: freezing the sandbox for its snapshot");
      froze = true;
    }
    Result<SnapshotContents> r = jail::SaveJailSnapshot(state_root_.get(), tmp_root_.get(), shm_root_.get(),
                                                        slot_.base, targets_, restored_from_, dir, max_bytes);
    if (froze) {
      if (Status st = cgroup_.Thaw(); !st.ok())
        SKIFF_LOG(Warn) << "jail: thaw after a snapshot failed: " << st.error().message();
    }
    return r;
  }

  // Memory from the memory cgroup; CPU from cpuacct, since the previous
  // call or over a short first sample (0 without a cpuacct hierarchy);
  // disk from the writable layer's tmpfs (the uppers) and /tmp.
  Result<ResourceUsage> Usage(proto::Client& /*agent*/) override {
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> g(mu_);
    if (released_) return Platform("isolation", "jail: the sandbox has stopped");
    ResourceUsage u;
    u.cpu_count = cpus_;
    SKIFF_ASSIGN_OR_RETURN(auto mem, cgroup_.Memory());
    u.mem_used_bytes = mem.first;
    u.mem_total_bytes = std::min<uint64_t>(mem.second, memory_bytes_);
    for (int fd : {state_root_.get(), tmp_root_.get()}) {
      struct statfs sf {};
      if (fd < 0 || ::fstatfs(fd, &sf) != 0)
        return Platform("metrics", "jail: the sandbox's files are out of reach");
      u.disk_total_bytes += static_cast<uint64_t>(sf.f_blocks) * sf.f_frsize;
      u.disk_used_bytes += static_cast<uint64_t>(sf.f_blocks - sf.f_bfree) * sf.f_frsize;
    }
    Result<uint64_t> cpu = cgroup_.CpuNanos();
    if (!cpu.ok()) return u;
    Clock::time_point now = Clock::now();
    if (!cpu_sampled_) {
      // No earlier sample: take one over a short interval, unlocked.
      uint64_t first = *cpu;
      Clock::time_point t0 = now;
      g.unlock();
      std::this_thread::sleep_for(kCpuSample);
      g.lock();
      if (released_) return Platform("isolation", "jail: the sandbox has stopped");
      cpu = cgroup_.CpuNanos();
      if (!cpu.ok()) return u;
      now = Clock::now();
      if (!cpu_sampled_) {
        last_cpu_ns_ = first;
        last_cpu_at_ = t0;
      }
    }
    const double wall_ns = std::chrono::duration<double, std::nano>(now - last_cpu_at_).count();
    const double used_ns = *cpu >= last_cpu_ns_ ? static_cast<double>(*cpu - last_cpu_ns_) : 0.0;
    if (wall_ns > 0 && cpus_ > 0)
      u.cpu_used_pct = std::clamp(100.0 * used_ns / (wall_ns * cpus_), 0.0, 100.0);
    last_cpu_ns_ = *cpu;
    last_cpu_at_ = now;
    cpu_sampled_ = true;
    return u;
  }

  // Set up by Start().
  uint32_t cpus_ = 1;
  uint64_t memory_bytes_ = 0;
  Process proc_;
  UniqueFd channel_;
  jail::SandboxCgroup cgroup_;
  UniqueFd live_lock_;
  std::string live_lock_path_;
  std::string state_dir_;
  nlohmann::json describe_;
  jail::UidSlots::Slot slot_;
  std::unique_ptr<net::SandboxNet> net_;  // network: true
  bool paused_ = false;                   // frozen by Pause()
  // The init's state tmpfs (the overlays' uppers), /tmp and /dev/shm
  // (child.h).
  UniqueFd state_root_;
  UniqueFd tmp_root_;
  UniqueFd shm_root_;
  std::vector<std::string> targets_;  // the overlays' mount targets
  std::string restored_from_;         // the snapshot it started from

 private:
  void ReleaseLocked() {
    released_ = true;
    channel_.reset();
    state_root_.reset();
    tmp_root_.reset();
    shm_root_.reset();
    net_.reset();  // slirp4netns killed; the namespace goes with its last user
    cgroup_.Remove();
    if (!state_dir_.empty()) jail::RemoveTree(state_dir_);
    if (!live_lock_path_.empty()) ::unlink(live_lock_path_.c_str());
    live_lock_.reset();
    shared_->slots->Release(slot_);
  }

  static constexpr auto kCpuSample = std::chrono::milliseconds(100);
  std::shared_ptr<JailIsolator::Shared> shared_;
  std::string id_;
  // Usage(): the previous CPU sample. Guarded by mu_.
  bool cpu_sampled_ = false;
  uint64_t last_cpu_ns_ = 0;
  std::chrono::steady_clock::time_point last_cpu_at_;
  std::mutex mu_;
  bool released_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------

JailIsolator::JailIsolator(JailOptions options) : options_(options) {
  shared_ = std::make_shared<Shared>();
  shared_->options = options;
  shared_->cgroups = jail::Cgroups::Detect();
  // Uid ranges and cgroups are host-wide, so their locks are too: a skiff
  // with a runtime directory of its own must neither take another's range
  // nor take another's running sandboxes for orphans.
  shared_->lock_dir = paths::HostRuntimeDir() + "/jail";
  auto subids = jail::ReadSubidRanges();
  if (!subids.ok()) shared_->subid_error = subids.error().message();
  std::vector<jail::IdRange> reserved;
  if (subids.ok()) reserved = std::move(subids).value();
  shared_->slots = std::make_unique<jail::UidSlots>(options.uid_base, options.slots, std::move(reserved),
                                                    shared_->lock_dir);
  auto policy = confine::BuildChildPolicy();
  // Tests prove that a policy that cannot be built stops every start.
  if (std::getenv("SKIFF_TEST_JAIL_POLICY_FAIL") != nullptr)
    policy = Platform("isolation", "policy build failed (SKIFF_TEST_JAIL_POLICY_FAIL)");
  if (policy.ok())
    shared_->confine = std::move(policy).value();
  else
    shared_->confine_error = policy.error().message();
  if (shared_->cgroups.kind() == jail::Cgroups::Kind::kNone) {
    SKIFF_LOG(Warn) << "jail: " << shared_->cgroups.Describe()["note"].get<std::string>();
  } else if (::geteuid() == 0) {
    shared_->warm.Start(shared_->cgroups.bases().front() + "/cgroup.procs");
  }
}

JailIsolator::~JailIsolator() { shared_->warm.End(/*join=*/true); }

Status JailIsolator::Available() {
  if (::geteuid() != 0)
    return Platform("isolation", "jail: needs root (namespaces, idmapped mounts, cgroups)");
  std::string agent = paths::AgentBinary();
  if (::access(agent.c_str(), X_OK) < 0) return Error::Sys(Code::kS300, "access", agent, errno);
  SKIFF_ASSIGN_OR_RETURN(auto ns, jail::MakeUserNamespace(options_.uid_base));
  SKIFF_ASSIGN_OR_RETURN(UniqueFd tree, jail::IdmappedTree("/usr", ns->fd.get()));
  return OkStatus();
}

Result<std::unique_ptr<Instance>> JailIsolator::Start(const SandboxPolicy& policy) {
  // Validate what becomes paths, mount options and limits: decide nothing,
  // but trust nothing either.
  if (!jail::SafeName(policy.id, 128)) return InvalidRequest("jail: bad sandbox id");
  if (policy.hostname.empty() || policy.hostname.size() > 64 || !jail::SafeName(policy.hostname, 64))
    return InvalidRequest("jail: bad hostname");
  if (!jail::CleanAbsolute(policy.state_dir)) return InvalidRequest("jail: bad state_dir");
  if (policy.rootfs.layers.empty() || policy.rootfs.layers[0].target != "/")
    return InvalidRequest("jail: rootfs must start with a \"/\" layer");
  if (policy.memory_mb == 0 || policy.pids_max == 0)
    return InvalidRequest("jail: memory_mb and pids_max must be positive");
  for (const auto& l : policy.rootfs.layers) {
    if (!jail::CleanAbsolute(l.target) || l.lower.empty())
      return InvalidRequest("jail: bad rootfs layer " + l.target);
    for (const auto& d : l.lower)
      if (!jail::CleanAbsolute(d)) return InvalidRequest("jail: bad lower dir " + d);
  }
  if (!policy.restore_dir.empty()) {
    if (!jail::CleanAbsolute(policy.restore_dir)) return InvalidRequest("jail: bad restore_dir");
    SandboxPolicy restored = policy;
    SKIFF_RETURN_IF_ERROR(jail::AddSnapshotLayers(restored, policy.restore_dir));
    restored.restore_dir.clear();
    SKIFF_ASSIGN_OR_RETURN(std::unique_ptr<Instance> started, Start(restored));
    auto* ji = static_cast<JailInstance*>(started.get());
    ji->restored_from_ = policy.restore_dir;
    ji->targets_.clear();
    for (const auto& l : policy.rootfs.layers) ji->targets_.push_back(l.target);
    // Nobody has the instance yet; the tmpfs sizes bound the copy.
    if (Status st = jail::RestoreScratch(policy.restore_dir, ji->tmp_root_.get(), ji->shm_root_.get(),
                                         ji->slot_.base, UINT64_MAX);
        !st.ok())
      return Platform("boot",
                      std::move(st).error().With("restoring /tmp and /dev/shm from the snapshot").message());
    ji->describe_["from_snapshot"] = true;
    return started;
  }
  // Fail closed: no sandbox without its full confinement, or with uid
  // ranges that might overlap ones the host has handed out.
  if (!shared_->confine)
    return Platform("isolation",
                    "jail: cannot build the seccomp/capability policy: " + shared_->confine_error);
  if (!shared_->subid_error.empty()) return Platform("isolation", "jail: " + shared_->subid_error);
  // S300 "platform failure: boot: [<doing>: ]<e's message>".
  auto boot = [](Error e, std::string_view doing = {}) {
    if (!doing.empty()) e.With(doing);
    return Platform("boot", e.message());
  };
  // Phase timings for the debug log (Start is on the hot path of every run).
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<const char*, Clock::time_point>> marks{{"begin", Clock::now()}};
  auto mark = [&](const char* what) { marks.emplace_back(what, Clock::now()); };

  if (Status st = MakeDirs(shared_->lock_dir, 0700); !st.ok())
    return std::move(st).error().With("creating the jail's lock directory");
  // From here on, returning destroys `inst`, which releases whatever was
  // set up so far (the same code path as Stop).
  auto inst = std::make_unique<JailInstance>(shared_, policy.id);
  // Liveness lock: held while this sandbox is ours; CleanupOrphans only
  // touches sandboxes whose lock nobody holds.
  {
    std::string path = shared_->LiveLockPath(policy.id);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return boot(Error::Sys(Code::kS300, "open", path, errno));
    UniqueFd lock(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) < 0)
      return boot(Error::Sys(Code::kS300, "flock", path, errno));  // id in use: not ours to remove
    inst->live_lock_ = std::move(lock);
    inst->live_lock_path_ = path;
    if (Status st = jail::RecordStateDir(fd, policy.state_dir); !st.ok()) return boot(std::move(st).error());
  }
  {
    auto slot = shared_->slots->Acquire();
    if (!slot.ok()) return std::move(slot).error();
    inst->slot_ = std::move(slot).value();
  }
  const uint32_t base = inst->slot_.base;
  if (Status st = MakeDirs(policy.state_dir, 0700); !st.ok())
    return std::move(st).error().With("creating the sandbox's state directory");
  inst->state_dir_ = policy.state_dir;
  inst->cpus_ = policy.cpus;
  inst->memory_bytes_ = uint64_t{policy.memory_mb} << 20;
  mark("locks");

  // network: true: the host-owned namespace with slirp4netns and the egress
  // filter (docs/security.md#networking-network-true), joined by the child instead of a private empty one.
  if (policy.network) {
    auto sn = net::SandboxNet::Create({policy.net_host_ports, policy.net_allow}, net::Mode::kLocal);
    if (!sn.ok()) return std::move(sn).error();
    inst->net_ = std::move(sn).value();
    mark("network");
  }

  auto userns = jail::MakeUserNamespace(base);
  if (!userns.ok()) return boot(userns.error(), "creating the user namespace");
  mark("userns");

  // Root filesystem: the plan, and its lower trees as detached idmapped
  // mounts, attached by the child inside its own mount namespace.
  const jail::RootfsPlan rootfs = jail::PlanRootfs(policy, base, options_.upper_size_mb);
  const size_t nl = rootfs.overlays.size();
  std::vector<std::vector<UniqueFd>> lower_fds(nl);
  std::vector<std::vector<int>> lower_raw(nl);
  std::vector<std::vector<const char*>> lower_cstr(nl);
  std::vector<jail::ChildLayer> layers(nl);
  for (size_t i = 0; i < nl; ++i) {
    const jail::OverlayPlan& o = rootfs.overlays[i];
    for (const auto& dir : o.lower_hosts) {
      auto tree = jail::IdmappedTree(dir, (*userns)->fd.get());
      if (!tree.ok()) return boot(tree.error(), "idmapping " + dir);
      lower_raw[i].push_back(tree->get());
      lower_fds[i].push_back(std::move(tree).value());
    }
    for (const auto& n : o.lower_names) lower_cstr[i].push_back(n.c_str());
    layers[i].mountpoint = o.mountpoint.c_str();
    layers[i].options = o.options.c_str();
    layers[i].upper = o.upper.c_str();
    layers[i].work = o.work.c_str();
    layers[i].n_lower = static_cast<int>(lower_raw[i].size());
    layers[i].lower_fds = lower_raw[i].data();
    layers[i].lower_dirs = lower_cstr[i].data();
  }

  std::string agent_path = paths::AgentBinary();
  UniqueFd agent(::open(agent_path.c_str(), O_PATH | O_CLOEXEC));
  if (!agent) return boot(Error::Sys(Code::kS300, "open", agent_path, errno));

  Result<FdPair> channel = MakeSocketPair();
  if (!channel.ok()) return boot(std::move(channel).error().With("agent channel"));
  UniqueFd host_end = std::move(channel->first), child_end = std::move(channel->second);
  Result<FdPair> state_pair = MakeSocketPair(SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (!state_pair.ok()) return boot(std::move(state_pair).error().With("state channel"));
  UniqueFd state_host = std::move(state_pair->first), state_child = std::move(state_pair->second);
  mark("trees");

  // The sandbox's cgroups are created (limits first) by a helper thread
  // while the init sets up its mounts; the init waits for them (futex on
  // `cg_ready`) right before it leaves the host's privileges behind, and
  // moves itself in before anything of the sandbox runs. Creating a cgroup
  // can wait several ms for the kernel (cgroup_mutex, held by a concurrent
  // move waiting for an RCU grace period: see cgroup_warmup.h); this
  // way that wait overlaps the mounts instead of preceding them.
  std::vector<const char*> cg_bases;
  for (const auto& b : shared_->cgroups.bases()) cg_bases.push_back(b.c_str());
  const std::string cg_procs = policy.id + "/cgroup.procs";
  alignas(int) int cg_ready = cg_bases.empty() ? 1 : 0;  // futex word (CLONE_VM: shared)
  Result<jail::SandboxCgroup> cg = jail::SandboxCgroup();
  auto create_cgroups = [&] {
    // The init waits for `cg_ready` inside a vfork: it is set whatever
    // happens, an exception included (then `cg` stays this error).
    cg = Error(Code::kS300, "ended by an exception");
    RunGuarded("jail: cgroups of " + policy.id, [&] {
      // Tests widen the window in which the init waits for its cgroups.
      if (const char* d = std::getenv("SKIFF_TEST_CGROUP_DELAY_MS"))
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
      jail::CgroupLimits lim;
      lim.memory_bytes = uint64_t{policy.memory_mb} << 20;
      lim.pids_max = policy.pids_max;
      lim.cpus = policy.cpus;
      cg = shared_->cgroups.Create(policy.id, lim);
      if (cg.ok()) cg->CloseSetupFds();  // the init opens cgroup.procs itself
    });
    __atomic_store_n(&cg_ready, cg.ok() ? 1 : -1, __ATOMIC_RELEASE);
    ::syscall(SYS_futex, &cg_ready, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  };
  const char* argv[] = {"skiff-agent", "--fd", "3", nullptr};
  const char* envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                        nullptr};

  jail::ChildPlan plan;
  plan.sock_fd = child_end.get();
  plan.launcher_pidfd = jail::LauncherPidfd();
  plan.state_sock = state_child.get();
  plan.agent_fd = agent.get();
  ChildFailure report;
  plan.report = &report;
  plan.userns_fd = (*userns)->fd.get();
  const std::string resolv = std::string("nameserver ") + net::kDns + "\n";
  if (inst->net_) {
    plan.netns_fd = inst->net_->netns_fd();
    plan.resolv_conf = resolv.c_str();
  }
  plan.cgroup_bases = cg_bases.data();
  plan.n_cgroup_bases = static_cast<int>(cg_bases.size());
  plan.cgroup_procs = cg_procs.c_str();
  plan.cgroup_ready = &cg_ready;
  plan.hostname = policy.hostname.c_str();
  plan.state_dir = policy.state_dir.c_str();
  plan.state_opts = rootfs.state_opts.c_str();
  plan.layers = layers.data();
  plan.n_layers = static_cast<int>(nl);
  plan.dev_opts = rootfs.dev_opts.c_str();
  plan.shm_opts = rootfs.shm_opts.c_str();
  plan.tmp_opts = rootfs.tmp_opts.c_str();
  plan.uid_base = base;
  plan.nofile = options_.nofile;
  if (rlimit cur{}; ::getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max < plan.nofile)
    plan.nofile = cur.rlim_max;  // raising it would need CAP_SYS_RESOURCE
  plan.nproc = policy.pids_max;
  plan.confine = shared_->confine ? &*shared_->confine : nullptr;
  plan.argv = const_cast<char* const*>(argv);
  plan.envp = const_cast<char* const*>(envp);

  // CLONE_VM|CLONE_VFORK: no copy of the daemon's page tables, and this
  // thread sleeps until the child has exec'd the agent or failed.
  jail::ChildStack stack;
  std::thread cg_thread;
  if (!cg_bases.empty()) {
    Result<std::thread> t = StartThread("jail: cgroups of " + policy.id, create_cgroups);
    if (t.ok()) {
      cg_thread = std::move(t).value();
    } else {
      SKIFF_LOG(Debug) << "jail: " << t.error().ToString() << "; creating the cgroups before the clone";
      create_cgroups();  // no thread to be had: create them before the clone
    }
  }
  int pidfd = -1;
  int pid = jail::CloneVm(jail::RunChild, stack.top(),
                          CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                              (inst->net_ ? 0 : CLONE_NEWNET) | CLONE_PIDFD | SIGCHLD,
                          &plan, &pidfd);
  int clone_err = errno;
  if (cg_thread.joinable()) cg_thread.join();
  // Only the value moves out: `cg` still says below whether creation failed.
  if (cg.ok()) inst->cgroup_ = std::move(*cg);  // released with `inst` from here on
  if (pid < 0) return boot(Error::Sys(Code::kS300, "clone", "sandbox init", clone_err));
  inst->proc_ = Process(static_cast<pid_t>(pid), UniqueFd(pidfd));
  mark("exec");
  shared_->warm.End(/*join=*/false);  // the init is in its cgroups: no head start needed
  child_end.reset();
  state_child.reset();
  agent.reset();
  lower_fds.clear();
  if (!cg.ok()) return boot(cg.error(), "creating the cgroups");  // the init saw it and gave up
  if (report.err != 0) return boot(ChildFailureError(report));
  for (int k = 0; k < 3; ++k) {
    char tag = 0;
    UniqueFd fd;
    if (RecvWithFd(state_host.get(), &tag, 1, &fd) != 1 || !fd)
      return boot(Error::Sys(Code::kS300, "recvmsg", "the init's state descriptors", errno));
    UniqueFd* slot = tag == 's'   ? &inst->state_root_
                     : tag == 't' ? &inst->tmp_root_
                     : tag == 'm' ? &inst->shm_root_
                                  : nullptr;
    if (!slot || *slot)
      return boot(Platform("boot", std::string("jail: unexpected state descriptor '") + tag + "'"));
    *slot = std::move(fd);
  }
  for (const auto& l : policy.rootfs.layers) inst->targets_.push_back(l.target);
  inst->channel_ = std::move(host_end);
  if (log::Enabled(log::Level::kDebug)) {
    std::string t;
    for (size_t i = 1; i < marks.size(); ++i)
      t += std::string(" ") + marks[i].first + "=" +
           std::to_string(
               std::chrono::duration_cast<std::chrono::microseconds>(marks[i].second - marks[i - 1].second)
                   .count()) +
           "us";
    SKIFF_LOG(Debug) << "jail: started " << policy.id << ":" << t;
  }
  inst->describe_ = {{"isolation", "jail"},
                     {"pid", pid},
                     {"uid_base", base},
                     {"cgroup", shared_->cgroups.kind() != jail::Cgroups::Kind::kNone},
                     {"cgroup_hierarchy", std::string(shared_->cgroups.kind_name())},
                     {"seccomp", plan.confine != nullptr},
                     {"memory_mb", policy.memory_mb},
                     {"pids_max", policy.pids_max},
                     {"cpus", policy.cpus},
                     {"tmp_size_mb", rootfs.tmp_mb},
                     {"network", policy.network}};
  if (inst->net_) {
    inst->describe_["net_helper_pid"] = inst->net_->helper_pid();
    inst->describe_["netns_inode"] = inst->net_->netns_inode();
  }
  return std::unique_ptr<Instance>(std::move(inst));
}

Result<std::unique_ptr<Instance>> JailIsolator::Dormant(const SandboxPolicy&) {
  return Platform("snapshot", std::string(kJailHibernateNote));
}

void JailIsolator::CleanupOrphans() {
  jail::OrphanScope scope;
  scope.uid_base = options_.uid_base;
  scope.slots = options_.slots;
  scope.uid_slots = shared_->slots.get();
  scope.lock_dir = shared_->lock_dir;
  scope.cgroup_bases = shared_->cgroups.bases();
  scope.sandboxes_dir = paths::RuntimeDir() + "/sandboxes";
  jail::CleanupOrphans(scope);
}

nlohmann::json JailIsolator::Doctor() {
  nlohmann::json j;
  j["root"] = ::geteuid() == 0;
  {
    std::ifstream f("/proc/sys/user/max_user_namespaces");
    long v = -1;
    f >> v;
    auto ns = jail::MakeUserNamespace(options_.uid_base);
    j["user_namespaces"] = {{"ok", ns.ok()}, {"max_user_namespaces", v}};
    if (!ns.ok()) j["user_namespaces"]["error"] = ns.error().message();
    if (ns.ok()) {
      auto t = jail::IdmappedTree("/usr", (*ns)->fd.get());
      j["idmapped_mounts"] = {{"ok", t.ok()}};
      if (!t.ok()) j["idmapped_mounts"]["error"] = t.error().message();
    } else {
      j["idmapped_mounts"] = {{"ok", false}, {"error", "no user namespace"}};
    }
  }
  {
    std::ifstream f("/proc/filesystems");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    j["overlayfs"] = {{"ok", all.find("\toverlay\n") != std::string::npos}};
    j["tmpfs"] = {{"ok", all.find("\ttmpfs\n") != std::string::npos}};
  }
  j["seccomp"] = {{"ok", shared_->confine.has_value()},
                  {"kernel", ::access("/proc/sys/kernel/seccomp/actions_avail", R_OK) == 0}};
  if (!shared_->confine) j["seccomp"]["error"] = shared_->confine_error;
  j["cgroups"] = shared_->cgroups.Describe();
  // What a sandbox's state can do here (docs/snapshots.md).
  j["state_modes"] = {{"pause", shared_->cgroups.can_freeze()},
                      {"snapshot", "disk"},
                      {"fork", true},
                      {"hibernate", false},
                      {"hibernate_note", std::string(kJailHibernateNote)}};
  std::string agent = paths::AgentBinary();
  j["agent"] = {{"path", agent}, {"ok", ::access(agent.c_str(), X_OK) == 0}};
  auto avail = Available();
  j["available"] = avail.ok();
  if (!avail.ok()) j["error"] = avail.error().message();
  return j;
}

std::unique_ptr<Isolator> MakeJailIsolator() { return std::make_unique<JailIsolator>(); }

}  // namespace skiff
