#include "isolation/jail/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/file_io.h"
#include "base/log.h"

namespace skiff::jail {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

std::string Join(const std::string& a, const std::string& b) {
  std::string r = a;
  while (!r.empty() && r.back() == '/') r.pop_back();
  if (b.empty() || b == "/") return r;
  if (b.front() != '/') r.push_back('/');
  r += b;
  while (!r.empty() && r.back() == '/') r.pop_back();
  return r;
}

struct MountEntry {
  std::string root, mountpoint, fstype, superopts;
};

std::vector<MountEntry> CgroupMounts() {
  std::vector<MountEntry> out;
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto pre = Split(line.substr(0, dash), ' ');
    auto post = Split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    if (post[0] != "cgroup" && post[0] != "cgroup2") continue;
    out.push_back({pre[3], pre[4], post[0], post[2]});
  }
  return out;
}

bool HasWord(const std::string& list, char sep, const std::string& word) {
  for (const auto& w : Split(list, sep))
    if (w == word) return true;
  return false;
}

bool MkdirWritable(const std::string& dir, std::string* why) {
  if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    *why = "mkdir(" + dir + "): " + std::string(ErrnoName(errno));
    return false;
  }
  if (::access(dir.c_str(), W_OK) < 0) {
    *why = "access(" + dir + "): " + std::string(ErrnoName(errno));
    return false;
  }
  return true;
}

}  // namespace

std::vector<int> SandboxCgroup::procs_fds() const {
  std::vector<int> fds;
  for (const auto& f : procs_) fds.push_back(f.get());
  return fds;
}

void SandboxCgroup::CloseSetupFds() { procs_.clear(); }

namespace {

// Whether the freezer knob `knob` reports every process stopped.
bool FrozenNow(const std::string& knob) {
  if (knob.ends_with("/freezer.state")) {
    Result<std::string> st = ReadFile(knob);
    return st.ok() && st->starts_with("FROZEN");
  }
  Result<std::string> ev = ReadFile(knob.substr(0, knob.rfind('/')) + "/cgroup.events");
  return ev.ok() && (ev->starts_with("frozen 1") || ev->find("\nfrozen 1") != std::string::npos);
}

void SignalAll(const std::string& dir, int sig) {
  std::ifstream procs(dir + "/cgroup.procs");
  pid_t pid;
  while (procs >> pid) {
    // pidfd: a reused pid is never signalled once the process is gone.
    int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pfd < 0) continue;
    ::syscall(SYS_pidfd_send_signal, pfd, sig, nullptr, 0);
    ::close(pfd);
  }
}

}  // namespace

Status SandboxCgroup::Freeze(std::chrono::milliseconds timeout) {
  using namespace std::chrono_literals;
  if (freeze_knob_.empty())
    return Platform("isolation",
                    "jail: pause needs a cgroup freezer (a v1 freezer hierarchy or cgroup v2), and this host "
                    "has neither");
  bool v1 = freeze_knob_.ends_with("/freezer.state");
  SKIFF_RETURN_IF_ERROR(WriteKnob(freeze_knob_, v1 ? "FROZEN" : "1"));
  // v1 reports FREEZING until every task has stopped (a task in an
  // uninterruptible sleep can hold it there); v2 flips "frozen" in events.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = 100us;
  while (!FrozenNow(freeze_knob_)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      (void)Thaw();
      return Platform("isolation", "jail: the sandbox's processes did not all stop within " +
                                       std::to_string(timeout.count()) + " ms (left running)");
    }
    // v1 retries a partial freeze only when FROZEN is written again.
    if (v1) (void)WriteKnob(freeze_knob_, "FROZEN");
    std::this_thread::sleep_for(delay);
    if (delay < 10ms) delay *= 2;
  }
  return OkStatus();
}

namespace {

// The unsigned number <file> holds (first line); "max" reads as UINT64_MAX.
Result<uint64_t> ReadCount(const std::string& file) {
  SKIFF_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::string_view v(text);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
  if (v == "max") return UINT64_MAX;
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty())
    return Platform("metrics", "jail: " + file + " holds no count");
  return n;
}

}  // namespace

Result<std::pair<uint64_t, uint64_t>> SandboxCgroup::Memory() const {
  if (memory_dir_.empty()) return Platform("metrics", "jail: the sandbox has no memory cgroup");
  SKIFF_ASSIGN_OR_RETURN(uint64_t used,
                         ReadCount(memory_dir_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")));
  SKIFF_ASSIGN_OR_RETURN(uint64_t limit,
                         ReadCount(memory_dir_ + (v2_ ? "/memory.max" : "/memory.limit_in_bytes")));
  return std::make_pair(used, limit);
}

Result<uint64_t> SandboxCgroup::CpuNanos() const {
  if (cpuacct_dir_.empty())
    return Platform("metrics", "jail: no cgroup v1 cpuacct hierarchy on this host to account CPU time in");
  if (!v2_) return ReadCount(cpuacct_dir_ + "/cpuacct.usage");
  SKIFF_ASSIGN_OR_RETURN(std::string stat, ReadFile(cpuacct_dir_ + "/cpu.stat"));
  for (const std::string& line : Split(stat, '\n')) {
    if (!line.starts_with("usage_usec ")) continue;
    uint64_t us = 0;
    auto [end, ec] = std::from_chars(line.data() + 11, line.data() + line.size(), us);
    if (ec == std::errc()) return us * 1000;
  }
  return Platform("metrics", "jail: " + cpuacct_dir_ + "/cpu.stat has no usage_usec");
}

Status SandboxCgroup::Thaw() {
  if (freeze_knob_.empty()) return OkStatus();
  return WriteKnob(freeze_knob_, freeze_knob_.ends_with("/freezer.state") ? "THAWED" : "0");
}

void ThawCgroupDir(const std::string& dir) {
  if (::access((dir + "/freezer.state").c_str(), F_OK) == 0)
    (void)WriteKnob(dir + "/freezer.state", "THAWED");
  if (::access((dir + "/cgroup.freeze").c_str(), F_OK) == 0) (void)WriteKnob(dir + "/cgroup.freeze", "0");
}

void SandboxCgroup::Remove() {
  CloseSetupFds();
  // A paused sandbox: queue the kill first, then thaw, so no process runs
  // a single instruction of its own code after the stop began.
  if (!freeze_knob_.empty() && !dirs_.empty()) {
    SignalAll(dirs_.front(), SIGKILL);
    (void)Thaw();
  }
  freeze_knob_.clear();
  for (const auto& d : dirs_)
    if (!KillAndRemoveCgroup(d)) {
      SKIFF_LOG(Warn) << "jail: could not remove cgroup " << d;
    }
  dirs_.clear();
}

bool KillAndRemoveCgroup(const std::string& dir) {
  using namespace std::chrono_literals;
  // A loaded host can take seconds to free a dying memory cgroup; giving up
  // early would leak the directory, so keep trying for up to 10 s.
  auto delay = 200us;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    // Still populated: kill what is listed and give the kernel a moment (a
    // frozen cgroup is thawed so the kill is delivered).
    SignalAll(dir, SIGKILL);
    ThawCgroupDir(dir);
    std::this_thread::sleep_for(delay);
    if (delay < 50ms) delay *= 2;
  }
  return false;
}

std::string_view Cgroups::kind_name() const {
  switch (kind_) {
    case Kind::kV1:
      return "v1";
    case Kind::kV2:
      return "v2";
    default:
      return "none";
  }
}

nlohmann::json Cgroups::Describe() const {
  nlohmann::json j{{"hierarchy", std::string(kind_name())}, {"writable", kind_ != Kind::kNone}};
  if (kind_ == Kind::kNone) {
    j["note"] =
        "no writable cgroup hierarchy with memory and pids controllers: limits fall back "
        "to rlimits (" +
        why_ + ")";
  } else {
    j["dirs"] = bases_;
    if (kind_ == Kind::kV1) j["memsw"] = memsw_;
    j["freezer"] = kind_ == Kind::kV2 || !freezer_base_.empty();
  }
  return j;
}

Cgroups Cgroups::Detect() {
  Cgroups cg;
  auto mounts = CgroupMounts();
  // hierarchy id -> (controllers, path) from /proc/self/cgroup.
  std::string v2_path;
  std::map<std::string, std::string> v1_path;  // controller -> path
  {
    std::ifstream f("/proc/self/cgroup");
    std::string line;
    while (std::getline(f, line)) {
      auto a = line.find(':');
      auto b = line.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (line.substr(0, a) == "0" && ctrls.empty()) {
        v2_path = path;
        continue;
      }
      for (const auto& c : Split(ctrls, ',')) v1_path[c] = path;
    }
  }
  std::string why_v2 = "no cgroup2 mount";
  // cgroup v2 first, when it has the controllers we need.
  for (const auto& m : mounts) {
    if (m.fstype != "cgroup2" || m.root != "/") continue;
    std::string self = Join(m.mountpoint, v2_path.empty() ? "/" : v2_path);
    Result<std::string> read = ReadFile(self + "/cgroup.controllers");
    std::string ctrls = read.ok() ? std::move(*read) : std::string();
    while (!ctrls.empty() && ctrls.back() == '\n') ctrls.pop_back();
    if (!HasWord(ctrls, ' ', "memory") || !HasWord(ctrls, ' ', "pids")) {
      why_v2 = "cgroup2 at " + m.mountpoint + " offers no memory/pids controllers";
      continue;
    }
    std::string enable = "+memory +pids";
    if (HasWord(ctrls, ' ', "cpu")) enable += " +cpu";
    std::string base = self + "/skiff";
    if (!MkdirWritable(base, &why_v2)) continue;
    // Our own cgroup must delegate the controllers to skiff/, and skiff/ to
    // the sandboxes (fails when our cgroup holds processes and is not root).
    if (!WriteKnob(self + "/cgroup.subtree_control", enable).ok() ||
        !WriteKnob(base + "/cgroup.subtree_control", enable).ok()) {
      why_v2 = "cannot enable controllers below " + self;
      continue;
    }
    cg.kind_ = Kind::kV2;
    cg.bases_ = {base};
    return cg;
  }
  // cgroup v1: memory and pids required, cpu optional.
  std::string why_v1;
  std::vector<std::string> bases;
  bool memsw = false;
  std::string freezer_base, cpuacct_base;
  for (const char* ctrl : {"memory", "pids", "cpu", "freezer", "cpuacct"}) {
    const bool optional = std::string_view(ctrl) != "memory" && std::string_view(ctrl) != "pids";
    std::string found;
    for (const auto& m : mounts) {
      if (m.fstype != "cgroup" || m.root != "/" || !HasWord(m.superopts, ',', ctrl)) continue;
      auto it = v1_path.find(ctrl);
      std::string base = Join(m.mountpoint, it == v1_path.end() ? "/" : it->second) + "/skiff";
      std::string why;
      if (MkdirWritable(base, &why)) {
        found = base;
        break;
      }
      why_v1 = why;
    }
    if (found.empty()) {
      if (optional) continue;
      if (why_v1.empty()) why_v1 = std::string("no cgroup v1 ") + ctrl + " hierarchy";
      bases.clear();
      break;
    }
    if (std::string_view(ctrl) == "memory")
      memsw = ::access((found + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0;
    if (std::string_view(ctrl) == "freezer") freezer_base = found;
    if (std::string_view(ctrl) == "cpuacct") cpuacct_base = found;
    // Co-mounted controllers (cpu,cpuacct) share one directory: made once.
    if (std::find(bases.begin(), bases.end(), found) == bases.end()) bases.push_back(found);
  }
  if (!bases.empty()) {
    cg.kind_ = Kind::kV1;
    cg.bases_ = bases;
    cg.memsw_ = memsw;
    cg.freezer_base_ = freezer_base;
    cg.cpuacct_base_ = cpuacct_base;
    return cg;
  }
  cg.why_ = why_v2 + "; " + why_v1;
  return cg;
}

Result<SandboxCgroup> Cgroups::Create(const std::string& id, const CgroupLimits& lim) const {
  SandboxCgroup sc;
  if (kind_ == Kind::kNone) return sc;
  for (const auto& base : bases_) {
    std::string dir = base;
    dir.append("/").append(id);
    if (::mkdir(dir.c_str(), 0755) < 0) return Error::Sys(Code::kS300, "mkdir", dir, errno);
    sc.dirs_.push_back(dir);
    if (kind_ == Kind::kV2 && ::access((dir + "/cgroup.freeze").c_str(), F_OK) == 0)
      sc.freeze_knob_ = dir + "/cgroup.freeze";
    if (kind_ == Kind::kV1 && base == freezer_base_) sc.freeze_knob_ = dir + "/freezer.state";
    sc.v2_ = kind_ == Kind::kV2;
    if (kind_ == Kind::kV2 || base == bases_.front()) sc.memory_dir_ = dir;  // v1: memory comes first
    if (kind_ == Kind::kV2 || base == cpuacct_base_) sc.cpuacct_dir_ = dir;
    if (kind_ == Kind::kV2) {
      SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/memory.max", std::to_string(lim.memory_bytes)));
      (void)WriteKnob(dir + "/memory.swap.max", "0");
      SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/pids.max", std::to_string(lim.pids_max)));
      if (lim.cpus > 0 && ::access((dir + "/cpu.max").c_str(), F_OK) == 0)
        SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/cpu.max", std::to_string(lim.cpus * 100000ull) + " 100000"));
    } else {
      if (::access((dir + "/memory.limit_in_bytes").c_str(), F_OK) == 0) {
        SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/memory.limit_in_bytes", std::to_string(lim.memory_bytes)));
        if (memsw_)
          SKIFF_RETURN_IF_ERROR(
              WriteKnob(dir + "/memory.memsw.limit_in_bytes", std::to_string(lim.memory_bytes)));
      }
      if (::access((dir + "/pids.max").c_str(), F_OK) == 0)
        SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/pids.max", std::to_string(lim.pids_max)));
      if (lim.cpus > 0 && ::access((dir + "/cpu.cfs_quota_us").c_str(), F_OK) == 0) {
        SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/cpu.cfs_period_us", "100000"));
        SKIFF_RETURN_IF_ERROR(WriteKnob(dir + "/cpu.cfs_quota_us", std::to_string(lim.cpus * 100000ull)));
      }
    }
    std::string procs = dir + "/cgroup.procs";
    int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Error::Sys(Code::kS300, "open", procs, errno);
    sc.procs_.emplace_back(fd);
  }
  return sc;
}

}  // namespace skiff::jail
