#include "isolation/microvm/orphans.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "base/log.h"
#include "base/pidfd.h"
#include "base/scoped_dir.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {
namespace {

std::string ReadOrEmpty(const std::string& path) {
  Result<std::string> r = ReadFile(path);
  return r.ok() ? std::move(*r) : std::string();
}

// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot.
std::string ProcStartTime(pid_t pid) {
  std::string stat = ReadOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  auto rp = stat.rfind(')');
  if (rp == std::string::npos || rp + 2 > stat.size()) return {};
  std::istringstream in(stat.substr(rp + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; i++)
    if (i == 22) return field;
  return {};
}

std::string TrimLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string SelfOwnerTag() { return std::to_string(::getpid()) + ":" + ProcStartTime(::getpid()); }

namespace {
constexpr std::string_view kCreatingPrefix = ".creating-";
constexpr std::string_view kRemovingPrefix = ".removing-";
}  // namespace

std::string CreatingDirName(const std::string& owner_tag, const std::string& id) {
  return std::string(kCreatingPrefix) + owner_tag + "-" + id;
}

std::string RemovingDirName(const std::string& owner_tag, const std::string& id) {
  return std::string(kRemovingPrefix) + owner_tag + "-" + id;
}

std::string OwnerFromDirName(std::string_view name) {
  for (std::string_view prefix : {kCreatingPrefix, kRemovingPrefix}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    // "pid:start" has no '-'.
    std::string_view rest = name.substr(prefix.size());
    return std::string(rest.substr(0, rest.find('-')));
  }
  return {};
}

bool OwnerGone(const std::string& tag) {
  auto colon = tag.find(':');
  if (colon == std::string::npos) return true;
  pid_t pid = static_cast<pid_t>(std::atoi(tag.substr(0, colon).c_str()));
  if (pid <= 0) return true;
  return ProcStartTime(pid) != tag.substr(colon + 1);
}

std::string OwnerTagFromEnviron(std::string_view env) {
  const std::string prefix = std::string(kOwnerEnv) + "=";
  std::string tag;
  for (size_t i = 0; i < env.size();) {
    size_t end = env.find('\0', i);
    if (end == std::string_view::npos) end = env.size();
    std::string_view kv = env.substr(i, end - i);
    if (kv.substr(0, prefix.size()) == prefix) tag = std::string(kv.substr(prefix.size()));
    i = end + 1;
  }
  return tag;
}

void KillOrphanVmms() {
  using namespace std::chrono_literals;
  // Found by the owner tag in their environment; QEMU runs as an
  // unprivileged uid but root reads environ.
  if (auto d = ScopedDir::Open("/proc"); d.ok()) {
    while (const dirent* e = d->Next()) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      std::string tag = OwnerTagFromEnviron(ReadOrEmpty(std::string("/proc/") + e->d_name + "/environ"));
      if (tag.empty() || !OwnerGone(tag)) continue;
      auto p = Process::Open(pid);
      if (!p.ok()) continue;
      SKIFF_LOG(Warn) << "microvm: killing orphaned VMM pid " << pid;
      (void)p->Signal(SIGKILL);
      // Not our child: init reaps it. Forget the pidfd without waiting.
      (void)p->Wait(2000ms);
    }
  }
}

void RemoveStaleStateDirs(const std::string& state_root, int abandoned_after_s) {
  if (auto d = ScopedDir::Open(state_root); d.ok()) {
    std::vector<std::string> stale;
    while (const dirent* e = d->Next()) {
      std::string dir = state_root;
      dir.append("/").append(e->d_name);
      std::string owner_file = dir;
      owner_file.append("/").append(kOwnerFile);
      std::string tag = TrimLine(ReadOrEmpty(owner_file));
      if (std::string named = OwnerFromDirName(e->d_name); !named.empty()) {
        // Being created or removed: the owner is in the name.
        if (OwnerGone(named)) stale.push_back(std::move(dir));
        continue;
      }
      // Without an owner file the directory is either being created right
      // now by another process or was abandoned mid-creation; only the
      // latter is old.
      if (tag.empty()) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0) continue;
        if (::time(nullptr) - st.st_mtime < abandoned_after_s) continue;
      } else if (!OwnerGone(tag)) {
        continue;
      }
      stale.push_back(std::move(dir));
    }
    for (const auto& s : stale) {
      SKIFF_LOG(Info) << "microvm: removing stale state " << s;
      RemoveStateDir(s);
    }
  }
}

void CleanupOrphanVms(const std::string& state_root) {
  KillOrphanVmms();
  RemoveStaleStateDirs(state_root);
}

}  // namespace skiff::microvm
