// The microVM Isolator: checks a policy, starts its VM (restored from the
// shape's template or booted, snapshot_template.h and vm_launch.h) and
// wraps it in an Instance; the orphan cleanup and `doctor` report.
#include "isolation/microvm/microvm.h"

#include <signal.h>
#include <unistd.h>

#include <mutex>
#include <optional>
#include <utility>

#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/pidfd.h"
#include "base/subprocess.h"
#include "isolation/microvm/guest_usage.h"
#include "isolation/microvm/kernel_cmdline.h"
#include "isolation/microvm/orphans.h"
#include "isolation/microvm/snapshot_template.h"
#include "isolation/microvm/template_store.h"
#include "isolation/microvm/vm_launch.h"
#include "isolation/microvm/vm_restore.h"
#include "isolation/microvm/vm_snapshot.h"
#include "isolation/microvm/vmm_usage.h"
#include "isolation/net/sandbox_net.h"
#include "protocol/client.h"
#include "protocol/messages.h"

namespace skiff {
namespace microvm {
namespace {

using namespace std::chrono_literals;

// How long a "usage" call may wait for the guest's agent: for
// sandbox::metrics, and (shorter, it delays the pause) before a pause.
constexpr auto kUsageTimeout = std::chrono::seconds(5);
constexpr auto kPauseSampleTimeout = std::chrono::seconds(2);

bool SafeId(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
      return false;
  return true;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ')) i++;
  return s.substr(i);
}

// A network: true VM's policy, kept for a wake after a hibernation.
std::optional<net::NetPolicy> NetPolicyOf(const SandboxPolicy& policy) {
  if (!policy.network) return std::nullopt;
  return net::NetPolicy{policy.net_host_ports, policy.net_allow};
}

// The first line `argv` prints on stdout (for `qemu --version`), "" when it
// does not run.
std::string FirstLineOf(const std::vector<std::string>& argv) {
  Result<FdPair> pipe = MakePipe();
  if (!pipe.ok()) return {};
  SpawnOptions options;
  options.stdout_fd = pipe->second.get();
  Result<Process> proc = Spawn(argv, options);
  pipe->second.reset();
  if (!proc.ok()) return {};
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipe->first.get(), buf, sizeof buf)) > 0 && out.size() < 4096)
    out.append(buf, static_cast<size_t>(n));
  (void)proc->Wait(std::nullopt);
  return Trim(out.substr(0, out.find('\n')));
}

class MicrovmInstance : public Instance {
 public:
  MicrovmInstance(std::string state_dir, Process proc, UniqueFd chan, nlohmann::json facts,
                  uint64_t guest_bytes, std::unique_ptr<net::SandboxNet> net,
                  std::optional<net::NetPolicy> net_policy, std::unique_ptr<Qmp> qmp, VmShape shape,
                  Parts parts, std::string id, std::string hostname)
      : shape_(std::move(shape)),
        net_policy_(std::move(net_policy)),
        parts_(std::move(parts)),
        id_(std::move(id)),
        hostname_(std::move(hostname)),
        qmp_(std::move(qmp)),
        net_(std::move(net)),
        state_dir_(std::move(state_dir)),
        proc_(std::move(proc)),
        chan_(std::move(chan)),
        facts_(std::move(facts)),
        guest_bytes_(guest_bytes),
        pid_(proc_.pid()) {}
  ~MicrovmInstance() override { Stop(0ms); }

  UniqueFd TakeChannel() override {
    std::lock_guard<std::mutex> lk(mu_);
    return std::move(chan_);
  }

  void Stop(std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (proc_.valid() && !proc_.exited()) {  // (no VMM: a Dormant() one)
      (void)proc_.Signal(SIGTERM);
      auto r = proc_.Wait(grace);
      if (!r.ok() || !r->has_value()) {
        (void)proc_.Signal(SIGKILL);
        (void)proc_.Wait(std::nullopt);
      }
    }
    report_ = ReportLocked();
    qmp_.reset();
    chan_.reset();
    net_.reset();  // slirp4netns killed; the namespace and its taps go with it
    if (!state_dir_.empty()) RemoveStateDir(state_dir_);
  }

  bool Running() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!proc_.valid() || proc_.exited()) return false;
    auto r = proc_.Wait(0ms);
    return r.ok() && !r->has_value();
  }

  std::string ExitReport() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return report_;
    if (proc_.valid() && !proc_.exited()) (void)proc_.Wait(0ms);
    return ReportLocked();
  }

  nlohmann::json Describe() override {
    std::lock_guard<std::mutex> lk(mu_);
    nlohmann::json d = facts_;
    if (!stopped_ && proc_.valid() && !proc_.exited()) AddVmmUsage(ReadVmmUsage(pid_, guest_bytes_), d);
    return d;
  }

  Status Pause() override {
    SKIFF_RETURN_IF_ERROR(RunState("stop"));
    std::lock_guard<std::mutex> lk(mu_);
    paused_ = true;
    return OkStatus();
  }
  Status Resume() override {
    SKIFF_RETURN_IF_ERROR(RunState("cont"));
    std::lock_guard<std::mutex> lk(mu_);
    paused_ = false;
    return OkStatus();
  }

  bool SnapshotNeedsQuiesce() const override { return true; }
  // "stop" stops the guest's clock with its vCPUs (QEMU's virtual clock).
  bool ClockStopsWhilePaused() const override { return true; }

  Result<SnapshotContents> Snapshot(const std::string& dir, uint64_t max_bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    return SnapshotLocked(dir, max_bytes);
  }

  Result<SnapshotContents> Hibernate(const std::string& dir, uint64_t max_bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    SKIFF_ASSIGN_OR_RETURN(SnapshotContents saved, SnapshotLocked(dir, max_bytes));
    // Saved: the VMM and everything it holds go; the sandbox is the file now.
    (void)proc_.Signal(SIGKILL);
    (void)proc_.Wait(std::nullopt);
    qmp_.reset();
    // Its network too (slirp4netns, the namespace): the wake makes a new one.
    net_.reset();
    facts_.erase("net_helper_pid");
    facts_.erase("netns_inode");
    RemoveStateDir(state_dir_);
    state_dir_.clear();
    hibernated_ = true;
    facts_["hibernated"] = true;
    return saved;
  }

  // Dormant(): taken up from a hibernation of an earlier daemon, no VMM yet.
  void MarkHibernated() {
    std::lock_guard<std::mutex> lk(mu_);
    hibernated_ = true;
  }

  // The guest's own counters, from its agent (guest_usage.h); a paused VM
  // answers the sample BeforePause took.
  Result<ResourceUsage> Usage(proto::Client& agent) override {
    bool paused = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopped_ || (proc_.valid() && proc_.exited()))
        return Platform("isolation", "microvm: the VM has stopped");
      if (hibernated_)
        return Error(Code::kS005, "sandbox " + id_ + " is hibernated: resume it to read its metrics");
      paused = paused_;
    }
    if (paused) return usage_.Paused(id_);
    return usage_.Read([&] { return AskUsage(agent, kUsageTimeout); });
  }

  void BeforePause(proto::Client& agent) override {
    Status st = usage_.Remember([&] { return AskUsage(agent, kPauseSampleTimeout); });
    if (!st.ok())
      SKIFF_LOG(Warn) << "microvm " << id_ << ": usage sample before the pause: " << st.error().message();
  }

  Status CanHibernate() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_ || proc_.exited()) return Platform("isolation", "microvm: the VM has stopped");
    return OkStatus();
  }

  Result<UniqueFd> Wake(const std::string& dir) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return Platform("isolation", "microvm: the VM has stopped");
    if (!hibernated_) return Platform("isolation", "microvm: the VM is not hibernated");
    SandboxPolicy p;
    p.id = id_;
    p.cpus = static_cast<uint32_t>(shape_.cpus);
    p.memory_mb = shape_.memory_mb;
    p.rootfs.block_image = shape_.block_image;
    // network: true: a network of its own again, for the same policy.
    p.network = net_policy_.has_value();
    if (net_policy_) {
      p.net_host_ports = net_policy_->host_ports;
      p.net_allow = net_policy_->allow;
    }
    SKIFF_ASSIGN_OR_RETURN(LaunchSpec spec, RestoreSpec(dir, p, parts_, shape_.kvm));
    bool killed = false;
    SKIFF_ASSIGN_OR_RETURN(Launched l, RestoreVm(parts_, spec, dir + "/state", hostname_, &killed));
    net_ = std::move(l.net);
    if (net_) {
      facts_["net_helper_pid"] = net_->helper_pid();
      facts_["netns_inode"] = net_->netns_inode();
    }
    proc_ = std::move(l.proc);
    pid_ = proc_.pid();
    qmp_ = std::move(l.monitor);
    state_dir_ = l.state.Release();
    hibernated_ = false;
    facts_["hibernated"] = false;
    facts_["vmm_pid"] = pid_;
    return std::move(l.chan);
  }

 private:
  Result<SnapshotContents> SnapshotLocked(const std::string& dir, uint64_t max_bytes) {
    if (stopped_ || proc_.exited()) return Platform("isolation", "microvm: the VM has stopped");
    if (!qmp_) return Platform("isolation", "microvm: this VM has no monitor");
    auto deadline = Clock::now() + std::chrono::seconds(5);
    if (!qmp_->negotiated()) SKIFF_RETURN_IF_ERROR(qmp_->Handshake(deadline));
    SKIFF_ASSIGN_OR_RETURN(nlohmann::json status, qmp_->Execute("query-status", {}, deadline));
    bool was_paused = !status.value("running", true);
    return SaveVmSnapshot(*qmp_, shape_, parts_, dir, max_bytes, was_paused);
  }

 private:
  // One "usage" call to the guest's agent (`timeout` at most), decoded. The
  // agent's own ERROR is its word only: whatever its code, S300 naming the
  // op (a guest cannot make a metrics call answer S002, say).
  static Result<proto::UsageResult> AskUsage(proto::Client& agent, std::chrono::milliseconds timeout) {
    Result<nlohmann::json> r = agent.Call(proto::UsageRequest{}, Clock::now() + timeout);
    if (!r.ok()) {
      const Error& e = r.error();
      if (e.code() == Code::kS300) return Error(e).With("microvm: op usage of the guest's agent");
      return Platform("metrics", "microvm: op usage of the guest's agent failed (" +
                                     std::string(CodeName(e.code())) + ": " + e.message() + ")");
    }
    return proto::UsageResult::FromJson(*r);
  }

  // "stop" halts the vCPUs (guest memory, devices and the VMM stay); "cont"
  // lets them run. Both return once QEMU has done it.
  Status RunState(const char* command) {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_ || proc_.exited()) return Platform("isolation", "microvm: the VM has stopped");
    if (!qmp_) return Platform("isolation", "microvm: this VM has no monitor");
    auto deadline = Clock::now() + std::chrono::seconds(5);
    if (!qmp_->negotiated()) SKIFF_RETURN_IF_ERROR(qmp_->Handshake(deadline));
    Result<nlohmann::json> r = qmp_->Execute(command, nlohmann::json::object(), deadline);
    if (!r.ok()) return std::move(r).error().With(std::string("microvm: ") + command);
    return OkStatus();
  }

  std::string ReportLocked() {
    if (!proc_.valid()) return "no VMM (hibernated)";
    return VmReport(proc_.exited() ? DescribeWaitStatus(*proc_.status()) : "qemu running", state_dir_);
  }

  const VmShape shape_;
  const std::optional<net::NetPolicy> net_policy_;  // network: true, for a wake
  const Parts parts_;
  const std::string id_;
  const std::string hostname_;  // the guest's
  bool hibernated_ = false;     // saved and its VMM gone (Hibernate) until Wake
  std::mutex mu_;
  // QEMU's monitor. Events QEMU sends between commands wait in the socket
  // and are skipped by the next command; a guest can cause only
  // rate-limited ones (RTC_CHANGE at most once a second).
  std::unique_ptr<Qmp> qmp_;
  std::unique_ptr<net::SandboxNet> net_;  // network: true
  std::string state_dir_;
  Process proc_;
  UniqueFd chan_;
  nlohmann::json facts_;
  uint64_t guest_bytes_;
  pid_t pid_;
  bool stopped_ = false;
  bool paused_ = false;  // vCPUs stopped by Pause() until Resume()
  std::string report_;
  // Usage(): the guest's samples (its own lock; never taken with mu_ held).
  GuestUsage usage_{static_cast<uint32_t>(shape_.cpus), guest_bytes_};
};

class MicrovmIsolator : public Isolator {
 public:
  std::string_view kind() const override { return "microvm"; }

  Status Available() override {
    std::string qemu = QemuBinary();
    if (::access(qemu.c_str(), X_OK) != 0)
      return Platform("isolation",
                      "microvm: QEMU not found (" + qemu + "): install qemu-system-x86 or set SKIFF_QEMU");
    std::string kernel = KernelPath();
    if (::access(kernel.c_str(), R_OK) != 0)
      return Platform("isolation", "microvm: guest kernel not built (" + kernel +
                                       "): run scripts/build-kernel or set SKIFF_KERNEL");
    std::string agent = paths::AgentBinary();
    if (::access(agent.c_str(), R_OK) != 0)
      return Platform("isolation", "microvm: skiff-agent not found (" + agent + ")");
    return OkStatus();
  }

  Result<std::unique_ptr<Instance>> Start(const SandboxPolicy& policy) override;
  Result<std::unique_ptr<Instance>> Dormant(const SandboxPolicy& policy) override;
  void CleanupOrphans() override;
  nlohmann::json Doctor() override;
};

Result<std::unique_ptr<Instance>> MicrovmIsolator::Start(const SandboxPolicy& policy) {
  auto t0 = Clock::now();
  if (!SafeId(policy.id)) return Platform("boot", "microvm: bad sandbox id");
  if (policy.rootfs.block_image.empty())
    return Platform("boot", "microvm: the image has no block image (build it with the images tool)");
  std::string fstype = policy.rootfs.block_fstype.empty() ? std::string("erofs") : policy.rootfs.block_fstype;
  if (fstype != "erofs" && fstype != "ext4")
    return Platform("boot", "microvm: unsupported block image type '" + fstype + "'");
  if (policy.cpus < 1 || policy.cpus > 64) return Platform("boot", "microvm: cpus out of range");
  if (policy.memory_mb < 64 || policy.memory_mb > 1024 * 1024)
    return Platform("boot", "microvm: memory_mb out of range (64 MiB minimum)");
  SKIFF_RETURN_IF_ERROR(Available());

  bool kvm = KvmUsable();
  SKIFF_ASSIGN_OR_RETURN(Parts parts, ResolveParts());
  LaunchSpec spec;
  spec.id = policy.id;
  spec.cpus = static_cast<int>(policy.cpus);  // 1..64, checked above
  spec.memory_mb = policy.memory_mb;
  spec.block_image = policy.rootfs.block_image;
  spec.kvm = kvm;

  int64_t template_ms = -1;
  std::optional<Launched> vm;
  if (!policy.restore_dir.empty()) {
    SKIFF_ASSIGN_OR_RETURN(spec, RestoreSpec(policy.restore_dir, policy, parts, kvm));
    bool killed = false;
    SKIFF_ASSIGN_OR_RETURN(
        vm, RestoreVm(parts, spec, policy.restore_dir + "/state", GuestHostname(policy.hostname), &killed));
  } else {
    vm = RestoreFromTemplate(parts, spec, policy, &template_ms);
    if (vm) spec.append = KernelCmdline(TemplatePolicy(policy), kvm);  // the template's machine
  }
  bool restored = vm.has_value();
  if (!vm) {
    spec.append = KernelCmdline(policy, kvm);
    spec.network = policy.network ? &policy : nullptr;
    spec.qmp = true;  // pause and resume
    SKIFF_ASSIGN_OR_RETURN(vm, Boot(spec, parts));
  }

  auto ready = Clock::now();
  nlohmann::json facts = {{"isolation", "microvm"},
                          {"accel", kvm ? "kvm" : "tcg"},
                          {"vcpus", policy.cpus},
                          {"memory_mb", policy.memory_mb},
                          {"kernel", parts.kernel},
                          {"vmm_pid", vm->proc.pid()},
                          {"vmm_uid", vm->uid},
                          {"restored", restored},
                          {"from_snapshot", !policy.restore_dir.empty()},
                          {"prepare_ms", Ms(vm->launched - t0)},
                          {"boot_ms", Ms(ready - vm->launched)},
                          {"network", policy.network}};
  if (template_ms >= 0) facts["template_ms"] = template_ms;
  if (vm->net) {
    facts["net_helper_pid"] = vm->net->helper_pid();
    facts["netns_inode"] = vm->net->netns_inode();
  }
  SKIFF_LOG(Info) << "microvm " << policy.id << ": agent ready after " << Ms(ready - t0) << " ms ("
                  << (kvm ? "kvm" : "tcg") << (restored ? ", restored" : ", booted") << ", qemu pid "
                  << vm->proc.pid() << ")";
  std::string state = vm->state.Release();
  std::unique_ptr<Qmp> monitor = std::move(vm->monitor);
  if (!monitor && vm->qmp) monitor = std::make_unique<Qmp>(std::move(vm->qmp));
  VmShape shape{spec.cpus, spec.memory_mb, spec.block_image, kvm, spec.append, policy.network};
  return std::unique_ptr<Instance>(new MicrovmInstance(
      state, std::move(vm->proc), std::move(vm->chan), std::move(facts), uint64_t{policy.memory_mb} << 20,
      std::move(vm->net), NetPolicyOf(policy), std::move(monitor), std::move(shape), std::move(parts),
      policy.id, GuestHostname(policy.hostname)));
}

Result<std::unique_ptr<Instance>> MicrovmIsolator::Dormant(const SandboxPolicy& policy) {
  if (!SafeId(policy.id)) return Platform("boot", "microvm: bad sandbox id");
  if (policy.restore_dir.empty()) return Platform("boot", "microvm: no saved state to take up");
  SKIFF_RETURN_IF_ERROR(Available());
  const bool kvm = KvmUsable();
  SKIFF_ASSIGN_OR_RETURN(Parts parts, ResolveParts());
  // The save must fit this host (accelerator, QEMU, block image) now, not
  // only when it is woken.
  SKIFF_ASSIGN_OR_RETURN(LaunchSpec spec, RestoreSpec(policy.restore_dir, policy, parts, kvm));
  nlohmann::json facts = {
      {"isolation", "microvm"},        {"accel", kvm ? "kvm" : "tcg"}, {"vcpus", policy.cpus},
      {"memory_mb", policy.memory_mb}, {"kernel", parts.kernel},       {"restored", true},
      {"from_snapshot", false},        {"hibernated", true},           {"network", policy.network}};
  VmShape shape{spec.cpus, spec.memory_mb, spec.block_image, kvm, spec.append, policy.network};
  auto inst = std::make_unique<MicrovmInstance>("", Process(), UniqueFd(), std::move(facts),
                                                uint64_t{policy.memory_mb} << 20, nullptr,
                                                NetPolicyOf(policy), nullptr, std::move(shape),
                                                std::move(parts), policy.id, GuestHostname(policy.hostname));
  inst->MarkHibernated();
  return std::unique_ptr<Instance>(std::move(inst));
}

void MicrovmIsolator::CleanupOrphans() {
  // Half-written templates of a process that died while saving one, and
  // templates beyond the cap.
  TemplateStore(SnapshotRoot()).Prune("");
  CleanupOrphanVms(StateRoot());
}

nlohmann::json MicrovmIsolator::Doctor() {
  nlohmann::json d;
  std::string qemu = QemuBinary();
  bool has_qemu = ::access(qemu.c_str(), X_OK) == 0;
  d["qemu"] = qemu;
  d["qemu_found"] = has_qemu;
  if (has_qemu) d["qemu_version"] = FirstLineOf({qemu, "--version"});
  bool kvm = KvmUsable();
  d["kvm"] = kvm;
  if (!KvmNote().empty()) d["kvm_note"] = KvmNote();
  d["accel"] = kvm ? "kvm" : "tcg";
  std::string kernel = KernelPath();
  d["kernel"] = kernel;
  d["kernel_built"] = ::access(kernel.c_str(), R_OK) == 0;
  Result<std::string> release = ReadFile(kernel.substr(0, kernel.rfind('/')) + "/release");
  if (release.ok() && !Trim(*release).empty()) d["kernel_release"] = Trim(*release);
  d["agent"] = paths::AgentBinary();
  d["agent_found"] = ::access(paths::AgentBinary().c_str(), R_OK) == 0;
  nlohmann::json snap = {{"enabled", SnapshotsEnabled()}, {"dir", SnapshotRoot()}};
  snap["templates"] = TemplateStore(SnapshotRoot()).List().size();
  if (!SnapshotsEnabled()) snap["note"] = "SKIFF_MICROVM_SNAPSHOT=0: every VM boots";
  d["snapshots"] = snap;
  // What a sandbox's state can do here (docs/snapshots.md), network: true
  // or not.
  d["state_modes"] = {{"pause", true}, {"snapshot", "memory+disk"}, {"fork", true}, {"hibernate", true}};
  auto st = Available();
  d["available"] = st.ok();
  if (!st.ok()) d["problem"] = st.error().message();
  return d;
}

}  // namespace
}  // namespace microvm

std::unique_ptr<Isolator> MakeMicrovmIsolator() { return std::make_unique<microvm::MicrovmIsolator>(); }

}  // namespace skiff
