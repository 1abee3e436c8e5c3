#include "base/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace skiff::paths {
namespace {
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}
}  // namespace

std::string HostRuntimeDir() {
  if (geteuid() == 0) return "/run/skiff";
  if (auto v = Env("XDG_RUNTIME_DIR"); !v.empty()) return v + "/skiff";
  return "/tmp/skiff-" + std::to_string(geteuid());
}

std::string RuntimeDir() {
  if (auto v = Env("SKIFF_RUNTIME_DIR"); !v.empty()) return v;
  return HostRuntimeDir();
}

std::string DataDir() {
  if (auto v = Env("XDG_DATA_HOME"); !v.empty()) return v + "/skiff";
  if (auto v = Env("HOME"); !v.empty()) return v + "/.local/share/skiff";
  return "/var/lib/skiff";
}

std::string CacheDir() {
  if (auto v = Env("SKIFF_CACHE_DIR"); !v.empty()) return v;
  return "/var/cache/skiff";
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string AgentBinary() {
  if (auto v = Env("SKIFF_AGENT"); !v.empty()) return v;
  // Installed side by side, or in a build tree (cmd/skiff/ next to cmd/skiff-agent/).
  std::string self = SelfDir();
  for (const std::string& c :
       {self + "/skiff-agent", self + "/../skiff-agent/skiff-agent", self + "/../cmd/skiff-agent/skiff-agent",
        self + "/../../cmd/skiff-agent/skiff-agent"})
    if (::access(c.c_str(), X_OK) == 0) return c;
  return self + "/skiff-agent";
}

}  // namespace skiff::paths
