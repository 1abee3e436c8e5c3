// Test harness: the real skiff-agent as PID 1 of a private PID and mount
// namespace whose root is a fresh tmpfs (with /usr bound read-only, /proc,
// /dev/null, a devpts instance of its own with /dev/ptmx, /tmp and a second
// tmpfs at /mnt2), talking over a socketpair.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/client.h"
#include "support/temp_dir.h"

namespace skiff::agent_test {

using json = nlohmann::json;
using namespace std::chrono_literals;

inline std::string AgentBinary() { return SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent"; }

struct ExecOut {
  int exit_code = -1;
  int signal = 0;
  std::string out, err;
  json result;                // RESULT json (empty when an error came)
  std::optional<json> error;  // ERROR json
  bool got_meta = false;
};

struct SandboxOptions {
  int pids_max = 0;  // > 0: put the sandbox in a pids cgroup with this limit
};

class AgentSandbox {
 public:
  // Starts the agent; fails the current test (ADD_FAILURE) and returns null
  // when it cannot.
  static std::unique_ptr<AgentSandbox> Start(SandboxOptions opt = {}) {
    auto sb = std::unique_ptr<AgentSandbox>(new AgentSandbox());
    if (!sb->Launch(opt)) return nullptr;
    return sb;
  }

  ~AgentSandbox() {
    if (client_) client_->Close();
    client_.reset();
    if (outer_ > 0) {
      ::kill(outer_, SIGKILL);
      if (agent_pid_ > 0) ::kill(agent_pid_, SIGKILL);
      int st;
      ::waitpid(outer_, &st, 0);
    }
    root_.reset();  // empty here: the sandbox's tmpfs is mounted in its own namespace only
    if (!cgroup_.empty()) {
      for (int i = 0; i < 50 && ::rmdir(cgroup_.c_str()) < 0 && errno == EBUSY; ++i) ::usleep(20000);
    }
  }

  proto::Client& client() { return *client_; }

  // Closes the channel (the agent then kills everything and exits, ending
  // its namespace) and waits up to `wait` for that. The agent's exit
  // status, or -1 when it did not end in time.
  int CloseChannelAndWait(std::chrono::milliseconds wait) {
    if (client_) client_->Close();
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (outer_ > 0) {
      int st = 0;
      pid_t r = ::waitpid(outer_, &st, WNOHANG);
      if (r == outer_) {
        outer_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      ::usleep(10000);
    }
    return -1;
  }
  pid_t agent_pid() const { return agent_pid_; }
  // Host path of a sandbox path (through /proc/<agent>/root).
  std::string HostPath(const std::string& p) const {
    return "/proc/" + std::to_string(agent_pid_) + "/root" + p;
  }

  Result<json> Call(json req) { return client_->Call(req, std::chrono::steady_clock::now() + 60s); }

  // The raw final event of a request (to see ERROR extras like "fix").
  proto::Event CallRaw(json req) {
    auto s = client_->Open(req);
    if (!s.ok()) return proto::Event{};
    (void)(*s)->End(proto::kStdin);
    for (;;) {
      auto e = (*s)->Next(std::chrono::steady_clock::now() + 60s);
      if (!e) return proto::Event{};
      if (e->kind == proto::Event::Kind::kResult || e->kind == proto::Event::Kind::kError ||
          e->kind == proto::Event::Kind::kClosed)
        return *e;
    }
  }

  ExecOut Exec(std::vector<std::string> argv, json extra = json::object(),
               std::optional<std::string> stdin_bytes = std::nullopt, std::chrono::seconds wait = 60s) {
    json req = extra;
    req["op"] = "exec";
    req["argv"] = argv;
    if (!req.contains("env"))
      req["env"] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"};
    req["stdin"] = stdin_bytes.has_value();
    ExecOut o;
    auto s = client_->Open(req);
    if (!s.ok()) {
      o.error = json{{"code", "S300"}, {"message", s.error().message()}};
      return o;
    }
    if (stdin_bytes) {
      // A child may exit without reading it all: the stream then finishes
      // and the rest is refused, which is fine.
      (void)(*s)->Send(proto::kStdin, *stdin_bytes, std::chrono::steady_clock::now() + wait);
    }
    (void)(*s)->End(proto::kStdin);
    auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      auto e = (*s)->Next(deadline);
      if (!e) {
        o.error = json{{"code", "TIMEOUT"}, {"message", "test timed out waiting"}};
        return o;
      }
      switch (e->kind) {
        case proto::Event::Kind::kMeta:
          o.got_meta = true;
          break;
        case proto::Event::Kind::kData:
          (e->channel == proto::kStdout ? o.out : o.err) += e->data;
          break;
        case proto::Event::Kind::kEnd:
          break;
        case proto::Event::Kind::kResult:
          o.result = e->json;
          o.exit_code = e->json.value("exit_code", -1);
          o.signal = e->json.value("signal", 0);
          return o;
        case proto::Event::Kind::kError:
        case proto::Event::Kind::kClosed:
          o.error = e->json;
          return o;
      }
    }
  }

  // Runs `sh -c script` and returns stdout; fails the test on a non-zero exit.
  std::string Sh(const std::string& script) {
    ExecOut o = Exec({"sh", "-c", script});
    EXPECT_EQ(o.exit_code, 0) << script << "\nstderr: " << o.err
                              << (o.error ? o.error->dump() : std::string());
    return o.out;
  }

  Result<json> Write(const std::string& path, const std::string& bytes, json extra = json::object()) {
    json req = extra;
    req["op"] = "fs.write";
    req["path"] = path;
    auto s = client_->Open(req);
    if (!s.ok()) return s.error();
    auto deadline = std::chrono::steady_clock::now() + 120s;
    if (!bytes.empty()) {
      auto st = (*s)->Send(proto::kStdin, bytes, deadline);
      if (!st.ok()) {
        // The agent may have answered with an error already.
        auto e = (*s)->Next(deadline);
        if (e && e->kind == proto::Event::Kind::kError)
          return Error(CodeFromName(e->json.value("code", "S300")).value_or(Code::kS300),
                       e->json.value("message", ""));
        return st.error();
      }
    }
    (void)(*s)->End(proto::kStdin);
    for (;;) {
      auto e = (*s)->Next(deadline);
      if (!e) return Error(Code::kS300, "timeout");
      if (e->kind == proto::Event::Kind::kResult) return e->json;
      if (e->kind == proto::Event::Kind::kError || e->kind == proto::Event::Kind::kClosed)
        return Error(CodeFromName(e->json.value("code", "S300")).value_or(Code::kS300),
                     e->json.value("message", ""));
    }
  }

  struct ReadOut {
    json meta;
    std::string data;
  };
  Result<ReadOut> Read(const std::string& path) {
    auto s = client_->Open(json{{"op", "fs.read"}, {"path", path}});
    if (!s.ok()) return s.error();
    (void)(*s)->End(proto::kStdin);
    ReadOut r;
    auto deadline = std::chrono::steady_clock::now() + 120s;
    for (;;) {
      auto e = (*s)->Next(deadline);
      if (!e) return Error(Code::kS300, "timeout");
      switch (e->kind) {
        case proto::Event::Kind::kMeta:
          r.meta = e->json;
          break;
        case proto::Event::Kind::kData:
          r.data += e->data;
          break;
        case proto::Event::Kind::kEnd:
          break;
        case proto::Event::Kind::kResult:
          return r;
        default:
          return Error(CodeFromName(e->json.value("code", "S300")).value_or(Code::kS300),
                       e->json.value("message", ""));
      }
    }
  }

  // VmHWM of the agent process, in KiB.
  long AgentHwmKb() const {
    std::ifstream f("/proc/" + std::to_string(agent_pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    return -1;
  }

 private:
  AgentSandbox() = default;

  bool Launch(const SandboxOptions& opt) {
    try {
      root_.emplace("agent-test");
    } catch (const std::runtime_error& e) {
      ADD_FAILURE() << e.what();
      return false;
    }
    const std::string& r = root_->path();
    if (opt.pids_max > 0) {
      cgroup_ = "/sys/fs/cgroup/pids/" + r.substr(r.rfind('/') + 1);  // named as the root is
      if (::mkdir(cgroup_.c_str(), 0755) < 0) {
        cgroup_.clear();
        ADD_FAILURE() << "cannot create a pids cgroup";
        return false;
      }
      std::ofstream(cgroup_ + "/pids.max") << opt.pids_max;
    }
    int agent_fd = ::open(AgentBinary().c_str(), O_PATH | O_CLOEXEC);
    if (agent_fd < 0) {
      ADD_FAILURE() << "no agent binary at " << AgentBinary();
      return false;
    }
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return false;
    int pidpipe[2];
    if (::pipe2(pidpipe, O_CLOEXEC) < 0) return false;

    // Everything the children need, prepared before fork.
    std::string usr = r + "/usr", proc = r + "/proc", tmp = r + "/tmp", dev = r + "/dev",
                devnull = r + "/dev/null", pts = r + "/dev/pts", ptmx = r + "/dev/ptmx", etc = r + "/etc",
                mnt2 = r + "/mnt2", root_dir = r + "/root";
    std::string bin = r + "/bin", lib = r + "/lib", lib64 = r + "/lib64", sbin = r + "/sbin";
    std::vector<std::pair<std::string, std::string>> devs = {{"/dev/zero", dev + "/zero"},
                                                             {"/dev/urandom", dev + "/urandom"}};
    std::string agent_bin = AgentBinary(), agent_in_root = r + "/.skiff-agent";
    std::string procs = cgroup_.empty() ? std::string() : cgroup_ + "/cgroup.procs";
    const char* argv[] = {"skiff-agent", "--fd", "3", nullptr};
    const char* envp[] = {"SKIFF_LOG=warn", nullptr};

    pid_t outer = ::fork();
    if (outer < 0) return false;
    if (outer == 0) {
      // Child (test helper): only plain syscalls from here.
      if (!procs.empty()) {
        int c = ::open(procs.c_str(), O_WRONLY);
        if (c < 0 || ::write(c, "0", 1) != 1) ::_exit(90);
        ::close(c);
      }
      if (::unshare(CLONE_NEWNS | CLONE_NEWPID) < 0) ::_exit(91);
      pid_t inner = ::fork();
      if (inner < 0) ::_exit(92);
      if (inner > 0) {
        (void)!::write(pidpipe[1], &inner, sizeof inner);
        int st;
        while (::waitpid(inner, &st, 0) < 0 && errno == EINTR) {
        }
        ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      }
      // PID 1 of the new namespace.
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) ::_exit(93);
      if (::mount("tmpfs", r.c_str(), "tmpfs", 0, "mode=0755,size=2g") < 0) ::_exit(94);
      ::mkdir(usr.c_str(), 0755);
      if (::mount("/usr", usr.c_str(), nullptr, MS_BIND | MS_REC, nullptr) < 0) ::_exit(95);
      if (::mount(nullptr, usr.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) < 0) ::_exit(96);
      (void)!::symlink("usr/bin", bin.c_str());
      (void)!::symlink("usr/lib", lib.c_str());
      (void)!::symlink("usr/lib64", lib64.c_str());
      (void)!::symlink("usr/sbin", sbin.c_str());
      ::mkdir(etc.c_str(), 0755);
      ::mkdir(root_dir.c_str(), 0700);
      ::mkdir(tmp.c_str(), 01777);
      ::chmod(tmp.c_str(), 01777);
      ::mkdir(proc.c_str(), 0555);
      if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) ::_exit(97);
      ::mkdir(dev.c_str(), 0755);
      int nf = ::open(devnull.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
      if (nf >= 0) ::close(nf);
      if (::mount("/dev/null", devnull.c_str(), nullptr, MS_BIND, nullptr) < 0) ::_exit(98);
      for (const auto& [host, in] : devs) {
        int df = ::open(in.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (df >= 0) ::close(df);
        if (::mount(host.c_str(), in.c_str(), nullptr, MS_BIND, nullptr) < 0) ::_exit(104);
      }
      // Terminals of the sandbox's own (as the jail and the VM guest have).
      ::mkdir(pts.c_str(), 0755);
      if (::mount("devpts", pts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
        ::_exit(105);
      if (::symlink("pts/ptmx", ptmx.c_str()) < 0) ::_exit(106);
      ::mkdir(mnt2.c_str(), 0755);
      if (::mount("tmpfs", mnt2.c_str(), "tmpfs", 0, "mode=0755,size=64m") < 0) ::_exit(99);
      int af = ::open(agent_in_root.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
      if (af >= 0) ::close(af);
      if (::mount(agent_bin.c_str(), agent_in_root.c_str(), nullptr, MS_BIND, nullptr) < 0) ::_exit(103);
      if (::chroot(r.c_str()) < 0 || ::chdir("/") < 0) ::_exit(100);
      if (::dup2(sv[1], 3) < 0) ::_exit(101);
      ::execve("/.skiff-agent", const_cast<char**>(argv), const_cast<char**>(envp));
      ::_exit(errno);
    }
    outer_ = outer;
    ::close(sv[1]);
    ::close(pidpipe[1]);
    ::close(agent_fd);
    pid_t inner = -1;
    if (::read(pidpipe[0], &inner, sizeof inner) != sizeof inner) {
      ::close(pidpipe[0]);
      ::close(sv[0]);
      ADD_FAILURE() << "the sandbox helper did not start";
      return false;
    }
    ::close(pidpipe[0]);
    agent_pid_ = inner;
    auto c = proto::Client::Connect(UniqueFd(sv[0]), 10s);
    if (!c.ok()) {
      int st = 0;
      ::waitpid(outer_, &st, 0);
      outer_ = -1;
      ADD_FAILURE() << "connect: " << c.error().ToString() << " (sandbox setup exit status "
                    << (WIFEXITED(st) ? WEXITSTATUS(st) : -1) << ")";
      return false;
    }
    client_ = *c;
    return true;
  }

  std::optional<testing_support::TempDir> root_;
  std::string cgroup_;
  pid_t outer_ = -1, agent_pid_ = -1;
  std::shared_ptr<proto::Client> client_;
};

// Code name of an error result, "" when ok.
inline std::string CodeOf(const Result<json>& r) {
  return r.ok() ? std::string() : std::string(CodeName(r.error().code()));
}
inline std::string MessageOf(const Result<json>& r) { return r.ok() ? std::string() : r.error().message(); }

}  // namespace skiff::agent_test
