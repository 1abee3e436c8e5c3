#include "isolation/microvm/microvm.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/fs_util.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/pidfd.h"
#include "base/scoped_dir.h"
#include "base/sha256.h"
#include "base/text.h"
#include "isolation/microvm/initramfs.h"
#include "isolation/microvm/kvm_probe.h"
#include "isolation/microvm/qemu_cmdline.h"
#include "isolation/microvm/qmp.h"
#include "isolation/microvm/vmm_launch.h"
#include "isolation/microvm/vmm_usage.h"
#include "isolation/net/sandbox_net.h"
#include "protocol/hello.h"

extern char** environ;

namespace skiff {
namespace microvm {
namespace {

void RemoveTreeLogged(const std::string& path) {
  if (auto st = RemoveTree(path); !st.ok()) SKIFF_LOG(Warn) << "microvm: " << st.error().message();
}

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kBootTimeout = 30s;
constexpr size_t kReportTail = 4096;
// Console and QEMU log files are capped (RLIMIT_FSIZE on the VMM).
constexpr uint64_t kMaxLogBytes = 4u << 20;
// Per-VM VMM uids: kVmmUidBase + hash(id) % kVmmUidRange, so that two VMs
// rarely share a uid (one compromised VMM cannot signal or ptrace another).
constexpr uint32_t kVmmUidBase = 2100000000;
constexpr uint32_t kVmmUidRange = 1000000;

// Measured under TCG (docs/microvm.md): console on the 8250, no i8042,
// trust the TSC, fixed loops-per-jiffy; reboot=t and panic=-1 turn any
// guest failure into a reset, which -no-reboot makes QEMU exit on.
constexpr const char* kBootArgs =
    "console=ttyS0 quiet panic=-1 reboot=t i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
    "tsc=reliable no_timer_check lpj=5000000";

// Only under TCG (docs/microvm.md, "Boot under TCG"):
// - tsc_early_khz: the host's TSC rate, so a busy host cannot fail the
//   guest's TSC calibration (added with the rate, below);
// - noapictimer: the PIT drives the tick instead of a local APIC timer the
//   kernel would first calibrate for 100 ms of guest time (200-300 ms of
//   wall time emulated);
// - norandmaps: no address-space randomisation inside the guest. TCG caches
//   translated code by virtual address, so with randomisation every new
//   process translated ld.so and libc again: a dynamically linked
//   /bin/true took 30-50 ms, without it 8 ms. The VM boundary does not
//   depend on it; under KVM randomisation stays on.
constexpr const char* kTcgBootArgs = " noapictimer norandmaps";

// The hostname as handed to the guest (kernel command line or resume):
// letters, digits, '-' and '.' only, at most 63; "" when nothing is left.
std::string GuestHostname(const std::string& name) {
  std::string h;
  for (char c : name)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.')
      h += c;
  return h.size() <= 63 ? h : std::string();
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

bool SafeId(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
      return false;
  return true;
}

uint32_t Fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::string ReadFileTail(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0));
  size_t start = size > max ? size - max : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// A small file whole, or "" when it cannot be read (a process that is gone,
// a cache entry not written yet).
std::string ReadOrEmpty(const std::string& path) {
  Result<std::string> r = ReadFile(path);
  return r.ok() ? std::move(*r) : std::string();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ')) i++;
  return s.substr(i);
}

// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot.
std::string ProcStartTime(pid_t pid) {
  std::string stat = ReadOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  auto rp = stat.rfind(')');
  if (rp == std::string::npos) return {};
  std::istringstream in(stat.substr(rp + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; i++)
    if (i == 22) return field;
  return {};
}

std::string SelfOwnerTag() { return std::to_string(::getpid()) + ":" + ProcStartTime(::getpid()); }

// An owner tag "pid:starttime" whose process no longer exists.
bool OwnerGone(const std::string& tag) {
  auto colon = tag.find(':');
  if (colon == std::string::npos) return true;
  pid_t pid = static_cast<pid_t>(std::atoi(tag.substr(0, colon).c_str()));
  if (pid <= 0) return true;
  return ProcStartTime(pid) != tag.substr(colon + 1);
}

std::string StateRoot() { return paths::RuntimeDir() + "/microvm"; }

VmmUsage ReadUsage(pid_t pid, uint64_t guest_bytes) {
  std::string base = "/proc/" + std::to_string(pid);
  return ParseVmmUsage(
      {ReadOrEmpty(base + "/stat"), ReadOrEmpty(base + "/status"), ReadOrEmpty(base + "/smaps")}, guest_bytes,
      ::sysconf(_SC_CLK_TCK));
}

// Runs `argv` and returns its first line of stdout (for `qemu --version`).
std::string FirstLineOf(const std::vector<std::string>& argv) {
  Result<FdPair> pipe = MakePipe();
  if (!pipe.ok()) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipe->second.get(), 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> av;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  pipe->second.reset();
  std::string out;
  if (rc == 0) {
    char buf[512];
    ssize_t n;
    while ((n = ::read(pipe->first.get(), buf, sizeof buf)) > 0 && out.size() < 4096)
      out.append(buf, static_cast<size_t>(n));
    int st;
    ::waitpid(pid, &st, 0);
  }
  return Trim(out.substr(0, out.find('\n')));
}

std::string DescribeWaitStatus(int st) {
  if (WIFEXITED(st)) return "qemu exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    const char* name = sigabbrev_np(WTERMSIG(st));
    return std::string("qemu killed by signal ") +
           (name ? std::string("SIG") + name : std::to_string(WTERMSIG(st)));
  }
  return "qemu ended (status " + std::to_string(st) + ")";
}

// The end of a log, printable, for S300 messages.
std::string Printable(std::string s) {
  s = SanitizeUtf8(s);
  std::string out;
  for (char c : s) {
    if (c == '\r') continue;
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') continue;
    out += c;
  }
  return Trim(out);
}

class MicrovmInstance : public Instance {
 public:
  MicrovmInstance(std::string state_dir, Process proc, UniqueFd chan, nlohmann::json facts,
                  uint64_t guest_bytes, std::unique_ptr<net::SandboxNet> net)
      : net_(std::move(net)),
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
    if (!proc_.exited()) {
      (void)proc_.Signal(SIGTERM);
      auto r = proc_.Wait(grace);
      if (!r.ok() || !r->has_value()) {
        (void)proc_.Signal(SIGKILL);
        (void)proc_.Wait(std::nullopt);
      }
    }
    report_ = ReportLocked();
    chan_.reset();
    net_.reset();  // slirp4netns killed; the namespace and its taps go with it
    RemoveTreeLogged(state_dir_);
  }

  bool Running() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (proc_.exited()) return false;
    auto r = proc_.Wait(0ms);
    return r.ok() && !r->has_value();
  }

  std::string ExitReport() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return report_;
    if (!proc_.exited()) (void)proc_.Wait(0ms);
    return ReportLocked();
  }

  nlohmann::json Describe() override {
    std::lock_guard<std::mutex> lk(mu_);
    nlohmann::json d = facts_;
    if (!stopped_ && !proc_.exited()) {
      VmmUsage u = ReadUsage(pid_, guest_bytes_);
      d["vmm_cpu_ms"] = u.cpu_ms;
      d["vmm_rss_kib"] = u.rss_kib;
      if (u.guest_rss_kib >= 0 && u.rss_kib >= 0) {
        d["guest_rss_kib"] = u.guest_rss_kib;
        d["vmm_overhead_kib"] = u.rss_kib - u.guest_rss_kib;
        d["vmm_private_overhead_kib"] = u.anon_kib - u.guest_anon_kib;
      }
    }
    return d;
  }

 private:
  std::string ReportLocked() {
    std::string head = proc_.exited() ? DescribeWaitStatus(*proc_.status()) : "qemu running";
    std::string qemu = Printable(ReadFileTail(state_dir_ + "/qemu.log", kReportTail / 2));
    std::string console = Printable(ReadFileTail(state_dir_ + "/console.log", kReportTail));
    std::string out = head;
    if (!qemu.empty()) out += "; qemu: " + qemu;
    if (!console.empty()) out += "; console: " + console;
    if (out.size() > kReportTail)
      out = out.substr(0, 200) + " … " + out.substr(out.size() - (kReportTail - 210));
    return out;
  }

  std::mutex mu_;
  std::unique_ptr<net::SandboxNet> net_;  // network: true
  std::string state_dir_;
  Process proc_;
  UniqueFd chan_;
  nlohmann::json facts_;
  uint64_t guest_bytes_;
  pid_t pid_;
  bool stopped_ = false;
  std::string report_;
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
  void CleanupOrphans() override;
  nlohmann::json Doctor() override;
};

namespace {

// A per-VM state directory, removed when its owner goes unless kept.
class StateDir {
 public:
  StateDir() = default;
  explicit StateDir(std::string path) : path_(std::move(path)) {}
  StateDir(StateDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  StateDir& operator=(StateDir&& o) noexcept {
    Reset();
    path_ = std::exchange(o.path_, {});
    return *this;
  }
  ~StateDir() { Reset(); }
  const std::string& path() const { return path_; }
  std::string Release() { return std::exchange(path_, {}); }

 private:
  void Reset() {
    if (!path_.empty()) RemoveTreeLogged(path_);
    path_.clear();
  }
  std::string path_;
};

// What to start: a cold boot, a template boot (with a QMP monitor), or a
// restore from a migration stream (with a QMP monitor).
struct LaunchSpec {
  std::string id;      // state directory name, VMM uid
  std::string append;  // kernel command line
  int cpus = 1;
  uint32_t memory_mb = 0;
  std::string block_image;
  bool kvm = false;
  bool qmp = false;
  int incoming_fd = -1;                    // restore from this stream
  uint64_t max_file_bytes = kMaxLogBytes;  // RLIMIT_FSIZE: logs, or a snapshot
  const SandboxPolicy* network = nullptr;  // network: true (cold boots only)
};

struct Launched {
  // Declared so that the VMM dies before its state directory goes.
  StateDir state;
  std::unique_ptr<net::SandboxNet> net;
  Process proc;
  UniqueFd chan;  // host end of the agent channel
  UniqueFd qmp;   // host end of the QMP monitor (spec.qmp)
  uint32_t uid = 0;
  Clock::time_point launched;
};

struct Parts {
  std::string qemu_real, kernel, initrd;
};

Result<Parts> ResolveParts() {
  Parts p;
  char real[PATH_MAX];
  std::string qemu = QemuBinary();
  if (!::realpath(qemu.c_str(), real)) return Error::Sys(Code::kS300, "realpath", qemu, errno);
  p.qemu_real = real;
  std::string kernel = KernelPath();
  if (!::realpath(kernel.c_str(), real)) return Error::Sys(Code::kS300, "realpath", kernel, errno);
  p.kernel = real;
  SKIFF_ASSIGN_OR_RETURN(p.initrd, EnsureInitramfs(paths::AgentBinary(), paths::CacheDir() + "/microvm"));
  return p;
}

QemuMachine MachineOf(const LaunchSpec& spec) { return {spec.append, spec.cpus, spec.memory_mb, spec.kvm}; }

Result<Launched> Launch(const LaunchSpec& spec, const Parts& parts) {
  Launched l;
  SKIFF_RETURN_IF_ERROR(MakeDirs(StateRoot(), 0700));
  std::string state = StateRoot() + "/" + spec.id;
  if (::mkdir(state.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", state, errno);
  l.state = StateDir(state);
  std::string vmroot = state + "/vmm-root";
  if (::mkdir(vmroot.c_str(), 0755) != 0) return Error::Sys(Code::kS300, "mkdir", vmroot, errno);
  std::string owner = SelfOwnerTag();
  {
    // Written whole and renamed into place: a concurrent cleanup never
    // reads half a tag (which would name a process that is gone).
    SKIFF_RETURN_IF_ERROR(WriteFileAtomic(state + "/owner", owner + "\n", 0644));
  }
  auto open_log = [](const std::string& p) {
    return UniqueFd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
  };
  UniqueFd console = open_log(state + "/console.log");
  if (!console) return Error::Sys(Code::kS300, "open", state + "/console.log", errno);
  UniqueFd qlog = open_log(state + "/qemu.log");
  if (!qlog) return Error::Sys(Code::kS300, "open", state + "/qemu.log", errno);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return Error::Sys(Code::kS300, "open", "/dev/null", errno);
  UniqueFd image(::open(spec.block_image.c_str(), O_RDONLY | O_CLOEXEC));
  if (!image) return Error::Sys(Code::kS300, "open", spec.block_image, errno);
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::Sys(Code::kS300, "socketpair", "agent channel", errno);
  l.chan = UniqueFd(sp[0]);
  UniqueFd vm_end(sp[1]);
  UniqueFd qmp_vm_end;
  if (spec.qmp) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
      return Error::Sys(Code::kS300, "socketpair", "qmp", errno);
    l.qmp = UniqueFd(sp[0]);
    qmp_vm_end = UniqueFd(sp[1]);
  }

  // network: true: a host-owned namespace holding slirp4netns' tap, the
  // guest's tap and a filtering bridge between them (spec §6.3). QEMU only
  // gets the guest tap's descriptor and stays in its own empty namespace.
  UniqueFd tap;
  if (spec.network) {
    SKIFF_ASSIGN_OR_RETURN(
        l.net,
        net::SandboxNet::Create({spec.network->net_host_ports, spec.network->net_allow}, net::Mode::kBridge));
    tap = l.net->TakeTap();
  }

  VmmPlan plan;
  plan.root = vmroot;
  std::vector<std::pair<std::string, std::string>> files = {{parts.kernel, "/vm/kernel"},
                                                            {parts.initrd, "/vm/initrd"}};
  plan.exec_path = parts.qemu_real;
  if (parts.qemu_real.rfind("/usr/", 0) != 0) {
    files.push_back({parts.qemu_real, "/vm/qemu"});
    plan.exec_path = "/vm/qemu";
  }
  AddBaseRoot(plan, spec.kvm, files);
  l.uid = kVmmUidBase + Fnv1a(spec.id) % kVmmUidRange;
  plan.uid = l.uid;
  plan.gid = l.uid;
  plan.new_netns = true;
  plan.max_file_bytes = spec.max_file_bytes;
  plan.stdin_fd = devnull.get();
  plan.stdout_fd = console.get();
  plan.stderr_fd = qlog.get();
  // fd 3: agent channel, fd 4: block image, then whichever of these exist.
  plan.pass_fds = {vm_end.get(), image.get()};
  auto pass = [&](int fd) {
    plan.pass_fds.push_back(fd);
    return static_cast<int>(2 + plan.pass_fds.size());
  };
  QemuCommand cmd;
  cmd.exec_path = plan.exec_path;
  cmd.id = spec.id;
  cmd.machine = MachineOf(spec);
  if (tap) cmd.tap_fd = pass(tap.get());
  if (qmp_vm_end) cmd.qmp_fd = pass(qmp_vm_end.get());
  if (spec.incoming_fd >= 0) cmd.incoming_fd = pass(spec.incoming_fd);
  plan.env = {"PATH=/usr/bin", "SKIFF_VM_OWNER=" + owner, "SKIFF_VM_ID=" + spec.id};
  plan.argv = QemuArgv(cmd);

  SKIFF_ASSIGN_OR_RETURN(l.proc, LaunchVmm(plan));
  l.launched = Clock::now();
  return l;
}

// Waits until the agent has sent its first bytes (its HELLO, which stays in
// the socket for the protocol client) or the VMM has ended. Returns "" when
// ready, otherwise why not.
std::string WaitForAgent(Launched& l, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return "the agent did not start within " + std::to_string(kBootTimeout.count()) + " s";
    pollfd p[2] = {{l.chan.get(), POLLIN, 0}, {l.proc.pidfd(), POLLIN, 0}};
    int r = ::poll(p, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return std::string("poll(agent channel): ") + std::strerror(errno);
    if (p[0].revents & POLLIN) {
      // Data (the HELLO), or only the EOF of a VMM that went away?
      char byte;
      ssize_t n = ::recv(l.chan.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return {};
      if (n == 0) p[0].revents |= POLLHUP;
    }
    if (p[1].revents & POLLIN) {
      auto st = l.proc.Wait(std::nullopt);
      return st.ok() && st->has_value() ? DescribeWaitStatus(**st) : "qemu ended";
    }
    if (p[0].revents & (POLLHUP | POLLERR)) {
      auto st = l.proc.Wait(2000ms);
      return st.ok() && st->has_value() ? DescribeWaitStatus(**st) : std::string("the agent channel closed");
    }
  }
}

// Ends a VM that did not come up and turns the reason into S300 with the
// tails of QEMU's log and the console.
Error BootFailure(Launched& l, const std::string& failure) {
  if (Env("SKIFF_MICROVM_DEBUG") == "1") {
    std::string kept = l.state.Release();
    SKIFF_LOG(Warn) << "microvm: boot failed; state kept for debugging in " << kept;
    l.state = StateDir();
    if (!l.proc.exited()) {
      (void)l.proc.Signal(SIGKILL);
      (void)l.proc.Wait(std::nullopt);
    }
    return Platform("boot", failure + " (state kept in " + kept + ")");
  }
  if (!l.proc.exited()) {
    (void)l.proc.Signal(SIGKILL);
    (void)l.proc.Wait(std::nullopt);
  }
  std::string qemu_tail = Printable(ReadFileTail(l.state.path() + "/qemu.log", kReportTail / 2));
  std::string console_tail = Printable(ReadFileTail(l.state.path() + "/console.log", kReportTail));
  std::string msg = failure;
  if (!qemu_tail.empty()) msg += "; qemu: " + qemu_tail;
  if (!console_tail.empty()) msg += "; console: " + console_tail;
  if (msg.size() > kReportTail + 200) msg = msg.substr(msg.size() - kReportTail);
  return Platform("boot", msg);
}

int64_t Ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// ---- Snapshots ------------------------------------------------------------
//
// The first VM of a shape (image, vCPUs, memory, /tmp size, kernel, agent,
// QEMU, accelerator) boots a template with no sandbox-specific state, stops
// it once its agent is ready and saves it as a QEMU migration stream. Later
// VMs of that shape start QEMU with `-incoming` from that file instead of
// booting. The restored agent is then given what must differ per sandbox
// (docs/microvm.md, "Snapshots"): fresh entropy and a forced CRNG reseed,
// the wall clock, the hostname.

constexpr const char* kSnapshotFormat = "skiff-snapshot-1";
constexpr int kMaxTemplates = 8;
constexpr auto kSnapshotTimeout = 60s;

bool SnapshotsEnabled() { return Env("SKIFF_MICROVM_SNAPSHOT") != "0"; }

std::string SnapshotRoot() { return paths::CacheDir() + "/microvm/snapshots"; }

std::string FileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return path + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// The template's policy: the sandbox's shape without its identity.
SandboxPolicy TemplatePolicy(const SandboxPolicy& p) {
  SandboxPolicy t;
  t.id = p.id;
  t.rootfs = p.rootfs;
  t.cpus = p.cpus;
  t.memory_mb = p.memory_mb;
  t.tmp_size_mb = p.tmp_size_mb;
  t.network = false;
  return t;
}

// "" when any part cannot be identified (then no snapshot is used).
std::string SnapshotKey(const Parts& parts, const SandboxPolicy& tpl, const LaunchSpec& spec) {
  std::string key = kSnapshotFormat;
  for (const std::string& f : {parts.qemu_real, parts.kernel, tpl.rootfs.block_image}) {
    std::string id = FileIdentity(f);
    if (id.empty()) return {};
    key += "|" + id;
  }
  // The initramfs is named by the agent's digest (its content), and two
  // processes may write it at once: its path, not its inode, identifies it.
  key += "|" + parts.initrd;
  struct utsname u {};
  ::uname(&u);
  std::string cpuinfo = ReadOrEmpty("/proc/cpuinfo");
  auto flags = cpuinfo.find("\nflags");
  key += std::string("|") + u.release + "|" + u.version + "|" +
         (flags == std::string::npos ? "" : cpuinfo.substr(flags, cpuinfo.find('\n', flags + 1) - flags));
  for (const auto& arg : MachineArgs(MachineOf(spec))) key += "|" + arg;
  return Sha256Hex(key).substr(0, 24);
}

// Keys whose template could not be built or restored in this process: they
// boot cold from then on instead of failing twice per create.
std::mutex g_bad_mu;
std::set<std::string> g_bad_keys;

bool KeyIsBad(const std::string& key) {
  std::lock_guard<std::mutex> lk(g_bad_mu);
  return g_bad_keys.count(key) > 0;
}

void MarkKeyBad(const std::string& key) {
  std::lock_guard<std::mutex> lk(g_bad_mu);
  g_bad_keys.insert(key);
}

// Keeps the newest kMaxTemplates templates (by last use) and removes the
// leftovers of interrupted builds. Templates in use by a build or restore
// hold their lock and are skipped.
void PruneTemplates(const std::string& keep) {
  std::string root = SnapshotRoot();
  std::vector<std::pair<int64_t, std::string>> dirs;
  std::vector<std::string> junk;
  {
    Result<ScopedDir> d = ScopedDir::Open(root);
    if (!d.ok()) return;
    while (const dirent* e = d->Next()) {
      std::string n = e->d_name;
      if (n.size() < 3) continue;
      if (n.find(".tmp") != std::string::npos) {
        junk.push_back(n);
        continue;
      }
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0) continue;
      struct stat st {};
      if (::stat((root + "/" + n + "/state").c_str(), &st) != 0) {
        junk.push_back(n);
        continue;
      }
      dirs.push_back({int64_t{st.st_atim.tv_sec} * 1000000000 + st.st_atim.tv_nsec, n});
    }
  }
  std::sort(dirs.rbegin(), dirs.rend());
  for (size_t i = kMaxTemplates; i < dirs.size(); i++) junk.push_back(dirs[i].second);
  for (const auto& n : junk) {
    std::string key = n.substr(0, n.find('.'));
    if (key == keep) continue;
    UniqueFd lock(::open((root + "/" + key + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // busy
    RemoveTreeLogged(root + "/" + n);
    if (n == key) ::unlink((root + "/" + key + ".lock").c_str());
  }
}

// Boots the template, waits for its agent, saves it to <dir>/state.
Status BuildTemplate(const Parts& parts, const LaunchSpec& spec, const std::string& dir) {
  SKIFF_ASSIGN_OR_RETURN(Launched l, Launch(spec, parts));
  std::string failure = WaitForAgent(l, l.launched + kBootTimeout);
  if (!failure.empty()) return BootFailure(l, failure);
  auto deadline = Clock::now() + kSnapshotTimeout;
  Qmp qmp(std::move(l.qmp));
  SKIFF_RETURN_IF_ERROR(qmp.Handshake(deadline));
  SKIFF_RETURN_IF_ERROR(qmp.Execute("stop", {}, deadline));
  // QEMU's default migration bandwidth limit (32 MiB/s) is for live
  // migration over a network; a stopped VM saved to a local file wants none.
  SKIFF_RETURN_IF_ERROR(
      qmp.Execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}}, deadline));
  std::string tmp = dir + ".tmp" + std::to_string(::getpid());
  RemoveTreeLogged(tmp);
  if (::mkdir(tmp.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", tmp, errno);
  StateDir tmp_dir(tmp);
  UniqueFd out(::open((tmp + "/state").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return Error::Sys(Code::kS300, "open", tmp + "/state", errno);
  SKIFF_RETURN_IF_ERROR(qmp.Execute("getfd", {{"fdname", "snapshot"}}, deadline, out.get()));
  SKIFF_RETURN_IF_ERROR(qmp.Execute("migrate", {{"uri", "fd:snapshot"}}, deadline));
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(nlohmann::json st, qmp.Execute("query-migrate", {}, deadline));
    std::string status = st.value("status", std::string());
    if (status == "completed") break;
    if (status == "failed" || status == "cancelled")
      return Platform("snapshot",
                      "migration " + status + ": " + st.value("error-desc", std::string("no reason given")));
    if (Clock::now() > deadline) return Platform("snapshot", "saving the template took too long");
    std::this_thread::sleep_for(10ms);
  }
  (void)l.proc.Signal(SIGKILL);
  (void)l.proc.Wait(std::nullopt);
  if (::fsync(out.get()) != 0) return Error::Sys(Code::kS300, "fsync", tmp + "/state", errno);
  out.reset();
  {
    std::ofstream m(tmp + "/meta.json");
    m << nlohmann::json{{"format", kSnapshotFormat},       {"cpus", spec.cpus},
                        {"memory_mb", spec.memory_mb},     {"accel", spec.kvm ? "kvm" : "tcg"},
                        {"block_image", spec.block_image}, {"append", spec.append}}
             .dump()
      << "\n";
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) return Error::Sys(Code::kS300, "rename", dir, errno);
  tmp_dir.Release();
  return OkStatus();
}

Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "send", "agent channel", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// Entropy for a restored guest, hex-encoded.
Result<std::string> FreshSeedHex() {
  unsigned char seed[32];
  size_t got = 0;
  while (got < sizeof seed) {
    ssize_t n = ::getrandom(seed + got, sizeof seed - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "getrandom", "snapshot seed", errno);
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : seed) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// Starts QEMU from the template and hands the agent its per-sandbox state as
// soon as the guest runs (so its clock is set with little delay).
Result<Launched> Restore(const Parts& parts, LaunchSpec spec, const std::string& dir,
                         const SandboxPolicy& policy) {
  UniqueFd in(::open((dir + "/state").c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return Error::Sys(Code::kS300, "open", dir + "/state", errno);
  // Last use, for pruning (the cache may be mounted noatime).
  ::futimens(in.get(), nullptr);
  spec.incoming_fd = in.get();
  spec.qmp = true;
  SKIFF_ASSIGN_OR_RETURN(Launched l, Launch(spec, parts));
  in.reset();
  auto deadline = l.launched + kBootTimeout;
  {
    Qmp qmp(std::move(l.qmp));
    // The stream carries the template's run state (stopped before it was
    // saved): once loaded, QEMU waits paused, and `cont` starts the guest.
    Status st = qmp.Handshake(deadline);
    while (st.ok()) {
      auto s = qmp.Execute("query-status", {}, deadline);
      if (!s.ok()) {
        st = s.error();
        break;
      }
      std::string status = s->value("status", std::string());
      if (status == "running") break;
      if (status == "paused") {
        auto c = qmp.Execute("cont", {}, deadline);
        if (!c.ok()) st = c.error();
        break;
      }
      if (status != "inmigrate") {
        st = Platform("snapshot", "QEMU is " + status + " after loading the template");
        break;
      }
      if (Clock::now() > deadline) {
        st = Platform("snapshot", "loading the template took too long");
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    if (!st.ok()) return BootFailure(l, "restoring the snapshot failed: " + st.error().message());
  }
  std::string h = GuestHostname(policy.hostname);
  SKIFF_ASSIGN_OR_RETURN(std::string seed, FreshSeedHex());
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  proto::Resume resume{seed, int64_t{now.tv_sec} * 1000000000 + now.tv_nsec, h};
  std::string frame = proto::EncodeResumeHello(resume);
  if (!SendAll(l.chan.get(), frame).ok())
    return BootFailure(l, "restoring the snapshot failed: the agent channel closed");
  std::string failure = WaitForAgent(l, deadline);
  if (!failure.empty()) return BootFailure(l, "restoring the snapshot failed: " + failure);
  return l;
}

}  // namespace

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
  spec.cpus = policy.cpus;
  spec.memory_mb = policy.memory_mb;
  spec.block_image = policy.rootfs.block_image;
  spec.kvm = kvm;

  // A restore when the shape has (or can get) a template; networked VMs
  // always boot (their NIC and its namespace are per sandbox).
  std::optional<Launched> vm;
  bool restored = false;
  int64_t template_ms = -1;
  SandboxPolicy tpl = TemplatePolicy(policy);
  std::string tpl_append = KernelCmdline(tpl, kvm);
  LaunchSpec tpl_spec = spec;
  tpl_spec.append = tpl_append;
  std::string key = !policy.network && SnapshotsEnabled() && Env("SKIFF_MICROVM_DEBUG") != "1"
                        ? SnapshotKey(parts, tpl, tpl_spec)
                        : std::string();
  if (!key.empty() && !KeyIsBad(key)) {
    std::string root = SnapshotRoot();
    std::string dir = root + "/" + key;
    Status st = MakeDirs(root, 0700);
    UniqueFd lock;
    if (st.ok()) {
      lock = UniqueFd(::open((dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
      if (!lock) st = Error::Sys(Code::kS300, "open", dir + ".lock", errno);
    }
    // Shared while restoring; exclusive (once per shape) while building.
    if (st.ok() && ::access((dir + "/state").c_str(), R_OK) != 0) {
      while (::flock(lock.get(), LOCK_EX) != 0 && errno == EINTR) {
      }
      if (::access((dir + "/state").c_str(), R_OK) != 0) {
        auto tb = Clock::now();
        LaunchSpec ts = spec;
        ts.id = "tpl-" + key.substr(0, 16) + "-" + std::to_string(::getpid() % 100000);
        ts.append = tpl_append;
        ts.qmp = true;
        // The migration stream is written by the VMM: at most the guest's
        // RAM plus device state. Only the template (no user code) gets this.
        ts.max_file_bytes = (uint64_t{policy.memory_mb} << 20) + (64u << 20);
        st = BuildTemplate(parts, ts, dir);
        template_ms = Ms(Clock::now() - tb);
        if (st.ok()) {
          SKIFF_LOG(Info) << "microvm: saved a template for " << policy.memory_mb << " MiB, " << policy.cpus
                          << " vCPU in " << template_ms << " ms";
          PruneTemplates(key);
        }
      }
    }
    if (st.ok()) {
      while (::flock(lock.get(), LOCK_SH) != 0 && errno == EINTR) {
      }
      spec.append = tpl_append;
      auto r = Restore(parts, spec, dir, policy);
      if (r.ok()) {
        vm = std::move(*r);
        restored = true;
      } else {
        st = r.error();
        // A template that does not restore is discarded (rebuilt next time).
        ::flock(lock.get(), LOCK_UN);
        if (::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) RemoveTreeLogged(dir);
      }
    }
    if (!st.ok()) {
      MarkKeyBad(key);
      SKIFF_LOG(Warn) << "microvm: snapshots disabled for this shape, booting instead: "
                      << st.error().message();
    }
  }
  if (!vm) {
    spec.append = KernelCmdline(policy, kvm);
    spec.network = policy.network ? &policy : nullptr;
    SKIFF_ASSIGN_OR_RETURN(Launched l, Launch(spec, parts));
    std::string failure = WaitForAgent(l, l.launched + kBootTimeout);
    if (!failure.empty()) return BootFailure(l, failure);
    vm = std::move(l);
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
  return std::unique_ptr<Instance>(new MicrovmInstance(state, std::move(vm->proc), std::move(vm->chan),
                                                       std::move(facts), uint64_t{policy.memory_mb} << 20,
                                                       std::move(vm->net)));
}

void MicrovmIsolator::CleanupOrphans() {
  // Half-written templates of a process that died while saving one, and
  // templates beyond the cap.
  PruneTemplates("");
  // VMMs whose launching process is gone (found by the owner tag in their
  // environment; QEMU runs as an unprivileged uid but root reads environ).
  if (auto d = ScopedDir::Open("/proc"); d.ok()) {
    while (const dirent* e = d->Next()) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      std::string env = ReadOrEmpty(std::string("/proc/") + e->d_name + "/environ");
      std::string tag;
      for (size_t i = 0; i < env.size();) {
        size_t end = env.find('\0', i);
        if (end == std::string::npos) end = env.size();
        std::string_view kv(env.data() + i, end - i);
        if (kv.rfind("SKIFF_VM_OWNER=", 0) == 0) tag = std::string(kv.substr(15));
        i = end + 1;
      }
      if (tag.empty() || !OwnerGone(tag)) continue;
      auto p = Process::Open(pid);
      if (!p.ok()) continue;
      SKIFF_LOG(Warn) << "microvm: killing orphaned VMM pid " << pid;
      (void)p->Signal(SIGKILL);
      // Not our child: init reaps it. Forget the pidfd without waiting.
      (void)p->Wait(2000ms);
    }
  }
  // State directories of VMs whose owner is gone.
  std::string root = StateRoot();
  if (auto d = ScopedDir::Open(root); d.ok()) {
    std::vector<std::string> stale;
    while (const dirent* e = d->Next()) {
      std::string n = e->d_name;
      std::string tag = Trim(ReadOrEmpty(root + "/" + n + "/owner"));
      // Without an owner file the directory is either being created right
      // now by another process or was abandoned mid-creation; only the
      // latter is old.
      if (tag.empty()) {
        struct stat st {};
        if (::lstat((root + "/" + n).c_str(), &st) != 0) continue;
        if (::time(nullptr) - st.st_mtime < 60) continue;
      } else if (!OwnerGone(tag)) {
        continue;
      }
      stale.push_back(root + "/" + n);
    }
    for (const auto& s : stale) {
      SKIFF_LOG(Info) << "microvm: removing stale state " << s;
      RemoveTreeLogged(s);
    }
  }
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
  std::string release = Trim(ReadOrEmpty(kernel.substr(0, kernel.rfind('/')) + "/release"));
  if (!release.empty()) d["kernel_release"] = release;
  d["agent"] = paths::AgentBinary();
  d["agent_found"] = ::access(paths::AgentBinary().c_str(), R_OK) == 0;
  nlohmann::json snap = {{"enabled", SnapshotsEnabled()}, {"dir", SnapshotRoot()}};
  std::vector<std::string> templates;
  if (auto dir = ScopedDir::Open(SnapshotRoot()); dir.ok()) {
    while (const dirent* e = dir->Next()) {
      std::string n = e->d_name;
      if (n.size() > 2 && n.find('.') == std::string::npos &&
          ::access((SnapshotRoot() + "/" + n + "/state").c_str(), R_OK) == 0)
        templates.push_back(n);
    }
  }
  snap["templates"] = templates.size();
  if (!SnapshotsEnabled()) snap["note"] = "SKIFF_MICROVM_SNAPSHOT=0: every VM boots";
  d["snapshots"] = snap;
  auto st = Available();
  d["available"] = st.ok();
  if (!st.ok()) d["problem"] = st.error().message();
  return d;
}

}  // namespace

std::string QemuBinary() {
  if (auto v = Env("SKIFF_QEMU"); !v.empty()) return v;
  std::string path = Env("PATH");
  if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    std::string p = dir + "/qemu-system-x86_64";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "/usr/bin/qemu-system-x86_64";
}

std::string KernelPath() {
  if (auto v = Env("SKIFF_KERNEL"); !v.empty()) return v;
  return paths::CacheDir() + "/kernel/current/vmlinux";
}

namespace {

// A stable key for one host + QEMU + guest kernel combination.
std::string ProbeKey(const std::string& qemu, const std::string& kernel) {
  struct utsname u {};
  ::uname(&u);
  // "boot-end": verdicts of the probe that waited for the boot's end, not
  // only the banner (older verdicts are not reused).
  std::string key = std::string("boot-end|") + u.release + "|" + u.version;
  for (const std::string& f : {qemu, kernel}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return {};
    key += "|" + f + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  }
  return Sha256Hex(key).substr(0, 16);
}

// Boots the guest kernel under KVM with nothing attached and waits for the
// end of its boot on the console (ProbeConsoleShowsBootEnd). A /dev/kvm that opens is not enough: nested or
// half-working KVM (seen on cloud VMs) creates VMs whose guests never run,
// and every sandbox would then time out instead of falling back to TCG.
bool KvmBootsTheGuestKernel(std::string* why, bool* from_cache) {
  *from_cache = false;
  std::string qemu = QemuBinary(), kernel = KernelPath();
  if (::access(qemu.c_str(), X_OK) != 0 || ::access(kernel.c_str(), R_OK) != 0) {
    *why = "QEMU or the guest kernel is missing";
    return false;
  }
  std::string key = ProbeKey(qemu, kernel);
  std::string cache = paths::CacheDir() + "/microvm/kvm-probe-" + key;
  if (!key.empty()) {
    std::string cached = Trim(ReadOrEmpty(cache));
    *from_cache = cached == "ok" || cached.rfind("fail:", 0) == 0;
    if (cached == "ok") return true;
    if (*from_cache) {
      *why = cached.substr(5);
      return false;
    }
  }
  Result<FdPair> pipe = MakePipe();
  if (!pipe.ok()) return false;
  UniqueFd rd = std::move(pipe->first), wr = std::move(pipe->second);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  std::vector<std::string> args = {qemu,
                                   "-M",
                                   "microvm,x-option-roms=off,pit=on,pic=on,isa-serial=on,rtc=on,acpi=off",
                                   "-accel",
                                   "kvm",
                                   "-cpu",
                                   "host",
                                   "-m",
                                   "64",
                                   "-nodefaults",
                                   "-no-user-config",
                                   "-display",
                                   "none",
                                   "-no-reboot",
                                   "-serial",
                                   "stdio",
                                   "-kernel",
                                   kernel,
                                   "-append",
                                   "console=ttyS0 panic=-1 reboot=t"};
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) {
    *why = "cannot start QEMU";
    return false;
  }
  auto opened = Process::Open(pid);
  std::string out;
  bool booted = false;
  auto deadline = Clock::now() + 10s;
  while (!booted && Clock::now() < deadline && out.size() < 65536) {
    pollfd pf{rd.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(&pf, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    char buf[1024];
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n <= 0) break;  // QEMU exited
    out.append(buf, static_cast<size_t>(n));
    booted = ProbeConsoleShowsBootEnd(out);
    if (out.find("KVM internal error") != std::string::npos) break;  // QEMU waits forever
  }
  ::kill(pid, SIGKILL);
  if (!opened.ok()) ::waitpid(pid, nullptr, 0);  // otherwise ~Process reaps it
  if (!booted) {
    std::string tail = out.substr(out.size() > 300 ? out.size() - 300 : 0);
    *why = std::string(out.find("KVM internal error") != std::string::npos
                           ? "a guest kernel stopped with a KVM internal error under -accel kvm -cpu host"
                           : "a guest kernel did not boot under -accel kvm -cpu host within 10 s") +
           (tail.empty() ? std::string() : " (qemu: " + Printable(Trim(tail)) + ")");
  }
  if (!key.empty() && MakeDirs(paths::CacheDir() + "/microvm", 0755).ok()) {
    // A verdict that cannot be cached is probed again next time.
    (void)WriteFileAtomic(cache, (booted ? "ok" : "fail:" + *why) + "\n", 0644);
  }
  return booted;
}

struct KvmVerdict {
  bool usable = false;
  std::string note;
};

const KvmVerdict& Kvm() {
  static const KvmVerdict v = [] {
    KvmVerdict k;
    std::string force = Env("SKIFF_MICROVM_ACCEL");
    if (force == "tcg") {
      k.note = "SKIFF_MICROVM_ACCEL=tcg: KVM not used";
      return k;
    }
    int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      k.note = errno == ENOENT ? "no /dev/kvm: VMs run under TCG emulation (slow)"
                               : "/dev/kvm exists but does not open read-write";
      return k;
    }
    ::close(fd);
    if (force == "kvm") {
      k.usable = true;
      k.note = "SKIFF_MICROVM_ACCEL=kvm: the boot probe is skipped";
      return k;
    }
    std::string why;
    bool cached = false;
    k.usable = KvmBootsTheGuestKernel(&why, &cached);
    if (!k.usable) {
      k.note = KvmBootFailureNote(why, LoadedKvmModules());
      // Loud once, when the probe ran; later processes read the verdict.
      if (cached) {
        SKIFF_LOG(Info) << "microvm: " << k.note;
      } else {
        SKIFF_LOG(Warn) << "microvm: " << k.note;
      }
    }
    return k;
  }();
  return v;
}

}  // namespace

bool KvmUsable() { return Kvm().usable; }
std::string KvmNote() { return Kvm().note; }

uint64_t HostTscKhz() {
  static const uint64_t khz = [] {
    std::string cpuinfo = ReadOrEmpty("/proc/cpuinfo");
    auto flags = cpuinfo.find("\nflags");
    if (flags == std::string::npos) return uint64_t{0};
    std::string line = cpuinfo.substr(flags, cpuinfo.find('\n', flags + 1) - flags) + " ";
    // Only a constant-rate TSC is a clock worth trusting.
    if (line.find(" constant_tsc ") == std::string::npos) return uint64_t{0};
    auto mhz = cpuinfo.find("cpu MHz");
    if (mhz == std::string::npos) return uint64_t{0};
    auto colon = cpuinfo.find(':', mhz);
    if (colon == std::string::npos) return uint64_t{0};
    double v = std::atof(cpuinfo.c_str() + colon + 1);
    return v > 100 && v < 10000 ? static_cast<uint64_t>(v * 1000) : uint64_t{0};
  }();
  return khz;
}

std::string KernelCmdline(const SandboxPolicy& policy, bool kvm) {
  std::string fstype = policy.rootfs.block_fstype.empty() ? "erofs" : policy.rootfs.block_fstype;
  std::string out = std::string(kBootArgs) + " skiff.fstype=" + fstype;
  // SKIFF_MICROVM_DEBUG=1: the whole kernel log on the console.
  if (Env("SKIFF_MICROVM_DEBUG") == "1") out.replace(out.find(" quiet"), 6, "");
  if (!kvm) {
    out += kTcgBootArgs;
    if (uint64_t khz = HostTscKhz()) out += " tsc_early_khz=" + std::to_string(khz);
  }
  // The guest re-checks these; only plain tokens are passed.
  if (std::string h = GuestHostname(policy.hostname); !h.empty()) out += " skiff.hostname=" + h;
  if (policy.tmp_size_mb > 0) out += " skiff.tmp_mb=" + std::to_string(policy.tmp_size_mb);
  if (policy.network) out += " skiff.net=user";
  return out;
}

}  // namespace microvm

std::unique_ptr<Isolator> MakeMicrovmIsolator() { return std::make_unique<microvm::MicrovmIsolator>(); }

}  // namespace skiff
