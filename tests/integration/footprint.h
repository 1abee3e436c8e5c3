// What a sandbox could leave behind on the host, counted for no-trace
// tests: this process's agents, its mounts and fds, sandbox state
// directories and skiff cgroups.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/paths.h"

namespace skiff::testing_support {

inline std::set<int> Pids() {
  std::set<int> out;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d))
    if (int p = atoi(e->d_name); p > 0) out.insert(p);
  closedir(d);
  return out;
}

inline std::string Comm(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(f, s);
  return s;
}

inline int PPid(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string l; std::getline(f, l);)
    if (l.rfind("PPid:", 0) == 0) return std::stoi(l.substr(5));
  return -1;
}

// Agents of this process's manager: the jail starts them as its direct
// children, so agents of other test binaries running in parallel do not
// count.
inline std::set<int> OurAgents() {
  std::set<int> out;
  for (int p : Pids())
    if (Comm(p) == "skiff-agent" && PPid(p) == getpid()) out.insert(p);
  return out;
}

inline size_t CountLines(const std::string& path) {
  std::ifstream f(path);
  size_t n = 0;
  for (std::string l; std::getline(f, l);) ++n;
  return n;
}

inline size_t CountDir(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return 0;
  size_t n = 0;
  while (dirent* e = readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
  closedir(d);
  return n;
}

struct Footprint {
  size_t agents = 0, mounts = 0, fds = 0, state_dirs = 0, cgroups = 0;
  bool operator==(const Footprint&) const = default;
  std::string str() const {
    std::ostringstream o;
    o << "agents=" << agents << " mounts=" << mounts << " fds=" << fds << " state_dirs=" << state_dirs
      << " cgroups=" << cgroups;
    return o.str();
  }
};

inline Footprint Measure() {
  Footprint f;
  f.agents = OurAgents().size();
  f.mounts = CountLines("/proc/self/mountinfo");
  f.fds = CountDir("/proc/self/fd");
  f.state_dirs = CountDir(paths::RuntimeDir() + "/sandboxes");
  for (const char* c : {"memory", "pids", "cpu", "unified"})
    f.cgroups += CountDir(std::string("/sys/fs/cgroup/") + c + "/skiff");
  return f;
}

}  // namespace skiff::testing_support
