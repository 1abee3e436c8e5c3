#include "isolation/jail/uid_slots.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/pidfd.h"
#include "base/scoped_dir.h"

namespace skiff::jail {
namespace {

bool ParseCount(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// SIGKILLs every process in the uid range until none is left (a sandbox's
// processes may still fork while they are being killed). False if some
// survive a few rounds.
bool KillUidRange(uint64_t lo, uint64_t hi) {
  for (int round = 0; round < 20; ++round) {
    auto procs = ProcessesInUidRange(lo, hi);
    if (procs.empty()) return true;
    for (auto [pid, uid] : procs) (void)KillIfUidInRange(pid, lo, hi);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (round + 1)));
  }
  return ProcessesInUidRange(lo, hi).empty();
}

}  // namespace

Result<std::vector<IdRange>> ParseSubidFile(std::string_view text, std::string_view file) {
  std::vector<IdRange> out;
  size_t lineno = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lineno;
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](const char* why) {
      return Platform("isolation", std::string(file) + ":" + std::to_string(lineno) + ": " + why +
                                       " (want name:first:count)");
    };
    size_t a = line.find(':');
    size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos || line.find(':', b + 1) != std::string_view::npos)
      return bad("malformed line");
    if (a == 0) return bad("missing user");
    uint64_t first = 0, count = 0;
    if (!ParseCount(line.substr(a + 1, b - a - 1), &first)) return bad("bad first id");
    if (!ParseCount(line.substr(b + 1), &count) || count == 0) return bad("bad count");
    if (first + count < first) return bad("range overflows");
    out.emplace_back(first, first + count);
  }
  return out;
}

Result<std::vector<IdRange>> ReadSubidRanges() {
  std::vector<IdRange> out;
  for (const char* f : {"/etc/subuid", "/etc/subgid"}) {
    std::ifstream in(f);
    if (!in) {
      if (errno == ENOENT) continue;
      return Error::Sys(Code::kS300, "open", f, errno);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    SKIFF_ASSIGN_OR_RETURN(auto ranges, ParseSubidFile(ss.str(), f));
    out.insert(out.end(), ranges.begin(), ranges.end());
  }
  return out;
}

// Zombies are dead already (they wait for a parent that may be slow to reap
// them, such as a reparented sandbox init) and are left out.
std::vector<std::pair<pid_t, uint64_t>> ProcessesInUidRange(uint64_t lo, uint64_t hi) {
  std::vector<std::pair<pid_t, uint64_t>> out;
  Result<ScopedDir> d = ScopedDir::Open("/proc");
  if (!d.ok()) return out;
  while (const dirent* e = d->Next()) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::ifstream st(std::string("/proc/") + e->d_name + "/status");
    std::string line;
    while (std::getline(st, line))
      if (line.rfind("State:", 0) == 0) {
        if (line.find('Z') != std::string::npos) break;
      } else if (line.rfind("Uid:", 0) == 0) {
        uint64_t uid = std::strtoull(line.c_str() + 4, nullptr, 10);
        if (uid >= lo && uid < hi) out.emplace_back(static_cast<pid_t>(std::atoi(e->d_name)), uid);
        break;
      }
  }
  return out;
}

// The uid is read again once a pidfd pins the process: the pid found by a
// scan may have exited and been reused by an unrelated process meanwhile.
bool KillIfUidInRange(pid_t pid, uint64_t lo, uint64_t hi) {
  auto p = Process::Open(pid);
  if (!p.ok()) return false;
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("Uid:", 0) == 0) {
      uint64_t uid = std::strtoull(line.c_str() + 4, nullptr, 10);
      if (uid < lo || uid >= hi) return false;
      return p->Signal(SIGKILL).ok();
    }
  return false;
}

std::string UidSlots::LockPath(uint32_t slot) const {
  // Named by the range's first uid, so isolators with other bases never
  // share a lock for different ranges.
  return lock_dir_ + "/uids-" + std::to_string(FirstUid(slot)) + ".lock";
}

bool UidSlots::Allowed(uint32_t slot) const {
  uint64_t lo = FirstUid(slot), hi = lo + kRangeSize;
  if (hi > 0xfffffffeull) return false;
  for (auto [a, b] : reserved_)
    if (lo < b && a < hi) return false;
  return true;
}

bool UidSlots::HeldHere(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  return used_.count(slot) != 0;
}

Result<UidSlots::Slot> UidSlots::Acquire() {
  std::lock_guard<std::mutex> g(mu_);
  for (uint32_t i = 0; i < slots_; ++i) {
    uint32_t slot = (hint_ + i) % slots_;
    if (used_.count(slot) || !Allowed(slot)) continue;
    std::string path = LockPath(slot);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Error::Sys(Code::kS300, "open", path, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) < 0) {
      ::close(fd);
      continue;
    }
    // A slot's lock file holds a mark while a sandbox uses the range and
    // is emptied once its processes are gone. A mark found here means the
    // last holder died with its sandbox still running: those processes
    // must not share their uids with a new sandbox.
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      uint64_t lo = FirstUid(slot);
      if (!KillUidRange(lo, lo + kRangeSize)) {
        SKIFF_LOG(Warn) << "jail: uid range of slot " << slot << " still has processes; skipping it";
        ::close(fd);
        continue;
      }
    }
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, "1\n", 2, 0) != 2) {
      int err = errno;
      ::close(fd);
      return Error::Sys(Code::kS300, "write", path, err);
    }
    used_.insert(slot);
    hint_ = slot + 1;
    return Slot{slot, static_cast<uint32_t>(FirstUid(slot)), UniqueFd(fd)};
  }
  return Error(Code::kS400, "resource limit: no free jail uid range");
}

void UidSlots::Release(Slot& s) {
  if (!s.lock) return;
  (void)!::ftruncate(s.lock.get(), 0);
  std::lock_guard<std::mutex> g(mu_);
  s.lock.reset();
  used_.erase(s.slot);
}

}  // namespace skiff::jail
