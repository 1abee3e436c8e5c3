#include "isolation/microvm/snapshot_template.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "base/file_io.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/sha256.h"
#include "isolation/microvm/kernel_cmdline.h"
#include "isolation/microvm/microvm.h"
#include "isolation/microvm/migration.h"
#include "isolation/microvm/qmp.h"
#include "isolation/microvm/template_store.h"
#include "isolation/microvm/vm_restore.h"
#include "protocol/hello.h"

namespace skiff::microvm {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSnapshotFormat = "skiff-snapshot-1";
constexpr int kMaxTemplates = 8;
constexpr auto kSnapshotTimeout = 60s;

// Keys whose template could not be built or restored in this process.
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

// Boots the template, waits for its agent, saves it to <dir>/state and
// describes it in <dir>/meta.json.
Status BuildTemplate(const Parts& parts, const LaunchSpec& spec, const std::string& dir) {
  SKIFF_ASSIGN_OR_RETURN(Launched l, Boot(spec, parts));
  auto deadline = Clock::now() + kSnapshotTimeout;
  Qmp qmp(std::move(l.qmp));
  SKIFF_RETURN_IF_ERROR(qmp.Handshake(deadline));
  SKIFF_RETURN_IF_ERROR(qmp.Execute("stop", {}, deadline));
  std::string state = dir + "/state";
  UniqueFd out(::open(state.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return Error::Sys(Code::kS300, "open", state, errno);
  SKIFF_RETURN_IF_ERROR(MigrateToFd(qmp, out.get(), deadline));
  (void)l.proc.Signal(SIGKILL);
  (void)l.proc.Wait(std::nullopt);
  if (::fsync(out.get()) != 0) return Error::Sys(Code::kS300, "fsync", state, errno);
  out.reset();
  nlohmann::json meta = {{"format", kSnapshotFormat},       {"cpus", spec.cpus},
                         {"memory_mb", spec.memory_mb},     {"accel", spec.kvm ? "kvm" : "tcg"},
                         {"block_image", spec.block_image}, {"append", spec.append}};
  return WriteFileAtomic(dir + "/meta.json", meta.dump() + "\n", 0644);
}

// Restores the template in `dir` (held by the caller's lease).
Result<Launched> RestoreLease(const Parts& parts, const LaunchSpec& spec, const std::string& dir,
                              const SandboxPolicy& policy, bool* killed) {
  {
    UniqueFd in(::open((dir + "/state").c_str(), O_RDONLY | O_CLOEXEC));
    if (in) TemplateStore::Touch(in.get());
  }
  return RestoreVm(parts, spec, dir + "/state", GuestHostname(policy.hostname), killed);
}

}  // namespace

std::string FileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return path + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

bool SnapshotsEnabled() { return Env("SKIFF_MICROVM_SNAPSHOT") != "0"; }

std::string SnapshotRoot() { return paths::CacheDir() + "/microvm/snapshots"; }

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

std::string SnapshotKey(const Parts& parts, const std::string& block_image, const LaunchSpec& spec) {
  std::string key = kSnapshotFormat;
  for (const std::string& f : {parts.qemu_real, parts.kernel, block_image}) {
    std::string id = FileIdentity(f);
    if (id.empty()) return {};
    key += "|" + id;
  }
  // The initramfs is named by the agent's digest (its content), and two
  // processes may write it at once: its path, not its inode, identifies it.
  key += "|" + parts.initrd;
  struct utsname u {};
  ::uname(&u);
  Result<std::string> cpuinfo_r = ReadFile("/proc/cpuinfo");
  std::string cpuinfo = cpuinfo_r.ok() ? *cpuinfo_r : std::string();
  auto flags = cpuinfo.find("\nflags");
  key += std::string("|") + u.release + "|" + u.version + "|" +
         (flags == std::string::npos ? "" : cpuinfo.substr(flags, cpuinfo.find('\n', flags + 1) - flags));
  for (const auto& arg : MachineArgs(MachineOf(spec))) key += "|" + arg;
  return Sha256Hex(key).substr(0, 24);
}

std::optional<Launched> RestoreFromTemplate(const Parts& parts, const LaunchSpec& spec,
                                            const SandboxPolicy& policy, int64_t* template_ms) {
  *template_ms = -1;
  // Networked VMs always boot (their NIC and its namespace are per sandbox).
  if (policy.network || !SnapshotsEnabled() || Env("SKIFF_MICROVM_DEBUG") == "1") return std::nullopt;
  SandboxPolicy tpl = TemplatePolicy(policy);
  LaunchSpec tpl_spec = spec;
  tpl_spec.append = KernelCmdline(tpl, spec.kvm);
  std::string key = SnapshotKey(parts, tpl.rootfs.block_image, tpl_spec);
  if (key.empty() || KeyIsBad(key)) return std::nullopt;

  TemplateStore store(SnapshotRoot(), kMaxTemplates);
  auto build = [&](const std::string& dir) {
    auto tb = Clock::now();
    LaunchSpec ts = tpl_spec;
    ts.id = "tpl-" + key.substr(0, 16) + "-" + std::to_string(::getpid() % 100000);
    ts.qmp = true;
    // The migration stream is written by the VMM: at most the guest's RAM
    // plus device state. Only the template (no user code) gets this.
    ts.max_file_bytes = (uint64_t{policy.memory_mb} << 20) + (64u << 20);
    Status st = BuildTemplate(parts, ts, dir);
    *template_ms = Ms(Clock::now() - tb);
    if (st.ok())
      SKIFF_LOG(Info) << "microvm: saved a template for " << policy.memory_mb << " MiB, " << policy.cpus
                      << " vCPU in " << *template_ms << " ms";
    return st;
  };
  Status st = OkStatus();
  bool killed = false;
  if (Result<TemplateLease> lease = store.Acquire(key, build); !lease.ok()) {
    st = std::move(lease).error();
  } else if (Result<Launched> r = RestoreLease(parts, tpl_spec, lease->dir(), policy, &killed); !r.ok()) {
    st = std::move(r).error();
    if (killed) {
      // Not the template's fault: keep it, and snapshots, for the next create.
      SKIFF_LOG(Warn) << "microvm: the VMM was killed while restoring a snapshot; booting instead: "
                      << st.error().message();
      return std::nullopt;
    }
    // A template that does not restore is discarded (rebuilt next time).
    lease->Discard();
  } else {
    return std::move(*r);
  }
  MarkKeyBad(key);
  SKIFF_LOG(Warn) << "microvm: snapshots disabled for this shape, booting instead: " << st.error().message();
  return std::nullopt;
}

}  // namespace skiff::microvm
