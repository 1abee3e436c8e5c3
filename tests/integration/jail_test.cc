// The jail backend end to end: real namespaces, the real skiff-agent, the
// host image, spoken to through proto::Client with op "exec".
#include "isolation/jail/jail.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/fd_passing.h"
#include "base/paths.h"
#include "base/text.h"
#include "images/catalog.h"
#include "protocol/client.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

struct Out {
  int code = -1;
  std::string out, err;
  json result;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int CountDir(const std::string& dir, bool dirs_only) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      if (dirs_only && e->d_type != DT_DIR) continue;
      ++n;
    }
    ::closedir(d);
  }
  return n;
}

uint64_t UidOf(pid_t pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("Uid:", 0) == 0) return std::strtoull(line.c_str() + 4, nullptr, 10);
  return 0;
}

// Alive: exists and is not a zombie. A sandbox init whose launcher died is
// reparented to the host's init, which may be slow to reap it; a zombie
// runs nothing and holds nothing but its pid.
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  return false;
}

int OpenFds() { return CountDir("/proc/self/fd", false); }

// What one sandbox leaves on the host. Other sandboxes (other test
// processes) may run at the same time, so everything is counted for this
// sandbox's id and uid range only.
struct Leftovers {
  int processes = 0;  // processes running with a uid of the sandbox's range
  int cgroups = 0;    // <hierarchy>/.../skiff/<id> directories
  bool state_dir = false;
  bool live_lock = false;
  bool host_mount = false;  // the id in the host's mount table
  std::string Describe() const {
    return "processes=" + std::to_string(processes) + " cgroups=" + std::to_string(cgroups) +
           " state_dir=" + std::to_string(state_dir) + " live_lock=" + std::to_string(live_lock) +
           " host_mount=" + std::to_string(host_mount);
  }
  bool none() const { return !processes && !cgroups && !state_dir && !live_lock && !host_mount; }
};

// `runtime_dir`: that of the skiff which started the sandbox (its state
// directory lies there; its locks are host-wide).
Leftovers LeftoversOf(const json& doctor, const std::string& id, uint64_t uid_base,
                      const std::string& runtime_dir = paths::RuntimeDir()) {
  Leftovers l;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      pid_t pid = std::atoi(e->d_name);
      uint64_t uid = UidOf(pid);
      if (Alive(pid) && uid >= uid_base && uid < uid_base + 65536) ++l.processes;
    }
    ::closedir(d);
  }
  struct stat st;
  if (doctor["cgroups"].contains("dirs"))
    for (const auto& d : doctor["cgroups"]["dirs"])
      if (::stat((d.get<std::string>() + "/" + id).c_str(), &st) == 0) ++l.cgroups;
  l.state_dir = ::stat((runtime_dir + "/sandboxes/" + id).c_str(), &st) == 0;
  l.live_lock = ::stat((paths::HostRuntimeDir() + "/jail/live-" + id + ".lock").c_str(), &st) == 0;
  l.host_mount = ReadAll("/proc/self/mountinfo").find(id) != std::string::npos;
  return l;
}

class Box {
 public:
  static std::unique_ptr<Box> Start(Isolator& iso, SandboxPolicy p = {}) {
    auto img = HostImage();
    EXPECT_TRUE(img.ok()) << img.error().ToString();
    if (!img.ok()) return nullptr;
    auto b = std::make_unique<Box>();
    b->id = NewUuid();
    p.id = b->id;
    if (p.hostname.empty()) p.hostname = "sbx-" + b->id.substr(0, 8);
    p.rootfs = img->rootfs;
    p.state_dir = paths::RuntimeDir() + "/sandboxes/" + b->id;
    b->policy = p;
    auto inst = iso.Start(p);
    EXPECT_TRUE(inst.ok()) << inst.error().ToString();
    if (!inst.ok()) return nullptr;
    b->inst = std::move(inst).value();
    auto c = proto::Client::Connect(b->inst->TakeChannel(), 10s);
    EXPECT_TRUE(c.ok()) << c.error().ToString() << " / " << b->inst->ExitReport();
    if (!c.ok()) return nullptr;
    b->client = *c;
    b->pid = b->inst->Describe()["pid"].get<pid_t>();
    b->uid_base = b->inst->Describe()["uid_base"].get<uint64_t>();
    return b;
  }

  Out Exec(std::vector<std::string> argv, std::chrono::seconds wait = 60s) {
    Out o;
    json req{
        {"op", "exec"},
        {"argv", argv},
        {"env",
         {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}},
        {"cwd", "/"},
        {"timeout_ms", std::chrono::milliseconds(wait).count()},
        {"stdin", false}};
    auto s = client->Open(req);
    if (!s.ok()) {
      o.err = s.error().ToString();
      return o;
    }
    (void)(*s)->End(proto::kStdin);
    auto deadline = std::chrono::steady_clock::now() + wait + 5s;
    for (;;) {
      auto e = (*s)->Next(deadline);
      if (!e) {
        o.err += "<test timeout>";
        return o;
      }
      switch (e->kind) {
        case proto::Event::Kind::kData:
          (e->channel == proto::kStdout ? o.out : o.err) += e->data;
          break;
        case proto::Event::Kind::kResult:
          o.result = e->json;
          o.code = e->json.value("exit_code", -1);
          return o;
        case proto::Event::Kind::kError:
        case proto::Event::Kind::kClosed:
          o.err += e->json.dump();
          return o;
        default:
          break;
      }
    }
  }
  Out Sh(const std::string& script, std::chrono::seconds wait = 60s) {
    return Exec({"/bin/sh", "-c", script}, wait);
  }
  Out Py(const std::string& code, std::chrono::seconds wait = 60s) {
    return Exec({"/usr/bin/python3", "-c", code}, wait);
  }

  void Stop() {
    if (client) client->Close();
    client.reset();
    if (inst) inst->Stop(200ms);
  }
  ~Box() { Stop(); }

  std::string id;
  SandboxPolicy policy;
  std::unique_ptr<Instance> inst;
  std::shared_ptr<proto::Client> client;
  pid_t pid = -1;
  uint64_t uid_base = 0;
};

class JailTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    if (!std::getenv("SKIFF_AGENT"))
      ::setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    // uid ranges of this test process alone: other test processes start
    // and stop sandboxes at the same time, and a range they reuse would
    // show up as this test's leftovers.
    options_.uid_base = 0x10000000u + static_cast<uint32_t>(::getpid() % 3000) * 16u * 65536u;
    options_.slots = 16;
    iso_ = new JailIsolator(options_);
    doctor_ = iso_->Doctor();
  }
  static void TearDownTestSuite() {
    delete iso_;
    iso_ = nullptr;
    // The lock files of this process's private uid ranges.
    for (uint32_t i = 0; i < options_.slots; ++i)
      ::unlink((paths::HostRuntimeDir() + "/jail/uids-" +
                std::to_string(uint64_t{options_.uid_base} + uint64_t{i} * 65536) + ".lock")
                   .c_str());
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: namespaces, idmapped mounts, cgroups";
    ASSERT_TRUE(doctor_["available"].get<bool>()) << doctor_.dump();
  }
  static JailOptions options_;
  static JailIsolator* iso_;
  static json doctor_;
};
JailOptions JailTest::options_;
JailIsolator* JailTest::iso_ = nullptr;
json JailTest::doctor_;

TEST_F(JailTest, DoctorReportsEveryCheck) {
  for (const char* k : {"user_namespaces", "idmapped_mounts", "overlayfs", "seccomp", "cgroups"})
    ASSERT_TRUE(doctor_.contains(k)) << k << " missing in " << doctor_.dump();
  EXPECT_TRUE(doctor_["user_namespaces"]["ok"].get<bool>());
  EXPECT_TRUE(doctor_["idmapped_mounts"]["ok"].get<bool>());
  EXPECT_TRUE(doctor_["overlayfs"]["ok"].get<bool>());
  EXPECT_TRUE(doctor_["seccomp"]["ok"].get<bool>());
  // This host has writable cgroup v1 controllers.
  EXPECT_TRUE(doctor_["cgroups"]["writable"].get<bool>()) << doctor_["cgroups"].dump();
}

TEST_F(JailTest, IdentityHostnamePidOneAndHiddenHost) {
  auto b = Box::Start(*iso_);
  ASSERT_NE(b, nullptr);
  char host_name[256] = {};
  ::gethostname(host_name, sizeof host_name - 1);
  auto o = b->Sh("hostname");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, b->policy.hostname + "\n");
  EXPECT_NE(o.out, std::string(host_name) + "\n");

  o = b->Sh("tr '\\0' ' ' < /proc/1/cmdline");
  EXPECT_EQ(o.out.rfind("skiff-agent --fd 3", 0), 0u) << o.out;
  // Only the sandbox's own processes: the agent, sh, ls.
  o = b->Sh("ls /proc | grep -c '^[0-9]'");
  EXPECT_LE(std::atoi(o.out.c_str()), 4) << o.out;
  o = b->Sh("test -e /proc/" + std::to_string(::getpid()) + "/cmdline && echo visible || echo hidden");
  if (::getpid() > 4) {
    EXPECT_EQ(o.out, "hidden\n");
  }

  o = b->Sh("id -u; id -g");
  EXPECT_EQ(o.out, "0\n0\n");
  // On the host the agent runs as an unprivileged uid, never root.
  uint64_t uid = UidOf(b->pid);
  EXPECT_GE(uid, 1u << 20);
  EXPECT_EQ(uid % 65536, 0u);
  std::string map = ReadAll("/proc/" + std::to_string(b->pid) + "/uid_map");
  EXPECT_NE(map.find(std::to_string(uid)), std::string::npos) << map;
  EXPECT_EQ(b->inst->Describe()["isolation"], "jail");
  EXPECT_TRUE(b->inst->Running());
}

TEST_F(JailTest, WritesStayInTheSandbox) {
  auto a = Box::Start(*iso_);
  ASSERT_NE(a, nullptr);
  std::string tag = "skiff-probe-" + a->id;
  auto o = a->Sh("echo hi > /usr/" + tag + " && echo hi > /etc/" + tag + " && echo hi > /" + tag +
                 " && mkdir -p /usr/lib/" + tag + " && rm /usr/bin/env && cat /usr/" + tag +
                 " && stat -c '%u:%g %a' /usr/bin/sh /etc/passwd /tmp && ls /usr/bin/env 2>&1");
  EXPECT_EQ(o.code, 2) << o.out << o.err;  // the last ls fails: env was removed
  EXPECT_EQ(o.out.substr(0, 3), "hi\n") << o.out << o.err;
  EXPECT_NE(o.out.find("0:0 777\n0:0 644\n0:0 1777\n"), std::string::npos) << o.out;
  struct stat st;
  EXPECT_NE(::lstat(("/usr/" + tag).c_str(), &st), 0);
  EXPECT_NE(::lstat(("/etc/" + tag).c_str(), &st), 0);
  EXPECT_NE(::lstat(("/usr/lib/" + tag).c_str(), &st), 0);
  EXPECT_EQ(::lstat("/usr/bin/env", &st), 0) << "deletion reached the host";

  auto b = Box::Start(*iso_);
  ASSERT_NE(b, nullptr);
  o = b->Sh("ls /usr/" + tag + " /etc/" + tag + " 2>&1; test -x /usr/bin/env && echo env-ok");
  EXPECT_NE(o.out.find("No such file"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("env-ok"), std::string::npos) << o.out;
  // Nothing secret from the host's /etc.
  o = b->Sh("ls /etc/shadow /etc/ssh /etc/machine-id 2>&1 | grep -c 'No such file'");
  EXPECT_EQ(o.out, "3\n") << o.out;
  o = b->Sh("stat -c %a /tmp; python3 -c 'print(6*7)'");
  EXPECT_EQ(o.out, "1777\n42\n") << o.err;
}

TEST_F(JailTest, KernelSurfacesAreClosed) {
  auto b = Box::Start(*iso_);
  ASSERT_NE(b, nullptr);
  auto o = b->Sh(
      "echo 1 > /proc/sys/kernel/sysrq && echo WROTE; echo x > /sys/kernel/uevent_helper "
      "&& echo WROTE; cat /proc/kcore | head -c 1 | wc -c; cat /proc/keys | wc -c");
  EXPECT_EQ(o.out.find("WROTE"), std::string::npos) << o.out;
  EXPECT_EQ(o.out, "0\n0\n") << o.out << o.err;
  // Privileged system calls: each must fail.
  const char* py = R"PY(
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "ok" if r >= 0 else "fail", os.strerror(ctypes.get_errno()) if r < 0 else "")
sc("mount", 165, b"tmpfs", b"/mnt", b"tmpfs", 0, None)
sc("umount", 166, b"/proc/kcore", 2)
sc("init_module", 175, None, 0, b"")
sc("finit_module", 313, 0, b"", 0)
sc("kexec_load", 246, 0, 0, None, 0)
sc("bpf", 321, 0, None, 0)
sc("ptrace_attach_host", 101, 16, 1, 0, 0)
sc("add_key", 248, b"user", b"k", b"v", 1, ctypes.c_int(-4))
sc("keyctl", 250, 0, -4, 0)
sc("unshare_user", 272, 0x10000000)
sc("sethostname", 170, b"x", 1)
sc("reboot", 169, 0xfee1dead, 672274793, 0x1234567, None)
)PY";
  o = b->Py(py);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find(" ok"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("mount fail"), std::string::npos) << o.out;
  o = b->Sh(
      "grep -E '^Cap(Eff|Bnd)' /proc/self/status; grep NoNewPrivs /proc/1/status; "
      "grep Seccomp: /proc/1/status");
  EXPECT_NE(o.out.find("NoNewPrivs:\t1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Seccomp:\t2"), std::string::npos) << o.out;
  // Host view: the agent's capabilities only hold inside its user namespace.
  std::string ns_host = ReadAll("/proc/self/ns/user");
  char a[64] = {}, c[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/user", a, sizeof a - 1), 0);
  ASSERT_GT(::readlink(("/proc/" + std::to_string(b->pid) + "/ns/user").c_str(), c, sizeof c - 1), 0);
  EXPECT_STRNE(a, c);
}

TEST_F(JailTest, OnlyLoopbackAndItIsUp) {
  // A listener on the host's loopback the sandbox must not reach.
  int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(ls, 4), 0);
  socklen_t len = sizeof sa;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&sa), &len);
  int port = ntohs(sa.sin_port);

  auto b = Box::Start(*iso_);
  ASSERT_NE(b, nullptr);
  auto o = b->Sh("ls /sys/class/net; cat /sys/class/net/lo/flags");
  EXPECT_EQ(o.out, "lo\n0x9\n") << o.out << o.err;  // IFF_UP | IFF_LOOPBACK
  std::string py =
      "import socket\n"
      "s=socket.socket(); s.settimeout(2)\n"
      "try:\n s.connect(('127.0.0.1'," +
      std::to_string(port) +
      ")); print('connected')\n"
      "except Exception as e: print('refused', type(e).__name__)\n"
      "srv=socket.socket(); srv.bind(('127.0.0.1',0)); srv.listen(1)\n"
      "c=socket.create_connection(srv.getsockname(), 2); print('loopback ok')\n"
      "try:\n socket.create_connection(('1.1.1.1',53), 2); print('internet')\n"
      "except Exception as e: print('no route', type(e).__name__)\n";
  o = b->Py(py);
  EXPECT_EQ(o.out.find("connected"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("refused"), std::string::npos) << o.out << o.err;
  EXPECT_NE(o.out.find("loopback ok"), std::string::npos) << o.out << o.err;
  EXPECT_NE(o.out.find("no route"), std::string::npos) << o.out << o.err;
  ::close(ls);
}

TEST_F(JailTest, ForkBombHitsPidsMax) {
  SandboxPolicy p;
  p.pids_max = 64;
  auto b = Box::Start(*iso_, p);
  ASSERT_NE(b, nullptr);
  auto o = b->Py(R"PY(
import os, time
n = 0
try:
    for i in range(10000):
        if os.fork() == 0:
            os.close(1); os.close(2); time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("limit", n, e.errno)
)PY",
                 60s);
  EXPECT_NE(o.out.find("limit"), std::string::npos) << o.out << o.err;
  int n = std::atoi(o.out.c_str() + o.out.find(' ') + 1);
  EXPECT_GT(n, 10);
  EXPECT_LT(n, 64);
  // The host and the sandbox keep working.
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  ASSERT_GT(pid, 0);
  ::waitpid(pid, nullptr, 0);
  auto again = Box::Start(*iso_);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->Sh("echo alive").out, "alive\n");
}

TEST_F(JailTest, MemoryHogIsOomKilled) {
  SandboxPolicy p;
  p.memory_mb = 96;
  auto b = Box::Start(*iso_, p);
  ASSERT_NE(b, nullptr);
  auto o = b->Py("b = b'x' * (400 << 20)\nprint('survived')", 60s);
  EXPECT_EQ(o.code, 137) << o.out << o.err << o.result.dump();
  EXPECT_EQ(o.out, "");
  EXPECT_TRUE(b->inst->Running());
  EXPECT_EQ(b->Sh("echo still here").out, "still here\n");
}

// The writable layer is a tmpfs charged to the sandbox's memory cgroup, and
// its pages are freed by no kill: filling it used to get the agent
// OOM-killed (and the sandbox with it). Every process the agent starts has
// the maximum OOM score, so the writer is killed (exit 137), the agent
// answers the next exec, the space can be freed through it and the sandbox
// serves on.
TEST_F(JailTest, FillingTheWritableLayerKillsTheWriterNotTheAgent) {
  SandboxPolicy p;
  p.memory_mb = 64;
  auto b = Box::Start(*iso_, p);
  ASSERT_NE(b, nullptr);
  auto scores = b->Sh("cat /proc/1/oom_score_adj /proc/self/oom_score_adj");
  EXPECT_EQ(scores.out, "0\n1000\n") << scores.err;
  auto fill = b->Exec({"/bin/dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=1024"});
  EXPECT_EQ(fill.code, 137) << fill.out << fill.err << fill.result.dump();
  EXPECT_EQ(fill.result.is_object() ? fill.result.value("signal", 0) : 0, 9) << fill.result.dump();
  ASSERT_TRUE(b->client->alive()) << b->client->failure() << " / " << b->inst->ExitReport();
  ASSERT_TRUE(b->inst->Running());
  // The agent answers the next exec while the layer is still full, and frees it.
  EXPECT_EQ(b->Sh("echo next").out, "next\n");
  auto st = b->client->Call({{"op", "fs.stat"}, {"path", "/fill"}}, std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  EXPECT_GT(st->value("size", 0), 16 << 20) << st->dump();
  auto rm = b->client->Call({{"op", "fs.rm"}, {"path", "/fill"}, {"recursive", false}},
                            std::chrono::steady_clock::now() + 30s);
  ASSERT_TRUE(rm.ok()) << rm.error().ToString();
  EXPECT_EQ(b->Sh("echo still here").out, "still here\n");
}

TEST_F(JailTest, TmpFillsUpWithEnospc) {
  SandboxPolicy p;
  p.tmp_size_mb = 16;
  auto b = Box::Start(*iso_, p);
  ASSERT_NE(b, nullptr);
  auto o = b->Sh("dd if=/dev/zero of=/tmp/big bs=1M count=10240 2>&1; df -m /tmp | tail -1");
  EXPECT_NE(o.out.find("No space left on device"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" 16 "), std::string::npos) << o.out;
}

TEST_F(JailTest, StopLeavesNothingBehind) {
  int fds = OpenFds();
  std::string id;
  uint64_t base = 0;
  {
    auto b = Box::Start(*iso_);
    ASSERT_NE(b, nullptr);
    id = b->id;
    base = b->uid_base;
    EXPECT_EQ(b->Sh("sleep 100 >/dev/null 2>&1 & sleep 100 >/dev/null 2>&1 & echo started").out, "started\n");
    Leftovers during = LeftoversOf(doctor_, id, base);
    EXPECT_GE(during.processes, 3);
    EXPECT_GE(during.cgroups, 2);
    EXPECT_TRUE(during.state_dir);
    // The per-sandbox tmpfs exists only in the sandbox's mount namespace.
    EXPECT_FALSE(during.host_mount);
    EXPECT_NE(ReadAll("/proc/" + std::to_string(b->pid) + "/mountinfo").find("overlay"), std::string::npos);
    pid_t pid = b->pid;
    b->Stop();
    EXPECT_FALSE(b->inst->Running());
    EXPECT_NE(::kill(pid, 0), 0);
    b->inst->Stop(0ms);  // idempotent
  }
  Leftovers after = LeftoversOf(doctor_, id, base);
  EXPECT_TRUE(after.none()) << after.Describe();
  EXPECT_EQ(OpenFds(), fds);
}

// The isolator moves a throwaway process of its own into skiff/ in the
// background (so the sandbox init's cgroup move does not wait for an RCU
// grace period); it must be gone after the first start, and when an
// isolator that never started anything is destroyed.
TEST_F(JailTest, CgroupWarmUpLeavesNoProcessBehind) {
  ASSERT_TRUE(doctor_["cgroups"].contains("dirs")) << doctor_["cgroups"].dump();
  const std::string procs = doctor_["cgroups"]["dirs"][0].get<std::string>() + "/cgroup.procs";
  auto ours = [&] {  // processes in skiff/ whose parent is this test
    int n = 0;
    std::ifstream f(procs);
    for (pid_t p; f >> p;) {
      std::ifstream st("/proc/" + std::to_string(p) + "/status");
      for (std::string l; std::getline(st, l);)
        if (l.rfind("PPid:", 0) == 0 && std::stoi(l.substr(5)) == ::getpid()) ++n;
    }
    return n;
  };
  auto wait_for = [&](int want) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (ours() != want && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return ours();
  };
  {
    auto first = Box::Start(*iso_);  // ends the suite isolator's own warm-up
    ASSERT_NE(first, nullptr);
  }
  ASSERT_EQ(wait_for(0), 0);
  {
    JailIsolator iso;
    EXPECT_EQ(wait_for(1), 1) << "the warm-up process never reached " << procs;
    auto b = Box::Start(iso);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->Sh("echo hi").out, "hi\n");
    EXPECT_EQ(wait_for(0), 0) << "the warm-up outlived the first start";
  }
  {
    JailIsolator idle;
    EXPECT_EQ(wait_for(1), 1);
  }
  EXPECT_EQ(ours(), 0);
}

TEST_F(JailTest, AgentKilledFromTheHostLeavesNothingBehind) {
  int fds = OpenFds();
  std::string id;
  uint64_t base = 0;
  {
    auto b = Box::Start(*iso_);
    ASSERT_NE(b, nullptr);
    id = b->id;
    base = b->uid_base;
    EXPECT_EQ(b->Sh("sleep 100 >/dev/null 2>&1 & echo started").out, "started\n");
    ASSERT_EQ(::kill(b->pid, SIGKILL), 0);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (b->inst->Running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(b->inst->Running());
    EXPECT_NE(b->inst->ExitReport().find("SIGKILL"), std::string::npos) << b->inst->ExitReport();
    // Every process of the sandbox died with its init.
    EXPECT_EQ(LeftoversOf(doctor_, id, base).processes, 0);
    b->Stop();
  }
  Leftovers after = LeftoversOf(doctor_, id, base);
  EXPECT_TRUE(after.none()) << after.Describe();
  EXPECT_EQ(OpenFds(), fds);
}

TEST_F(JailTest, SixteenConcurrentSandboxes) {
  int fds = OpenFds();
  std::vector<std::pair<std::string, uint64_t>> ids;
  {
    std::vector<std::unique_ptr<Box>> boxes(16);
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) threads.emplace_back([&, i] { boxes[i] = Box::Start(*iso_); });
    for (auto& t : threads) t.join();
    threads.clear();
    std::set<uint64_t> uids;
    for (auto& b : boxes) {
      ASSERT_NE(b, nullptr);
      uids.insert(UidOf(b->pid));
      ids.emplace_back(b->id, b->uid_base);
    }
    EXPECT_EQ(uids.size(), 16u) << "uid ranges must be distinct";
    for (int i = 0; i < 16; ++i)
      threads.emplace_back([&, i] {
        EXPECT_EQ(boxes[i]->Sh("echo $((6*7))").out, "42\n");
        boxes[i]->Stop();
      });
    for (auto& t : threads) t.join();
  }
  for (const auto& [id, base] : ids) {
    Leftovers l = LeftoversOf(doctor_, id, base);
    EXPECT_TRUE(l.none()) << id << ": " << l.Describe();
  }
  EXPECT_EQ(OpenFds(), fds);
}

// A policy for a sandbox of the host image with a fresh id.
SandboxPolicy HostPolicy(const std::string& hostname) {
  SandboxPolicy p;
  p.id = NewUuid();
  p.hostname = hostname;
  p.rootfs = HostImage()->rootfs;
  p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
  return p;
}

// A sandbox whose "daemon" crashed: started by a forked process that exits
// without stopping it. The agent ends its sandbox as soon as its channel
// closes, so the channel is handed to the test first: it stands for an
// agent that has not noticed yet (busy, or wedged) while the host's side is
// gone. Closing `channel` lets the agent go.
struct Orphan {
  pid_t pid = -1;
  uint64_t base = 0;
  std::string id;
  UniqueFd channel;
};

// `runtime_dir`: the crashed skiff's SKIFF_RUNTIME_DIR, when it had one.
Orphan StartOrphan(const JailOptions& options, const std::string& runtime_dir = {}) {
  struct Msg {
    pid_t pid;
    uint64_t base;
    char id[40];
  };
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
  pid_t daemon = ::fork();
  if (daemon == 0) {
    if (!runtime_dir.empty()) ::setenv("SKIFF_RUNTIME_DIR", runtime_dir.c_str(), 1);
    JailIsolator iso(options);
    SandboxPolicy p = HostPolicy("orphan");
    auto inst = iso.Start(p);
    Msg msg{};
    UniqueFd channel;
    if (inst.ok()) {
      msg.pid = (*inst)->Describe()["pid"].get<pid_t>();
      msg.base = (*inst)->Describe()["uid_base"].get<uint64_t>();
      channel = (*inst)->TakeChannel();
    } else {
      msg.pid = -1;
    }
    std::snprintf(msg.id, sizeof msg.id, "%s", p.id.c_str());
    (void)!SendWithFd(sv[1], &msg, sizeof msg, channel ? channel.get() : -1);
    if (inst.ok()) std::move(inst).value().release();  // leaked on purpose
    _exit(0);
  }
  ::close(sv[1]);
  Msg msg{};
  UniqueFd channel;
  ssize_t n = RecvWithFd(sv[0], &msg, sizeof msg, &channel);
  ::close(sv[0]);
  ::waitpid(daemon, nullptr, 0);
  if (n != static_cast<ssize_t>(sizeof msg)) return {};
  return Orphan{msg.pid, msg.base, msg.id, std::move(channel)};
}

// An orphan with all its parts still there. Any skiff process starting up
// meanwhile (a daemon test, a CLI run) cleans up orphans too, so one may
// vanish before the test gets to it; then another is started.
Orphan StartIntactOrphan(const json& doctor, const JailOptions& options,
                         const std::string& runtime_dir = {}) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    Orphan o = StartOrphan(options, runtime_dir);
    if (o.pid <= 0) break;
    Leftovers l = LeftoversOf(doctor, o.id, o.base, runtime_dir.empty() ? paths::RuntimeDir() : runtime_dir);
    if (Alive(o.pid) && l.processes >= 1 && l.cgroups >= 1 && l.state_dir) return o;
    std::fprintf(stderr, "orphan %s was cleaned up by another process (%s); starting another\n", o.id.c_str(),
                 l.Describe().c_str());
  }
  return {};
}

TEST_F(JailTest, CleanupOrphansAfterACrash) {
  Orphan o = StartIntactOrphan(doctor_, options_);
  ASSERT_GT(o.pid, 0) << "no orphan sandbox survived long enough to be cleaned up by this test";

  iso_->CleanupOrphans();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (Alive(o.pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(Alive(o.pid));
  Leftovers after = LeftoversOf(doctor_, o.id, o.base);
  EXPECT_TRUE(after.none()) << after.Describe();
}

// Uid ranges and cgroups are host-wide, so a skiff with a runtime directory
// of its own (SKIFF_RUNTIME_DIR) shares the jail's locks with every other:
// it neither takes a running sandbox of another skiff for an orphan nor
// hands out that sandbox's uid range, and it cleans up what a crashed skiff
// with yet another runtime directory left, state directory included.
TEST_F(JailTest, SkiffsWithRuntimeDirectoriesOfTheirOwnKeepApart) {
  testing_support::TempDir rundir("jail-rundir");
  const std::string& other = rundir.path();
  auto b = Box::Start(*iso_);
  ASSERT_NE(b, nullptr);

  // Another skiff starts up (cleaning up orphans as every one does) and
  // runs a sandbox. Its exit code says what it saw.
  pid_t child = ::fork();
  if (child == 0) {
    ::setenv("SKIFF_RUNTIME_DIR", other.c_str(), 1);
    JailIsolator iso(options_);
    iso.CleanupOrphans();
    SandboxPolicy p = HostPolicy("other");
    auto inst = iso.Start(p);
    if (!inst.ok()) _exit(2);
    uint64_t base = (*inst)->Describe()["uid_base"].get<uint64_t>();
    (*inst)->Stop(200ms);
    _exit(base == b->uid_base ? 3 : 0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "the other skiff could not start a sandbox";
  EXPECT_NE(WEXITSTATUS(status), 3) << "the other skiff handed out a uid range in use";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Alive(b->pid)) << "the other skiff killed a running sandbox as an orphan";
  EXPECT_EQ(b->Sh("echo ok").out, "ok\n");
  b->Stop();

  Orphan o = StartIntactOrphan(doctor_, options_, other);
  ASSERT_GT(o.pid, 0) << "no orphan sandbox survived long enough for this test";
  iso_->CleanupOrphans();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (Alive(o.pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(Alive(o.pid));
  Leftovers after = LeftoversOf(doctor_, o.id, o.base, other);
  EXPECT_TRUE(after.none()) << after.Describe();
  ::rmdir((other + "/sandboxes").c_str());
  EXPECT_EQ(::rmdir(other.c_str()), 0) << "left in " << other << ": " << std::strerror(errno);
}

TEST_F(JailTest, ACrashedHoldersUidRangeIsClearedBeforeReuse) {
  // One uid range only, so the next sandbox must take the crashed one's.
  JailOptions one = options_;
  one.slots = 1;
  Orphan o = StartIntactOrphan(doctor_, one);
  ASSERT_GT(o.pid, 0) << "no orphan sandbox survived long enough for this test";
  ASSERT_EQ(UidOf(o.pid), one.uid_base);

  // No cleanup ran: the new sandbox's start itself must clear the range.
  JailIsolator iso(one);
  auto b = Box::Start(iso);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->uid_base, one.uid_base);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (Alive(o.pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(Alive(o.pid)) << "a process of the crashed sandbox shares the new sandbox's uids";
  EXPECT_EQ(b->Sh("echo ok").out, "ok\n");
  b->Stop();
  iso.CleanupOrphans();  // the crashed sandbox's cgroups and state
  Leftovers after = LeftoversOf(doctor_, o.id, o.base);
  EXPECT_TRUE(after.none()) << after.Describe();
}

TEST_F(JailTest, ALauncherKilledMidStartLeavesNoProcessBehind) {
  // The sandbox init waits for its cgroups, made by a thread of the
  // launcher; the launcher is killed during that wait.
  pid_t launcher = ::fork();
  if (launcher == 0) {
    ::setenv("SKIFF_TEST_CGROUP_DELAY_MS", "3000", 1);
    JailIsolator iso(options_);
    (void)iso.Start(HostPolicy("killed"));
    _exit(0);
  }
  ASSERT_GT(launcher, 0);
  auto children = [&] {
    std::set<pid_t> out;
    std::string task = "/proc/" + std::to_string(launcher) + "/task";
    if (DIR* d = ::opendir(task.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::istringstream in(ReadAll(task + "/" + e->d_name + "/children"));
        for (pid_t c; in >> c;) out.insert(c);
      }
      ::closedir(d);
    }
    return out;
  };
  // The init is the child that stays: the namespace holder goes at once.
  std::set<pid_t> seen;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto now = children();
    seen.insert(now.begin(), now.end());
    bool init_waiting = false;
    for (pid_t c : now)
      if (ReadAll("/proc/" + std::to_string(c) + "/status").find("NSpid:\t" + std::to_string(c) + "\t1\n") !=
          std::string::npos)
        init_waiting = true;
    if (init_waiting) break;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_FALSE(seen.empty()) << "the launcher never started a sandbox init";
  std::this_thread::sleep_for(200ms);  // well into the wait for cgroups
  for (pid_t c : children()) seen.insert(c);
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  ::waitpid(launcher, nullptr, 0);
  deadline = std::chrono::steady_clock::now() + 5s;
  auto any_alive = [&] {
    for (pid_t c : seen)
      if (Alive(c)) return true;
    return false;
  };
  while (any_alive() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  for (pid_t c : seen) EXPECT_FALSE(Alive(c)) << "process " << c << " outlived its killed launcher";
  iso_->CleanupOrphans();
}

TEST_F(JailTest, StartStopRate) {
  const int n = 20;
  int fds = OpenFds();
  auto t0 = std::chrono::steady_clock::now();
  double start_ms = 0;
  for (int i = 0; i < n; ++i) {
    auto img = HostImage();
    ASSERT_TRUE(img.ok());
    SandboxPolicy p;
    p.id = NewUuid();
    p.hostname = "rate";
    p.rootfs = img->rootfs;
    p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
    auto s0 = std::chrono::steady_clock::now();
    auto inst = iso_->Start(p);
    ASSERT_TRUE(inst.ok()) << inst.error().ToString();
    start_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    (*inst)->Stop(0ms);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[jail] %d sandboxes started+stopped in %.3f s: %.1f/s, Start() avg %.2f ms\n", n, secs,
              n / secs, start_ms / n);
  EXPECT_EQ(OpenFds(), fds);
}

// Fail closed: a jail that cannot build its seccomp/capability policy
// refuses every start, naming the cause, and sets nothing up.
TEST_F(JailTest, APolicyThatCannotBeBuiltRefusesToStart) {
  ::setenv("SKIFF_TEST_JAIL_POLICY_FAIL", "1", 1);
  JailIsolator iso(options_);
  ::unsetenv("SKIFF_TEST_JAIL_POLICY_FAIL");
  EXPECT_FALSE(iso.Doctor()["seccomp"]["ok"].get<bool>());
  auto img = HostImage();
  ASSERT_TRUE(img.ok());
  SandboxPolicy p;
  p.id = NewUuid();
  p.hostname = "x";
  p.rootfs = img->rootfs;
  p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
  int fds = OpenFds();
  auto r = iso.Start(p);
  ASSERT_FALSE(r.ok()) << "started without its confinement";
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("seccomp/capability policy"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("SKIFF_TEST_JAIL_POLICY_FAIL"), std::string::npos)
      << r.error().message();
  for (uint32_t i = 0; i < options_.slots; ++i) {
    Leftovers l = LeftoversOf(doctor_, p.id, uint64_t{options_.uid_base} + uint64_t{i} * 65536);
    EXPECT_TRUE(l.none()) << "slot " << i << ": " << l.Describe();
  }
  EXPECT_EQ(OpenFds(), fds);
}

TEST_F(JailTest, BadPolicyIsRejected) {
  auto img = HostImage();
  ASSERT_TRUE(img.ok());
  SandboxPolicy p;
  p.id = "../../etc";
  p.hostname = "x";
  p.rootfs = img->rootfs;
  p.state_dir = "/run/skiff/sandboxes/x";
  auto r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  p.id = NewUuid();
  p.rootfs.layers[0].lower = {"/tmp/../etc"};
  r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  p.rootfs = img->rootfs;
  // An allow entry the backend cannot parse is refused, never silently
  // dropped (network: true itself is covered by network_test).
  p.network = true;
  p.net_allow = {"bad entry!"};
  r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("network.allow[0]"), std::string::npos) << r.error().message();
  p.network = false;
  p.net_allow.clear();
  // An image with a symlink where a mount point belongs cannot redirect the
  // mount: the boot fails instead.
  {
    testing_support::TempDir layer("jail-layer");
    const std::string& top = layer.path();
    ASSERT_EQ(::chmod(top.c_str(), 0755), 0);
    ASSERT_EQ(::symlink("/", (top + "/proc").c_str()), 0);
    p.rootfs.layers[0].lower.insert(p.rootfs.layers[0].lower.begin(), top);
    r = iso_->Start(p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kS300);
    EXPECT_NE(r.error().message().find("ENOTDIR"), std::string::npos) << r.error().message();
    p.rootfs = img->rootfs;
  }
  p.rootfs.layers[0].lower = {"/nonexistent-skiff-dir"};
  r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("boot"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace skiff
