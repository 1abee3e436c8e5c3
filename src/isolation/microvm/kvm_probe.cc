#include "isolation/microvm/kvm_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/scoped_dir.h"
#include "base/sha256.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "isolation/microvm/microvm.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {

std::vector<std::string> LoadedKvmModules() {
  std::vector<std::string> out;
  auto add = [&out](std::string name) {
    if (name.rfind("kvm", 0) != 0) return;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  };
  if (auto d = ScopedDir::Open("/sys/module"); d.ok())
    while (const dirent* e = d->Next()) add(e->d_name);
  // /proc/modules: "<name> <size> <refs> ..." per line (absent in some
  // containers, where /sys/module still lists what is loaded).
  std::ifstream modules("/proc/modules");
  for (std::string line; std::getline(modules, line);) {
    std::istringstream fields(line);
    std::string name;
    if (fields >> name) add(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ProbeConsoleShowsBootEnd(const std::string& console) {
  if (console.find("Linux version") == std::string::npos) return false;
  if (console.find("KVM internal error") != std::string::npos) return false;
  for (const char* end : {"Kernel panic", "Run /init", "Freeing unused kernel"})
    if (console.find(end) != std::string::npos) return true;
  return false;
}

std::string KvmBootFailureNote(const std::string& probe_why, const std::vector<std::string>& modules) {
  bool pvm = std::find(modules.begin(), modules.end(), "kvm_pvm") != modules.end();
  if (!pvm) return "/dev/kvm opens but " + probe_why + "; VMs run under TCG emulation";
  return "/dev/kvm opens but is served by kvm_pvm (Pagetable-based Virtual Machine, a nested "
         "KVM that boots only PVM-enabled guest kernels; QEMU's -cpu host fails on it): " +
         probe_why +
         "; VMs run under TCG emulation. To use KVM, boot a PVM-enabled guest kernel "
         "(SKIFF_KERNEL), or run on a host with real KVM (kvm_intel/kvm_amd, or nested "
         "virtualisation enabled)";
}

namespace {

using namespace std::chrono_literals;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ')) i++;
  return s.substr(i);
}

// Only what prints, for the verdict.
std::string Printable(const std::string& in) {
  std::string out;
  for (char c : SanitizeUtf8(in)) {
    if (c == '\r') continue;
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') continue;
    out += c;
  }
  return Trim(out);
}

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
// end of its boot on the console (ProbeConsoleShowsBootEnd). A /dev/kvm that
// opens is not enough: nested or half-working KVM (seen on cloud VMs)
// creates VMs whose guests never run, and every sandbox would then time out
// instead of falling back to TCG.
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
    Result<std::string> r = ReadFile(cache);
    std::string cached = r.ok() ? Trim(*r) : std::string();
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
  SpawnOptions options;
  options.stdout_fd = wr.get();
  options.stderr_fd = wr.get();
  Result<Process> proc = Spawn({qemu,
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
                                "console=ttyS0 panic=-1 reboot=t"},
                               options);
  wr.reset();
  if (!proc.ok()) {
    *why = "cannot start QEMU";
    return false;
  }
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
  (void)proc->Signal(SIGKILL);
  (void)proc->Wait(std::nullopt);
  if (!booted) {
    std::string tail = out.substr(out.size() > 300 ? out.size() - 300 : 0);
    *why = std::string(out.find("KVM internal error") != std::string::npos
                           ? "a guest kernel stopped with a KVM internal error under -accel kvm -cpu host"
                           : "a guest kernel did not boot under -accel kvm -cpu host within 10 s") +
           (tail.empty() ? std::string() : " (qemu: " + Printable(tail) + ")");
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

}  // namespace skiff::microvm
