#include "isolation/microvm/kvm_probe.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace skiff::microvm {

std::vector<std::string> LoadedKvmModules() {
  std::vector<std::string> out;
  auto add = [&out](std::string name) {
    if (name.rfind("kvm", 0) != 0) return;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  };
  if (DIR* d = ::opendir("/sys/module")) {
    while (dirent* e = ::readdir(d)) add(e->d_name);
    ::closedir(d);
  }
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

}  // namespace skiff::microvm
