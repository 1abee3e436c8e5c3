#include "isolation/microvm/vm_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>  // renameat2
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/find_executable.h"
#include "base/fs_util.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/text.h"
#include "isolation/microvm/initramfs.h"
#include "isolation/microvm/microvm.h"
#include "isolation/microvm/orphans.h"
#include "isolation/microvm/vmm_launch.h"

namespace skiff::microvm {
namespace {

using namespace std::chrono_literals;

constexpr size_t kReportTail = 4096;
// Per-VM VMM uids: kVmmUidBase + hash(id) % kVmmUidRange, so that two VMs
// rarely share a uid (one compromised VMM cannot signal or ptrace another).
constexpr uint32_t kVmmUidBase = 2100000000;
constexpr uint32_t kVmmUidRange = 1000000;

uint32_t Fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ')) i++;
  return s.substr(i);
}

// The end of a log, printable, for S300 messages ("" when it cannot be read).
std::string PrintableTail(const std::string& path, size_t max) {
  Result<std::string> tail = ReadFileTail(path, max);
  if (!tail.ok()) return {};
  std::string s = SanitizeUtf8(*tail);
  std::string out;
  for (char c : s) {
    if (c == '\r') continue;
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') continue;
    out += c;
  }
  return Trim(out);
}

// `head`, then "; qemu: <tail>" and "; console: <tail>" of `state_dir`.
std::string WithLogTails(std::string head, const std::string& state_dir) {
  std::string qemu = PrintableTail(state_dir + "/qemu.log", kReportTail / 2);
  std::string console = PrintableTail(state_dir + "/console.log", kReportTail);
  if (!qemu.empty()) head += "; qemu: " + qemu;
  if (!console.empty()) head += "; console: " + console;
  return head;
}

}  // namespace

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

int64_t Ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

std::string StateRoot() { return paths::RuntimeDir() + "/microvm"; }

void RemoveTreeLogged(const std::string& path) {
  if (auto st = RemoveTree(path); !st.ok()) SKIFF_LOG(Warn) << "microvm: " << st.error().message();
}

void RemoveStateDir(const std::string& path) {
  auto slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (!OwnerFromDirName(name).empty()) return RemoveTreeLogged(path);
  std::string removing = parent + "/" + RemovingDirName(SelfOwnerTag(), name);
  if (::rename(path.c_str(), removing.c_str()) != 0) {
    if (errno != ENOENT) SKIFF_LOG(Warn) << "microvm: rename " << path << ": " << std::strerror(errno);
    return RemoveTreeLogged(path);
  }
  RemoveTreeLogged(removing);
}

StateDir::StateDir(StateDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
StateDir& StateDir::operator=(StateDir&& o) noexcept {
  if (this != &o) {
    Reset();
    path_ = std::exchange(o.path_, {});
  }
  return *this;
}
std::string StateDir::Release() { return std::exchange(path_, {}); }
void StateDir::Reset() {
  if (!path_.empty()) RemoveStateDir(path_);
  path_.clear();
}

std::string QemuBinary() {
  if (auto v = Env("SKIFF_QEMU"); !v.empty()) return v;
  return FindExecutable("qemu-system-x86_64").value_or("/usr/bin/qemu-system-x86_64");
}

std::string KernelPath() {
  if (auto v = Env("SKIFF_KERNEL"); !v.empty()) return v;
  return paths::CacheDir() + "/kernel/current/vmlinux";
}

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
  std::string owner = SelfOwnerTag();
  // Made under a name carrying the owner tag, and renamed to the id only
  // with its owner file in it: a daemon killed at any point leaves a
  // directory a cleanup can attribute (orphans.h, CreatingDirName).
  {
    std::string creating = StateRoot() + "/" + CreatingDirName(owner, spec.id);
    if (::mkdir(creating.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", creating, errno);
    StateDir cleanup(creating);
    // Written whole and renamed into place: a concurrent cleanup never
    // reads half a tag (which would name a process that is gone).
    SKIFF_RETURN_IF_ERROR(WriteFileAtomic(creating + "/" + kOwnerFile, owner + "\n", 0644));
    if (::renameat2(AT_FDCWD, creating.c_str(), AT_FDCWD, state.c_str(), RENAME_NOREPLACE) != 0)
      return Error::Sys(Code::kS300, "rename", state, errno);
    cleanup.Release();
  }
  l.state = StateDir(state);
  std::string vmroot = state + "/vmm-root";
  if (::mkdir(vmroot.c_str(), 0755) != 0) return Error::Sys(Code::kS300, "mkdir", vmroot, errno);
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
  Result<FdPair> chan = MakeSocketPair();
  if (!chan.ok()) return std::move(chan).error().With("agent channel");
  l.chan = std::move(chan->first);
  UniqueFd vm_end = std::move(chan->second);
  UniqueFd qmp_vm_end;
  if (spec.qmp) {
    Result<FdPair> qmp = MakeSocketPair();
    if (!qmp.ok()) return std::move(qmp).error().With("qmp");
    l.qmp = std::move(qmp->first);
    qmp_vm_end = std::move(qmp->second);
  }

  // network: true: a host-owned namespace holding slirp4netns' tap, the
  // guest's tap and a filtering bridge between them (docs/security.md#networking-network-true). QEMU only
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
  plan.env = {"PATH=/usr/bin", std::string(kOwnerEnv) + "=" + owner, "SKIFF_VM_ID=" + spec.id};
  plan.argv = QemuArgv(cmd);

  SKIFF_ASSIGN_OR_RETURN(l.proc, LaunchVmm(plan));
  l.launched = Clock::now();
  return l;
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
  std::string msg = WithLogTails(failure, l.state.path());
  if (msg.size() > kReportTail + 200) msg = msg.substr(msg.size() - kReportTail);
  return Platform("boot", msg);
}

Result<Launched> Boot(const LaunchSpec& spec, const Parts& parts) {
  SKIFF_ASSIGN_OR_RETURN(Launched l, Launch(spec, parts));
  std::string failure = WaitForAgent(l, l.launched + kBootTimeout);
  if (!failure.empty()) return BootFailure(l, failure);
  return l;
}

std::string VmReport(const std::string& head, const std::string& state_dir) {
  std::string out = WithLogTails(head, state_dir);
  if (out.size() > kReportTail)
    out = out.substr(0, 200) + " … " + out.substr(out.size() - (kReportTail - 210));
  return out;
}

}  // namespace skiff::microvm
