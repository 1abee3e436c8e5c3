#include "agent/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/fs_request.h"
#include "agent/spawn_failure.h"
#include "base/child_report.h"
#include "base/raw_ids.h"

namespace skiff::agent {
namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The signals whose disposition is not SIG_DFL in the agent, 0-terminated.
// Computed on the first call, before any child exists (Spawn calls it in
// the parent); the agent sets its dispositions once at start-up
// (PrepareProcess) and never changes them afterwards.
const int* ChangedSignals() {
  static const std::vector<int> list = [] {
    std::vector<int> v;
    for (int s = 1; s < NSIG; ++s) {
      struct sigaction cur {};
      if (::sigaction(s, nullptr, &cur) != 0) continue;  // invalid numbers
      if (cur.sa_handler != SIG_DFL) v.push_back(s);
    }
    v.push_back(0);
    return v;
  }();
  return list.data();
}

// Post-clone: reports a failed step through the ChildReportPipe and exits
// 127. Async-signal-safe.
[[noreturn]] void Fail(int report_w, SpawnStep step, int err, const char* call,
                       const char* object = "") noexcept {
  ReportChildFailure(report_w, err, call, object, static_cast<int>(step));
}

[[noreturn]] void ChildMain(const SpawnRequest& req, const confine::ChildPolicy* policy, char* const* argv,
                            char* const* envp, const std::vector<const char*>& candidates, int in_r,
                            int out_w, int err_w, int tty, int report_w) {
  // Async-signal-safe from here to execve.
  if (::setsid() < 0) Fail(report_w, SpawnStep::kSetup, errno, "setsid");
  // The new session's controlling terminal (in_r, out_w and err_w are it).
  if (tty >= 0 && ::ioctl(tty, TIOCSCTTY, 0) < 0)
    Fail(report_w, SpawnStep::kSetup, errno, "ioctl", "TIOCSCTTY");
  // Under memory pressure (the sandbox's memory cgroup, or a microVM
  // guest's memory, full) the OOM killer must take the sandbox's processes
  // and never the agent, which keeps 0: every child starts at the maximum
  // score, so any of them outranks it (docs/security.md, "Memory
  // pressure"). Raising a score needs no privilege; lowering one below 0
  // needs CAP_SYS_RESOURCE, which nothing in a sandbox has. Done before
  // the switch of user, while /proc/self is still ours.
  if (int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
    (void)!::write(fd, "1000", 4);
    ::close(fd);
  }
  if (::dup2(in_r, 0) < 0) Fail(report_w, SpawnStep::kSetup, errno, "dup2", "stdin");
  if (::dup2(out_w, 1) < 0) Fail(report_w, SpawnStep::kSetup, errno, "dup2", "stdout");
  if (::dup2(err_w, 2) < 0) Fail(report_w, SpawnStep::kSetup, errno, "dup2", "stderr");
  // Every other descriptor is CLOEXEC already; make sure of it.
  ::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
  // Undo the agent's signal setup: default dispositions, empty mask. Only
  // the signals the agent changed (found before the clone): under TCG
  // emulation 64 sigaction calls per exec were a measurable cost.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (const int* s = ChangedSignals(); *s != 0; ++s) ::sigaction(*s, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::umask(022);
  if (::chdir(req.cwd.c_str()) < 0) Fail(report_w, SpawnStep::kWorkdir, errno, "chdir", req.cwd.c_str());
  if (policy != nullptr) {
    confine::ApplyResult r = confine::ApplyInChild(*policy);
    if (!r.ok()) Fail(report_w, SpawnStep::kConfine, r.err, r.step != nullptr ? r.step : "confine");
  }
  // After confinement (which needs CAP_SETPCAP): switching away from uid 0
  // clears every remaining capability.
  if (req.creds) {
    const Credentials& c = *req.creds;
    if (const char* failed = SetIdsRaw(c.groups.data(), c.groups.size(), c.gid, c.uid))
      Fail(report_w, SpawnStep::kCredentials, errno, failed);
  }
  int saved = ENOENT;
  bool eacces = false;
  for (const char* path : candidates) {
    ::execve(path, argv, envp);
    int e = errno;
    if (e == EACCES) {
      eacces = true;
    } else if (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG || e == ELOOP) {
      // try the next PATH entry
    } else {
      saved = e;
      break;
    }
  }
  if (eacces && saved == ENOENT) saved = EACCES;
  Fail(report_w, SpawnStep::kExec, saved, "execve", argv[0]);
}

// clone() entry point: the child runs on its own stack in the agent's
// address space (CLONE_VM | CLONE_VFORK) until it execs or exits.
struct ChildArgs {
  const SpawnRequest* req;
  const confine::ChildPolicy* policy;
  char* const* argv;
  char* const* envp;
  const std::vector<const char*>* candidates;
  int in_r, out_w, err_w, tty, report_w;
};

int ChildEntry(void* p) {
  const auto* a = static_cast<const ChildArgs*>(p);
  ChildMain(*a->req, a->policy, a->argv, a->envp, *a->candidates, a->in_r, a->out_w, a->err_w, a->tty,
            a->report_w);
}

// Reads a small text file of the agent's root (at most 4 MiB).
std::optional<std::string> ReadEtcFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st;
  if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (4u << 20)) return std::nullopt;
  }
  return out;
}

// Colon-separated fields of each line.
std::vector<std::vector<std::string>> ColonRecords(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    size_t s = 0;
    for (;;) {
      size_t c = line.find(':', s);
      f.push_back(line.substr(s, c == std::string::npos ? std::string::npos : c - s));
      if (c == std::string::npos) break;
      s = c + 1;
    }
    out.push_back(std::move(f));
  }
  return out;
}

// A decimal id in [0, 2^32 - 2]; nullopt otherwise.
std::optional<uint32_t> ParseId(const std::string& s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > 0xFFFFFFFEull) return std::nullopt;
  return static_cast<uint32_t>(v);
}

}  // namespace

Result<Credentials> ResolveUser(const std::string& user, const std::string& etc_dir) {
  if (user.empty() || user.find('\0') != std::string::npos || user.size() > 256)
    return InvalidRequest("user: expected name, uid, name:group or uid:gid");
  size_t colon = user.find(':');
  std::string u = user.substr(0, colon);
  std::string g = colon == std::string::npos ? "" : user.substr(colon + 1);
  if (u.empty() || (colon != std::string::npos && g.empty()) || g.find(':') != std::string::npos)
    return InvalidRequest("user: expected name, uid, name:group or uid:gid, got '" + user + "'");
  auto passwd = ColonRecords(ReadEtcFile(etc_dir + "/passwd").value_or(""));
  auto groups = ColonRecords(ReadEtcFile(etc_dir + "/group").value_or(""));
  Credentials c;
  std::string name;
  std::optional<uint32_t> uid = ParseId(u);
  bool found = false;
  for (const auto& f : passwd) {
    if (f.size() < 4) continue;
    auto fu = ParseId(f[2]);
    auto fg = ParseId(f[3]);
    if (!fu || !fg) continue;
    if ((uid && *fu == *uid) || (!uid && f[0] == u)) {
      c.uid = *fu;
      c.gid = *fg;
      name = f[0];
      found = true;
      break;
    }
  }
  if (!found) {
    if (!uid) return Platform("exec", "user '" + u + "' not found in the image's /etc/passwd");
    c.uid = *uid;
    c.gid = 0;
  }
  if (!g.empty()) {
    std::optional<uint32_t> gid = ParseId(g);
    bool gfound = gid.has_value();
    if (!gid) {
      for (const auto& f : groups) {
        if (f.size() >= 3 && f[0] == g) {
          if (auto fg = ParseId(f[2])) {
            gid = *fg;
            gfound = true;
            break;
          }
        }
      }
    }
    if (!gfound) return Platform("exec", "group '" + g + "' not found in the image's /etc/group");
    c.gid = *gid;
  }
  c.groups.push_back(c.gid);
  if (!name.empty()) {
    for (const auto& f : groups) {
      if (f.size() < 4) continue;
      auto fg = ParseId(f[2]);
      if (!fg || *fg == c.gid) continue;
      size_t s = 0;
      const std::string& members = f[3];
      while (s <= members.size()) {
        size_t comma = members.find(',', s);
        if (members.substr(s, comma == std::string::npos ? std::string::npos : comma - s) == name) {
          if (c.groups.size() < 64) c.groups.push_back(*fg);
          break;
        }
        if (comma == std::string::npos) break;
        s = comma + 1;
      }
    }
  }
  return c;
}

std::vector<std::string> ProgramCandidates(const std::string& argv0, const std::vector<std::string>& env) {
  if (argv0.find('/') != std::string::npos) return {argv0};
  std::string path = kDefaultPath;
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);  // later duplicates win
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";  // an empty entry means the working directory
    dir += '/';
    dir += argv0;
    out.push_back(std::move(dir));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

Result<SpawnOutcome> Spawn(const SpawnRequest& req, const confine::ChildPolicy* policy) {
  if (req.argv.empty() || req.argv[0].empty())
    return InvalidRequest("argv: expected a non-empty array of strings");
  // The workdir is checked here for a precise error; the child's chdir is
  // the authority (a race turns into the same errors via the report pipe).
  struct stat st {};
  if (::stat(req.cwd.c_str(), &st) < 0) {
    int e = errno;
    if (e == ENOENT) return Error(Code::kS211, "file not found: workdir " + req.cwd);
    if (e == ENOTDIR) return Error(Code::kS212, "not a directory or wrong type: workdir " + req.cwd);
    return FsError(e, "workdir " + req.cwd);
  }
  if (!S_ISDIR(st.st_mode)) return Error(Code::kS212, "not a directory or wrong type: workdir " + req.cwd);

  // Everything the child needs, prepared before fork.
  std::vector<char*> argv, envp;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<std::string> cand = ProgramCandidates(req.argv[0], req.env);
  std::vector<const char*> cand_c;
  cand_c.reserve(cand.size());
  for (const auto& c : cand) cand_c.push_back(c.c_str());

  // The child's stdin, stdout and stderr, and the parent's ends.
  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w, master, slave;
  if (req.terminal) {
    SKIFF_ASSIGN_OR_RETURN(PtyPair pty, OpenPty(*req.terminal));
    master = std::move(pty.master);
    slave = std::move(pty.slave);
    // The terminal belongs to whoever runs in it (as login does): a
    // process of another user can open it again through /dev/tty.
    if (req.creds && ::fchown(slave.get(), req.creds->uid, static_cast<gid_t>(-1)) < 0)
      return Error::Sys(Code::kS300, "fchown", "pty slave", errno);
  } else {
    int in[2], out[2], err[2];
    if (req.null_stdin) {
      in_r.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!in_r) return Error::Sys(Code::kS300, "open", "/dev/null", errno);
    } else {
      if (::pipe2(in, O_CLOEXEC) < 0) return Error::Sys(Code::kS300, "pipe2", "stdin", errno);
      in_r.reset(in[0]);
      in_w.reset(in[1]);
    }
    if (::pipe2(out, O_CLOEXEC) < 0) return Error::Sys(Code::kS300, "pipe2", "stdout", errno);
    out_r.reset(out[0]);
    out_w.reset(out[1]);
    if (::pipe2(err, O_CLOEXEC) < 0) return Error::Sys(Code::kS300, "pipe2", "stderr", errno);
    err_r.reset(err[0]);
    err_w.reset(err[1]);
  }
  const int child_in = slave ? slave.get() : in_r.get();
  const int child_out = slave ? slave.get() : out_w.get();
  const int child_err = slave ? slave.get() : err_w.get();
  Result<ChildReportPipe> report = ChildReportPipe::Create();
  if (!report.ok()) return std::move(report).error().With("spawn of " + req.argv[0]);

  // vfork semantics (as posix_spawn does): the child borrows the agent's
  // address space until execve, so no page tables are copied and no
  // copy-on-write faults follow — the bulk of an exec's cost under TCG.
  // The child only writes its own stack and makes system calls; every
  // signal stays blocked until it has reset the dispositions, so no agent
  // handler ever runs in it.
  constexpr size_t kChildStack = size_t{256} * 1024;
  void* stack =
      ::mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return Error::Sys(Code::kS300, "mmap", "child stack", errno);
  ChildArgs args{&req,     policy,    argv.data(), envp.data(), &cand_c,
                 child_in, child_out, child_err,   slave.get(), report->write_fd()};
  sigset_t all, old;
  (void)ChangedSignals();  // computed here, never in the child
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid =
      ::clone(ChildEntry, static_cast<char*>(stack) + kChildStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kChildStack);
  if (pid < 0) return Error::Sys(Code::kS300, "clone", req.argv[0], clone_errno);
  // Parent. The child has its own group from setsid(); also set it from here
  // so a kill before the child ran setsid still reaches the right group.
  in_r.reset();
  out_w.reset();
  err_w.reset();
  slave.reset();  // the master sees EOF once the child's copies are gone
  // The child has exec'ed or exited (CLONE_VFORK): its report is complete.
  Result<std::optional<ChildFailure>> failed = report->ReadFailure();
  if (!failed.ok()) return Platform("exec", "spawn of " + req.argv[0] + ": " + failed.error().message());
  if (!failed->has_value()) {  // EOF: execve succeeded
    SpawnOutcome o;
    o.started = true;
    o.proc.pid = pid;
    o.proc.stdin_w = std::move(in_w);
    o.proc.stdout_r = std::move(out_r);
    o.proc.stderr_r = std::move(err_r);
    o.proc.terminal = std::move(master);
    return o;
  }
  // The child failed and exits 127 by itself; the reaper collects it.
  Result<SpawnOutcome> o = SpawnFailureOutcome(req, **failed);
  if (o.ok()) o->failure.pid = pid;
  return o;
}

}  // namespace skiff::agent
