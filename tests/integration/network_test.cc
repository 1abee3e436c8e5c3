// network: true on both backends (spec §6.3), end to end: the host-owned
// namespace, slirp4netns, the egress filter, the guest/jail side
// configuration, the loopback rewrite and teardown. Host services are test
// servers on this host; nothing here needs the internet.
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/paths.h"
#include "base/sha256.h"
#include "base/text.h"
#include "images/catalog.h"
#include "isolation/jail/jail.h"
#include "isolation/microvm/microvm.h"
#include "isolation/net/sandbox_net.h"
#include "protocol/client.h"
#include "busybox_rootfs.h"
#include "sandbox/manager.h"

namespace skiff {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A TCP server on the host answering "hello-<tag>\n" to every connection.
class HostServer {
 public:
  HostServer(const char* addr, std::string tag) : tag_(std::move(tag)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &sa.sin_addr);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd_, 16) == 0;
    socklen_t len = sizeof sa;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        std::string msg = "hello-" + tag_ + "\n";
        (void)!::write(c, msg.data(), msg.size());
        ::close(c);
      }
    });
  }
  ~HostServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  std::string tag_;
  int fd_ = -1;
  bool ok_ = false;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// The host's first non-loopback IPv4 address ("" if none).
std::string HostIpv4() {
  ifaddrs* list = nullptr;
  std::string out;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr && out.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::string(buf).rfind("127.", 0) != 0) out = buf;
  }
  ::freeifaddrs(list);
  return out;
}

// Processes (by /proc/*/ns/net) or descriptors (by /proc/*/fd) that still
// reference the network namespace with inode `ino`.
int NetnsUsers(uint64_t ino) {
  const std::string want = "net:[" + std::to_string(ino) + "]";
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::string base = std::string("/proc/") + e->d_name;
    char buf[64];
    ssize_t k = ::readlink((base + "/ns/net").c_str(), buf, sizeof buf - 1);
    if (k > 0 && std::string(buf, static_cast<size_t>(k)) == want) ++n;
    if (DIR* f = ::opendir((base + "/fd").c_str())) {
      while (dirent* fe = ::readdir(f)) {
        k = ::readlinkat(::dirfd(f), fe->d_name, buf, sizeof buf - 1);
        if (k > 0 && std::string(buf, static_cast<size_t>(k)) == want) ++n;
      }
      ::closedir(f);
    }
  }
  ::closedir(d);
  return n;
}

bool Alive(pid_t pid) {
  struct stat st{};
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0;
}

using testing_support::BusyboxRootfs;

std::string Sh(proto::Client& c, const std::string& script, int timeout_ms = 30000) {
  auto s = c.Open(json{{"op", "exec"},
                       {"argv", {"/bin/sh", "-c", script}},
                       {"env", {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}},
                       {"timeout_ms", timeout_ms}});
  if (!s.ok()) return "<open failed: " + s.error().message() + ">";
  (void)(*s)->End(proto::kStdin);
  std::string out;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms + 10000);
  for (;;) {
    auto e = (*s)->Next(deadline);
    if (!e) return out + "<test timeout>";
    if (e->kind == proto::Event::Kind::kData) out += e->data;
    if (e->kind == proto::Event::Kind::kResult) return out;
    if (e->kind == proto::Event::Kind::kError || e->kind == proto::Event::Kind::kClosed)
      return out + "<" + e->json.dump() + ">";
  }
}

// The checks every networked sandbox must pass, in one exec: interfaces,
// default route, resolv.conf, then connection attempts in parallel with
// 2 s timeouts.
std::string ProbeScript(uint16_t listed, uint16_t unlisted, const std::string& host_ip,
                        uint16_t host_ip_port) {
  std::ostringstream s;
  s << "echo ifs: $(ls /sys/class/net)\n"
    << "while read i d g rest; do [ \"$d\" = 00000000 ] && echo default: $i $g; done "
       "< /proc/net/route\n"
    << "echo resolv: $(cat /etc/resolv.conf)\n"
    << "try() { if /bin/busybox nc -w 2 $2 $3 </dev/null >/tmp/nc.$1 2>&1; then "
       "echo \"$1: ok $(cat /tmp/nc.$1)\"; else echo \"$1: fail\"; fi; }\n"
    << "try allowedport " << net::kGateway << " " << listed << " &\n"
    << "try otherport " << net::kGateway << " " << unlisted << " &\n"
    << "try ownloopback 127.0.0.1 " << listed << " &\n"
    << "try metadata 169.254.169.254 80 &\n"
    << "try private 192.168.0.1 80 &\n"
    << "try private10 10.0.0.1 80 &\n";
  if (!host_ip.empty()) s << "try hostaddr " << host_ip << " " << host_ip_port << " &\n";
  s << "wait\n";
  return s.str();
}

void ExpectProbe(const std::string& out, const std::string& nic, bool have_host_ip) {
  EXPECT_NE(out.find("ifs: " + std::string(nic == "eth0" ? "eth0 lo" : "lo tap0") + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("default: " + nic + " 0202000A\n"), std::string::npos) << out;  // via 10.0.2.2
  EXPECT_NE(out.find("resolv: nameserver 10.0.2.3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("allowedport: ok hello-listed\n"), std::string::npos) << out;
  EXPECT_NE(out.find("otherport: fail\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ownloopback: fail\n"), std::string::npos) << out;  // its own lo, no server
  EXPECT_NE(out.find("metadata: fail\n"), std::string::npos) << out;
  EXPECT_NE(out.find("private: fail\n"), std::string::npos) << out;
  EXPECT_NE(out.find("private10: fail\n"), std::string::npos) << out;
  if (have_host_ip) {
    EXPECT_NE(out.find("hostaddr: fail\n"), std::string::npos) << out;
  }
}

class NetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "sandboxes need root on this host";
    ::setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    auto st = net::Available();
    ASSERT_TRUE(st.ok()) << st.error().ToString();
    ASSERT_TRUE(listed_.ok() && unlisted_.ok() && any_.ok());
    host_ip_ = HostIpv4();
  }

  SandboxPolicy Base() {
    SandboxPolicy p;
    p.id = NewUuid();
    p.hostname = "net-" + p.id.substr(0, 8);
    p.state_dir = paths::RuntimeDir() + "/sandboxes/" + p.id;
    p.network = true;
    p.net_host_ports = {listed_.port()};
    return p;
  }

  // Starts, probes, stops and checks that nothing of the network is left.
  void RunProbe(Isolator& iso, SandboxPolicy p, const std::string& nic,
                const std::string& extra_script = "", std::string* extra_out = nullptr) {
    auto inst = iso.Start(p);
    ASSERT_TRUE(inst.ok()) << inst.error().ToString();
    json d = (*inst)->Describe();
    ASSERT_TRUE(d.contains("net_helper_pid")) << d.dump();
    ASSERT_TRUE(d.contains("netns_inode")) << d.dump();
    pid_t helper = d["net_helper_pid"].get<pid_t>();
    uint64_t ino = d["netns_inode"].get<uint64_t>();
    EXPECT_TRUE(Alive(helper));
    EXPECT_GT(NetnsUsers(ino), 0);
    {
      auto c = proto::Client::Connect((*inst)->TakeChannel(), 30s);
      ASSERT_TRUE(c.ok()) << c.error().ToString() << " / " << (*inst)->ExitReport();
      int before = listed_.accepted();
      std::string out = Sh(**c, ProbeScript(listed_.port(), unlisted_.port(), host_ip_, any_.port()));
      ExpectProbe(out, nic, !host_ip_.empty());
      EXPECT_EQ(listed_.accepted(), before + 1);
      EXPECT_EQ(unlisted_.accepted(), 0) << "a connection reached an unlisted host port";
      EXPECT_EQ(any_.accepted(), 0) << "a connection reached a host address";
      if (!extra_script.empty() && extra_out) *extra_out = Sh(**c, extra_script);
    }
    (*inst)->Stop(1000ms);
    inst->reset();
    // No helper, no namespace user, nothing left.
    EXPECT_FALSE(Alive(helper)) << "slirp4netns " << helper << " survived the sandbox";
    EXPECT_EQ(NetnsUsers(ino), 0) << "the sandbox network namespace is still referenced";
  }

  HostServer listed_{"127.0.0.1", "listed"};
  HostServer unlisted_{"127.0.0.1", "unlisted"};
  HostServer any_{"0.0.0.0", "any"};
  std::string host_ip_;
};

TEST_F(NetworkTest, JailEgressPolicyAndTeardown) {
  auto iso = MakeJailIsolator();
  auto img = HostImage();
  ASSERT_TRUE(img.ok()) << img.error().ToString();
  SandboxPolicy p = Base();
  p.rootfs = img->rootfs;
  // Root in the sandbox has no CAP_NET_ADMIN over the host-owned namespace:
  // it cannot take the interface down or drop the route, and the filter
  // still holds afterwards.
  std::string tamper;
  RunProbe(*iso, p, "tap0",
           "/bin/busybox ip link set tap0 down 2>/dev/null; echo link=$?; "
           "/bin/busybox ip route del default 2>/dev/null; echo route=$?; "
           "/bin/busybox nc -w 2 10.0.2.2 " + std::to_string(listed_.port()) + " </dev/null",
           &tamper);
  EXPECT_EQ(tamper.find("link=0"), std::string::npos) << tamper;
  EXPECT_EQ(tamper.find("route=0"), std::string::npos) << tamper;
  EXPECT_NE(tamper.find("hello-listed"), std::string::npos) << tamper;
}

TEST_F(NetworkTest, JailRefusesDomainAllowEntriesNamingTheKey) {
  auto iso = MakeJailIsolator();
  auto img = HostImage();
  ASSERT_TRUE(img.ok());
  SandboxPolicy p = Base();
  p.rootfs = img->rootfs;
  p.net_allow = {"203.0.113.0/24", "pypi.org"};
  auto inst = iso->Start(p);
  ASSERT_FALSE(inst.ok());
  EXPECT_EQ(inst.error().code(), Code::kS300);
  EXPECT_NE(inst.error().message().find("network.allow[1] 'pypi.org'"), std::string::npos)
      << inst.error().message();
  struct stat st{};
  EXPECT_NE(::stat(p.state_dir.c_str(), &st), 0) << "a failed create left its state dir";
}

TEST_F(NetworkTest, AllowCidrRulesetsLoadInTheKernel) {
  // Every shape of allow list produces a ruleset the kernel accepts (both
  // families), and the setup is torn down with the object.
  for (auto mode : {net::Mode::kLocal, net::Mode::kBridge}) {
    auto sn = net::SandboxNet::Create(
        {{listed_.port(), 443}, {"10.20.0.0/16", "203.0.113.9", "198.51.100.0/24", "2001:db8::/32"}},
        mode);
    ASSERT_TRUE(sn.ok()) << sn.error().ToString();
    pid_t helper = (*sn)->helper_pid();
    EXPECT_TRUE((*sn)->HelperRunning());
    sn->reset();
    EXPECT_FALSE(Alive(helper));
  }
}

TEST_F(NetworkTest, JailLoopbackRewriteOfCreateEnv) {
  Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = "jail";
  cfg.network.host_ports = {listed_.port()};
  auto m = SandboxManager::FromConfig(cfg);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  std::string listed = std::to_string(listed_.port()), other = std::to_string(unlisted_.port());
  CreateSpec cs;
  cs.image = "host";
  cs.network = true;
  cs.env = {{"API", "http://localhost:" + listed + "/v1"},
            {"DB", "postgres://127.0.0.1:" + listed},
            {"OTHER", "http://localhost:" + other}};
  auto id = (*m)->Create(cs);
  ASSERT_TRUE(id.ok()) << id.error().ToString();
  ExecSpec es;
  es.sandbox_id = id->sandbox_id;
  // The rewritten URL is also the way to the host service.
  es.argv = {"/bin/sh", "-c",
             "echo $API $DB $OTHER $EXECENV; h=${API#http://}; h=${h%/v1}; "
             "/bin/busybox nc -w 2 ${h%:*} ${h#*:} </dev/null"};
  es.env = {{"EXECENV", "http://localhost:" + listed}};  // exec env is never rewritten
  es.timeout_ms = 30000;
  auto r = (*m)->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "http://10.0.2.2:" + listed + "/v1 postgres://10.0.2.2:" + listed +
                                " http://localhost:" + other + " http://localhost:" + listed +
                                "\nhello-listed\n")
      << r->stderr_text;
  // network: false: no rewrite, only lo.
  CreateSpec off = cs;
  off.network = false;
  auto id2 = (*m)->Create(off);
  ASSERT_TRUE(id2.ok()) << id2.error().ToString();
  es.sandbox_id = id2->sandbox_id;
  es.argv = {"/bin/sh", "-c", "echo $API; ls /sys/class/net"};
  r = (*m)->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "http://localhost:" + listed + "/v1\nlo\n");
  (*m)->Shutdown();
}

class MicrovmNetworkTest : public NetworkTest {
 protected:
  void SetUp() override {
    NetworkTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    iso_ = MakeMicrovmIsolator();
    auto st = iso_->Available();
    ASSERT_TRUE(st.ok()) << st.error().ToString();
    rootfs_ = BusyboxRootfs();
    ASSERT_FALSE(rootfs_.empty()) << "could not build the busybox erofs test image";
  }
  SandboxPolicy VmPolicy(bool network) {
    SandboxPolicy p = Base();
    p.network = network;
    p.rootfs.block_image = rootfs_;
    p.rootfs.block_fstype = "erofs";
    p.memory_mb = 256;
    return p;
  }
  std::unique_ptr<Isolator> iso_;
  std::string rootfs_;
};

TEST_F(MicrovmNetworkTest, GuestEgressPolicyAndTeardown) {
  RunProbe(*iso_, VmPolicy(true), "eth0");
}

TEST_F(MicrovmNetworkTest, NoNetworkMeansOnlyLoopback) {
  auto inst = iso_->Start(VmPolicy(false));
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  EXPECT_FALSE((*inst)->Describe().contains("net_helper_pid"));
  auto c = proto::Client::Connect((*inst)->TakeChannel(), 30s);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(Sh(**c, "ls /sys/class/net; cat /sys/class/net/lo/operstate /sys/class/net/lo/flags"),
            "lo\nunknown\n0x9\n");
  (*inst)->Stop(1000ms);
}

}  // namespace
}  // namespace skiff
