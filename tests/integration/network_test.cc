// network: true on both backends (docs/security.md#networking-network-true), end to end: the host-owned
// namespace, slirp4netns, the egress filter, the guest/jail side
// configuration, the loopback rewrite and teardown. Host services are test
// servers on this host; nothing here needs the internet.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <ldns/ldns.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "base/sha256.h"
#include "base/text.h"
#include "busybox_rootfs.h"
#include "images/catalog.h"
#include "isolation/jail/jail.h"
#include "isolation/microvm/microvm.h"
#include "isolation/net/sandbox_net.h"
#include "protocol/client.h"
#include "sandbox/backends.h"
#include "support/temp_dir.h"

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

// True when the symlink `name` (relative to `dirfd`, or absolute) reads `want`.
bool LinkIs(int dirfd, const std::string& name, const std::string& want) {
  char buf[64];
  ssize_t k = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf - 1);
  return k > 0 && std::string(buf, static_cast<size_t>(k)) == want;
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
    if (LinkIs(AT_FDCWD, base + "/ns/net", want)) ++n;
    if (DIR* f = ::opendir((base + "/fd").c_str())) {
      while (dirent* fe = ::readdir(f))
        if (LinkIs(::dirfd(f), fe->d_name, want)) ++n;
      ::closedir(f);
    }
  }
  ::closedir(d);
  return n;
}

bool Alive(pid_t pid) {
  struct stat st {};
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
  EXPECT_NE(out.find("ifs: " + std::string(nic == "eth0" ? "eth0 lo" : "lo tap0") + "\n"), std::string::npos)
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
  void RunProbe(Isolator& iso, SandboxPolicy p, const std::string& nic, const std::string& extra_script = "",
                std::string* extra_out = nullptr) {
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
           "/bin/busybox nc -w 2 10.0.2.2 " +
               std::to_string(listed_.port()) + " </dev/null",
           &tamper);
  EXPECT_EQ(tamper.find("link=0"), std::string::npos) << tamper;
  EXPECT_EQ(tamper.find("route=0"), std::string::npos) << tamper;
  EXPECT_NE(tamper.find("hello-listed"), std::string::npos) << tamper;
}

TEST_F(NetworkTest, JailRefusesAnUnparsableAllowEntryNamingTheKey) {
  auto iso = MakeJailIsolator();
  auto img = HostImage();
  ASSERT_TRUE(img.ok());
  SandboxPolicy p = Base();
  p.rootfs = img->rootfs;
  p.net_allow = {"203.0.113.0/24", "pypi.org", "bad entry!"};
  auto inst = iso->Start(p);
  ASSERT_FALSE(inst.ok());
  EXPECT_EQ(inst.error().code(), Code::kS300);
  EXPECT_NE(inst.error().message().find("network.allow[2] 'bad entry!'"), std::string::npos)
      << inst.error().message();
  struct stat st {};
  EXPECT_NE(::stat(p.state_dir.c_str(), &st), 0) << "a failed create left its state dir";
}

TEST_F(NetworkTest, AllowCidrRulesetsLoadInTheKernel) {
  // Every shape of allow list produces a ruleset the kernel accepts (both
  // families), and the setup is torn down with the object.
  for (auto mode : {net::Mode::kLocal, net::Mode::kBridge}) {
    auto sn = net::SandboxNet::Create(
        {{listed_.port(), 443}, {"10.20.0.0/16", "203.0.113.9", "198.51.100.0/24", "2001:db8::/32"}}, mode);
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
  auto m = MakeSandboxManager(cfg);
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

// ---- network.allow domain entries: the DNS filter ----

// Runs `fn` on a thread whose network namespace is `netns_fd`.
template <typename F>
auto InNetns(int netns_fd, F fn) -> decltype(fn()) {
  decltype(fn()) out{};
  std::thread t([&] {
    if (::setns(netns_fd, CLONE_NEWNET) == 0) out = fn();
  });
  t.join();
  return out;
}

// A new, empty network namespace (with lo up) held by the returned fd.
int NewNetns() {
  int fd = -1;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) == 0) fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  });
  t.join();
  return fd;
}

// /proc/<self>/fd/<n> of a descriptor of this process naming the network
// namespace `ino` (the SandboxNet's own), for nsenter and ip.
std::string NetnsPath(uint64_t ino) {
  const std::string want = "net:[" + std::to_string(ino) + "]";
  std::string self = "/proc/" + std::to_string(::getpid()) + "/fd";
  std::string out;
  DIR* d = ::opendir(self.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr)
    if (LinkIs(::dirfd(d), e->d_name, want)) out = self + "/" + e->d_name;
  if (d) ::closedir(d);
  return out;
}

// Threads of this process in network namespace `ino`.
int OwnThreadsIn(uint64_t ino) {
  const std::string want = "net:[" + std::to_string(ino) + "]";
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (LinkIs(AT_FDCWD, std::string("/proc/self/task/") + e->d_name + "/ns/net", want)) ++n;
  }
  ::closedir(d);
  return n;
}

std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return "<popen failed>";
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int st = ::pclose(f);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) out += "<exit " + std::to_string(st) + ">";
  return out;
}

// The upstream resolver of the tests, on the host's loopback: a fixed zone
// of A and CNAME records; NXDOMAIN for anything else. Counts what it is
// asked, so names the filter refuses can be shown never to reach it.
class TestUpstream {
 public:
  TestUpstream() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    socklen_t len = sizeof sa;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TestUpstream() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  // Zone lines, e.g. "api.example.test. 5 IN A 198.51.100.7".
  void Add(const std::string& rr) {
    std::lock_guard<std::mutex> g(mu_);
    zone_.push_back(rr);
  }
  int Asked(const std::string& name) {
    std::lock_guard<std::mutex> g(mu_);
    return asked_[name];
  }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      uint8_t buf[4096];
      sockaddr_storage from{};
      socklen_t flen = sizeof from;
      ssize_t n = ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &flen);
      ldns_pkt* q = nullptr;
      if (n <= 0 || ldns_wire2pkt(&q, buf, static_cast<size_t>(n)) != LDNS_STATUS_OK) continue;
      ldns_rr* question = ldns_rr_list_rr(ldns_pkt_question(q), 0);
      char* qn = ldns_rdf2str(ldns_rr_owner(question));
      std::string name = qn ? qn : "";
      free(qn);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      ldns_pkt* a = ldns_pkt_new();
      ldns_pkt_set_id(a, ldns_pkt_id(q));
      ldns_pkt_set_qr(a, true);
      ldns_pkt_set_rd(a, ldns_pkt_rd(q));
      ldns_pkt_set_ra(a, true);
      ldns_pkt_push_rr(a, LDNS_SECTION_QUESTION, ldns_rr_clone(question));
      bool found = false, known = false;  // known: the name exists (NOERROR, maybe no data)
      {
        std::lock_guard<std::mutex> g(mu_);
        ++asked_[name];
        // Follow CNAMEs like a recursive resolver would.
        std::string want = name;
        for (int hop = 0; hop < 4; ++hop) {
          std::string next;
          for (const auto& line : zone_) {
            ldns_rr* rr = nullptr;
            if (ldns_rr_new_frm_str(&rr, line.c_str(), 0, nullptr, nullptr) != LDNS_STATUS_OK) continue;
            char* o = ldns_rdf2str(ldns_rr_owner(rr));
            bool match = o && want == o;
            free(o);
            known |= match;
            auto t = ldns_rr_get_type(rr);
            if (match && (t == ldns_rr_get_type(question) || t == LDNS_RR_TYPE_CNAME)) {
              if (t == LDNS_RR_TYPE_CNAME) {
                char* c = ldns_rdf2str(ldns_rr_rdf(rr, 0));
                next = c ? c : "";
                free(c);
              }
              ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
              found = true;
            } else {
              ldns_rr_free(rr);
            }
          }
          if (next.empty()) break;
          want = next;
        }
      }
      if (!found && !known) ldns_pkt_set_rcode(a, LDNS_RCODE_NXDOMAIN);
      uint8_t* wire = nullptr;
      size_t wlen = 0;
      if (ldns_pkt2wire(&wire, a, &wlen) == LDNS_STATUS_OK)
        ::sendto(fd_, wire, wlen, 0, reinterpret_cast<sockaddr*>(&from), flen);
      free(wire);
      ldns_pkt_free(a);
      ldns_pkt_free(q);
    }
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> zone_;
  std::map<std::string, int> asked_;
  std::thread thread_;
};

// One query to the sandbox resolver (10.0.2.3:53) from inside the
// namespace: "rcode: addr addr ..." ("timeout" when nothing came back).
std::string Ask(int netns_fd, const std::string& name, bool tcp = false,
                const std::vector<uint8_t>* raw = nullptr) {
  return InNetns(netns_fd, [&]() -> std::string {
    std::vector<uint8_t> msg;
    if (raw) {
      msg = *raw;
    } else {
      ldns_pkt* q =
          ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
      ldns_pkt_set_id(q, 4242);
      uint8_t* w = nullptr;
      size_t wl = 0;
      ldns_pkt2wire(&w, q, &wl);
      msg.assign(w, w + wl);
      free(w);
      ldns_pkt_free(q);
    }
    int fd = ::socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(53);
    ::inet_pton(AF_INET, net::kDns, &sa.sin_addr);
    std::vector<uint8_t> in(65536);
    ssize_t n = -1;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      if (tcp) {
        std::vector<uint8_t> framed = {static_cast<uint8_t>(msg.size() >> 8),
                                       static_cast<uint8_t>(msg.size())};
        framed.insert(framed.end(), msg.begin(), msg.end());
        (void)!::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL);
        size_t got = 0;
        while (got < 2 || got < 2 + (static_cast<size_t>(in[0]) << 8 | in[1])) {
          ssize_t k = ::recv(fd, in.data() + got, in.size() - got, 0);
          if (k <= 0) break;
          got += static_cast<size_t>(k);
        }
        if (got >= 2) {
          in.erase(in.begin(), in.begin() + 2);
          n = static_cast<ssize_t>(got - 2);
        }
      } else {
        (void)!::send(fd, msg.data(), msg.size(), 0);
        n = ::recv(fd, in.data(), in.size(), 0);
      }
    }
    ::close(fd);
    if (n <= 0) return "timeout";
    ldns_pkt* a = nullptr;
    if (ldns_wire2pkt(&a, in.data(), static_cast<size_t>(n)) != LDNS_STATUS_OK) return "garbage";
    static const char* kRcodes[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"};
    unsigned rc = ldns_pkt_get_rcode(a);
    std::string out = rc < 6 ? kRcodes[rc] : std::to_string(rc);
    out += ":";
    ldns_rr_list* ans = ldns_pkt_answer(a);
    for (size_t i = 0; i < ldns_rr_list_rr_count(ans); ++i) {
      ldns_rr* rr = ldns_rr_list_rr(ans, i);
      if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_A) continue;
      char* t = ldns_rdf2str(ldns_rr_rdf(rr, 0));
      out += std::string(" ") + t + "/" + std::to_string(ldns_rr_ttl(rr));
      free(t);
    }
    ldns_pkt_free(a);
    return out;
  });
}

// Everything crossing the host's loopback while it lives: an AF_PACKET
// capture on `lo` of this process's namespace, the one slirp4netns
// delivers to when the gateway maps to the host's loopback.
class LoopbackCapture {
 public:
  LoopbackCapture() {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(::if_nametoindex("lo"));
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sll), sizeof sll) == 0;
    thread_ = std::thread([this] {
      std::vector<char> buf(70000);
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        std::lock_guard<std::mutex> g(mu_);
        if (n > 0 && seen_.size() < (64u << 20)) seen_.append(buf.data(), static_cast<size_t>(n));
      }
    });
  }
  ~LoopbackCapture() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }
  bool Saw(const std::string& bytes) {
    std::lock_guard<std::mutex> g(mu_);
    return seen_.find(bytes) != std::string::npos;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string seen_;
  std::thread thread_;
};

// An A query for `name` in wire format.
std::vector<uint8_t> QueryWire(const std::string& name) {
  ldns_pkt* q =
      ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
  ldns_pkt_set_id(q, 4243);
  uint8_t* w = nullptr;
  size_t wl = 0;
  ldns_pkt2wire(&w, q, &wl);
  std::vector<uint8_t> out(w, w + wl);
  free(w);
  ldns_pkt_free(q);
  return out;
}

// An Ethernet frame carrying one IPv4 UDP datagram (no UDP checksum).
std::vector<uint8_t> UdpFrame(const uint8_t src_mac[6], const uint8_t dst_mac[6], const char* src_ip,
                              uint16_t sport, const char* dst_ip, uint16_t dport,
                              const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f(dst_mac, dst_mac + 6);
  f.insert(f.end(), src_mac, src_mac + 6);
  f.insert(f.end(), {0x08, 0x00});
  iphdr ip{};
  ip.version = 4;
  ip.ihl = 5;
  ip.ttl = 64;
  ip.protocol = IPPROTO_UDP;
  ip.tot_len = htons(static_cast<uint16_t>(20 + 8 + payload.size()));
  ::inet_pton(AF_INET, src_ip, &ip.saddr);
  ::inet_pton(AF_INET, dst_ip, &ip.daddr);
  uint32_t sum = 0;
  const auto* words = reinterpret_cast<const uint16_t*>(&ip);
  for (int i = 0; i < 10; ++i) sum += words[i];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip.check = static_cast<uint16_t>(~sum);
  const auto* ipb = reinterpret_cast<const uint8_t*>(&ip);
  f.insert(f.end(), ipb, ipb + sizeof ip);
  uint16_t udp[4] = {htons(sport), htons(dport), htons(static_cast<uint16_t>(8 + payload.size())), 0};
  const auto* ub = reinterpret_cast<const uint8_t*>(udp);
  f.insert(f.end(), ub, ub + sizeof udp);
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

// The forwarding entries the bridge holds for the guest's port that it
// learned or was given (not the port's own permanent ones).
std::vector<std::string> GuestPortEntries(const std::string& ns_path) {
  std::vector<std::string> out;
  std::istringstream in(Shell("nsenter --net=" + ns_path + " bridge fdb show br br0"));
  for (std::string line; std::getline(in, line);)
    if (line.find(" dev vm0 ") != std::string::npos && line.find("permanent") == std::string::npos)
      out.push_back(line);
  return out;
}

constexpr uint8_t kGuestMacBytes[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
// slirp4netns' MACs: 52:55 and the address it answers for.
constexpr uint8_t kSlirpDnsMac[6] = {0x52, 0x55, 0x0a, 0x00, 0x02, 0x03};
constexpr uint8_t kSlirpGatewayMac[6] = {0x52, 0x55, 0x0a, 0x00, 0x02, 0x02};

TEST_F(NetworkTest, GuestPortLearnsNoForgedSourceMac) {
  auto sn = net::SandboxNet::Create({{}, {}}, net::Mode::kBridge);
  ASSERT_TRUE(sn.ok()) << sn.error().ToString();
  std::string ns = NetnsPath((*sn)->netns_inode());
  UniqueFd tap = (*sn)->TakeTap();
  ASSERT_TRUE(tap);
  // What a guest writes to its NIC: 2000 frames, each from another
  // (unicast) source MAC.
  std::vector<uint8_t> payload(16, 'x');
  for (int i = 0; i < 2000; ++i) {
    uint8_t mac[6] = {0x02, 0x10, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 0x00, 0x01};
    auto f = UdpFrame(mac, kSlirpDnsMac, net::kGuestAddress, 40000, net::kGateway, 9, payload);
    ASSERT_EQ(::write(tap.get(), f.data(), f.size()), static_cast<ssize_t>(f.size()));
  }
  std::this_thread::sleep_for(200ms);
  auto entries = GuestPortEntries(ns);
  ASSERT_EQ(entries.size(), 1u) << "the bridge learned forged source MACs: " << entries.size() << " entries";
  EXPECT_NE(entries[0].find(std::string(net::kGuestMac) + " dev vm0 master br0 static"), std::string::npos)
      << entries[0];
}

TEST_F(NetworkTest, SlirpRefusesTheHostLoopbackWithoutHostPorts) {
  // Even with the namespace's ruleset gone, the gateway leads to no host
  // loopback service when no host port is listed; with one listed, the
  // same connection goes through (so the probe can tell).
  for (bool listed : {false, true}) {
    std::vector<uint16_t> ports;
    if (listed) ports = {unlisted_.port()};
    auto sn = net::SandboxNet::Create({ports, {}}, net::Mode::kLocal);
    ASSERT_TRUE(sn.ok()) << sn.error().ToString();
    std::string flush =
        Shell("nsenter --net=" + NetnsPath((*sn)->netns_inode()) + " nft delete table inet skiff");
    ASSERT_EQ(flush, "");
    int before = unlisted_.accepted();
    std::string got = InNetns((*sn)->netns_fd(), [&]() -> std::string {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      timeval tv{3, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(unlisted_.port());
      ::inet_pton(AF_INET, net::kGateway, &sa.sin_addr);
      std::string out = "connect failed";
      if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
        char buf[64];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        out = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "no data";
      }
      ::close(fd);
      return out;
    });
    if (listed) {
      EXPECT_EQ(got, "hello-unlisted\n");
      EXPECT_EQ(unlisted_.accepted(), before + 1);
    } else {
      EXPECT_NE(got, "hello-unlisted\n") << "slirp4netns reached the host's loopback";
      EXPECT_EQ(unlisted_.accepted(), before);
    }
  }
}

class DomainAllowTest : public NetworkTest {
 protected:
  void SetUp() override {
    NetworkTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // TTL 5 is raised to the 30 s minimum of the set; 86400 capped to 1 h.
    for (const char* rr :
         {"api.example.test. 5 IN A 198.51.100.7", "x.wild.test. 86400 IN A 198.51.100.8",
          "a.b.wild.test. 300 IN A 198.51.100.8", "wild.test. 300 IN A 198.51.100.99",
          "other.test. 300 IN A 198.51.100.9", "rebind.example.test. 300 IN A 127.0.0.1",
          "rebind.example.test. 300 IN A 10.0.0.1", "rebind.example.test. 300 IN A 169.254.169.254",
          "alias.example.test. 300 IN CNAME cdn.other.test.", "cdn.other.test. 300 IN A 198.51.100.11"})
      upstream_.Add(rr);
    ::setenv("SKIFF_DNS_UPSTREAM", ("127.0.0.1:" + std::to_string(upstream_.port())).c_str(), 1);
  }
  void TearDown() override { ::unsetenv("SKIFF_DNS_UPSTREAM"); }

  SandboxPolicy Filtered(SandboxPolicy p) {
    p.net_allow = {"api.example.test", "*.wild.test", "rebind.example.test", "alias.example.test"};
    return p;
  }

  std::string SetOf(const std::string& ns_path, const char* family) {
    return Shell("nsenter --net=" + ns_path + " nft list set " + family + " skiff dns4");
  }

  void ExpectDnsVerdicts(int netns_fd) {
    EXPECT_EQ(Ask(netns_fd, "api.example.test"), "NOERROR: 198.51.100.7/5");
    EXPECT_EQ(Ask(netns_fd, "API.Example.TEST."), "NOERROR: 198.51.100.7/5") << "names are case-blind";
    EXPECT_EQ(Ask(netns_fd, "x.wild.test"), "NOERROR: 198.51.100.8/3600") << "TTL capped to 1 h";
    EXPECT_EQ(Ask(netns_fd, "a.b.wild.test", /*tcp=*/true), "NOERROR: 198.51.100.8/300");
    EXPECT_EQ(Ask(netns_fd, "wild.test"), "REFUSED:") << "*.x does not cover the apex";
    EXPECT_EQ(Ask(netns_fd, "other.test"), "REFUSED:");
    EXPECT_EQ(Ask(netns_fd, "other.test", /*tcp=*/true), "REFUSED:");
    EXPECT_EQ(Ask(netns_fd, "xapi.example.test"), "REFUSED:");
    EXPECT_EQ(Ask(netns_fd, "a.api.example.test"), "REFUSED:") << "exact entries cover no subdomain";
    EXPECT_EQ(Ask(netns_fd, "alias.example.test"), "NOERROR: 198.51.100.11/300");
    std::string rebind = Ask(netns_fd, "rebind.example.test");
    EXPECT_EQ(rebind.rfind("NOERROR:", 0), 0u) << rebind;
    // Garbage gets FORMERR or nothing, and the filter keeps serving.
    std::vector<uint8_t> junk = {0x12, 0x34, 0x01, 0x00, 0x00, 0x05, 0xff,
                                 0xff, 0xff, 0xff, 0xff, 0xff, 0x03};
    EXPECT_EQ(Ask(netns_fd, "", false, &junk), "FORMERR:");
    std::vector<uint8_t> tiny = {1, 2, 3};
    EXPECT_EQ(Ask(netns_fd, "", false, &tiny), "timeout");
    EXPECT_EQ(Ask(netns_fd, "api.example.test"), "NOERROR: 198.51.100.7/5");
    EXPECT_EQ(upstream_.Asked("wild.test."), 0);
    EXPECT_EQ(upstream_.Asked("other.test."), 0) << "a refused name reached the upstream resolver";
  }

  void ExpectSet(const std::string& set) {
    for (const char* in : {"198.51.100.7 timeout 30s", "198.51.100.8 timeout 1h", "198.51.100.11"})
      EXPECT_NE(set.find(in), std::string::npos) << in << "\n" << set;
    for (const char* out : {"198.51.100.9", "198.51.100.99", "127.0.0.1", "10.0.0.1", "169.254"})
      EXPECT_EQ(set.find(out), std::string::npos) << out << "\n" << set;
  }

  TestUpstream upstream_;
};

TEST_F(DomainAllowTest, JailResolvesOnlyAllowedNamesAndReachesOnlyTheirAddresses) {
  auto iso = MakeJailIsolator();
  auto img = HostImage();
  ASSERT_TRUE(img.ok()) << img.error().ToString();
  SandboxPolicy p = Filtered(Base());
  p.rootfs = img->rootfs;
  int threads_before = 0;
  {
    DIR* d = ::opendir("/proc/self/task");
    while (dirent* e = ::readdir(d)) threads_before += e->d_name[0] != '.';
    ::closedir(d);
  }
  auto inst = iso->Start(p);
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  uint64_t ino = (*inst)->Describe()["netns_inode"].get<uint64_t>();
  std::string ns = NetnsPath(ino);
  ASSERT_FALSE(ns.empty());
  int ns_fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ns_fd, 0);
  EXPECT_EQ(OwnThreadsIn(ino), 1) << "one filter thread serves the sandbox";

  // A peer namespace behind a veth stands in for the internet: the
  // sandbox's route to 198.51.100.0/24 leads there, so every connection
  // the filter lets through stays on this host.
  int peer = NewNetns();
  ASSERT_GE(peer, 0);
  std::string peer_path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(peer);
  std::string setup =
      Shell("set -e; nsenter --net=" + ns + " ip link add sbx0 type veth peer name peer0 netns " + peer_path +
            "; nsenter --net=" + ns + " ip link set sbx0 up; nsenter --net=" + ns +
            " ip route add 198.51.100.0/24 dev sbx0; nsenter --net=" + peer_path +
            " sh -c 'ip link set lo up; ip link set peer0 up; for a in 7 8 9 11; do ip addr add "
            "198.51.100.$a/32 dev peer0; done; ip route add 10.0.2.0/24 dev peer0'");
  ASSERT_EQ(setup.find("<exit"), std::string::npos) << setup;
  auto web = InNetns(peer, [] { return std::make_unique<HostServer>("0.0.0.0", "peer"); });
  ASSERT_TRUE(web && web->ok());
  // Port 53 on the peer: a resolver the sandbox must not reach.
  int dns53 = InNetns(peer, [] {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(53);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 4) == 0 ? fd : -1;
  });
  ASSERT_GE(dns53, 0);

  ExpectDnsVerdicts(ns_fd);
  {
    auto c = proto::Client::Connect((*inst)->TakeChannel(), 30s);
    ASSERT_TRUE(c.ok()) << c.error().ToString();
    std::string port = std::to_string(web->port());
    std::string out = Sh(**c,
                         "try() { if /bin/busybox nc -w 2 $2 $3 </dev/null >/tmp/nc.$1 2>&1; then "
                         "echo \"$1: ok $(cat /tmp/nc.$1)\"; else echo \"$1: fail\"; fi; }\n"
                         "/bin/busybox nslookup api.example.test >/tmp/ns1 2>&1; echo lookup=$?; grep -c "
                         "198.51.100.7 /tmp/ns1\n"
                         "/bin/busybox nslookup other.test >/tmp/ns2 2>&1; echo refused=$?; grep -o REFUSED "
                         "/tmp/ns2 | head -1\n"
                         "try named 198.51.100.7 " +
                             port +
                             "\n"
                             "try wildcard 198.51.100.8 " +
                             port +
                             "\n"
                             "try cname 198.51.100.11 " +
                             port +
                             "\n"
                             "try unnamed 198.51.100.9 " +
                             port +
                             "\n"
                             "try dns53 198.51.100.7 53\n"
                             "try rebind 10.0.0.1 80\n");
    EXPECT_NE(out.find("lookup=0\n1\n"), std::string::npos) << out;
    EXPECT_NE(out.find("refused=1\nREFUSED\n"), std::string::npos) << out;
    EXPECT_NE(out.find("named: ok hello-peer\n"), std::string::npos) << out;
    EXPECT_NE(out.find("wildcard: ok hello-peer\n"), std::string::npos) << out;
    EXPECT_NE(out.find("cname: ok hello-peer\n"), std::string::npos) << out;
    EXPECT_NE(out.find("unnamed: fail\n"), std::string::npos) << out;
    EXPECT_NE(out.find("dns53: fail\n"), std::string::npos) << out;
    EXPECT_NE(out.find("rebind: fail\n"), std::string::npos) << out;
    EXPECT_EQ(web->accepted(), 3) << "only addresses of allowed names were reached";
    pollfd pf{dns53, POLLIN, 0};
    EXPECT_EQ(::poll(&pf, 1, 0), 0) << "TCP/53 to another resolver got through";
  }
  ExpectSet(SetOf(ns, "inet"));
  ::close(dns53);
  web.reset();
  ::close(peer);
  ::close(ns_fd);
  (*inst)->Stop(1000ms);
  inst->reset();
  EXPECT_EQ(OwnThreadsIn(ino), 0) << "the filter thread survived the sandbox";
  EXPECT_EQ(NetnsUsers(ino), 0) << "the sandbox network namespace is still referenced";
  int threads_after = 0;
  {
    DIR* d = ::opendir("/proc/self/task");
    while (dirent* e = ::readdir(d)) threads_after += e->d_name[0] != '.';
    ::closedir(d);
  }
  EXPECT_LE(threads_after, threads_before);
}

TEST_F(DomainAllowTest, BridgeNamespaceServesTheFilterAndTearsDown) {
  // The microVM's network without a VM: the resolver address on br0, the
  // set in the bridge table, the same verdicts.
  auto sn = net::SandboxNet::Create({{}, Filtered(Base()).net_allow}, net::Mode::kBridge);
  ASSERT_TRUE(sn.ok()) << sn.error().ToString();
  ASSERT_TRUE((*sn)->dns_filtered());
  uint64_t ino = (*sn)->netns_inode();
  ExpectDnsVerdicts((*sn)->netns_fd());
  ExpectSet(SetOf(NetnsPath(ino), "bridge"));
  EXPECT_EQ(OwnThreadsIn(ino), 1);
  sn->reset();
  EXPECT_EQ(OwnThreadsIn(ino), 0);
  EXPECT_EQ(NetnsUsers(ino), 0);
}

TEST_F(DomainAllowTest, BridgeForgedGatewaySourceGetsNoAnswer) {
  // The guest forges 10.0.2.2:P as the source of a query to the filter,
  // and tells br0 over ARP that 10.0.2.2 is at slirp4netns' MAC: the answer
  // goes to slirp4netns and on to the host's 127.0.0.1:P (the gateway maps
  // to the host's loopback here, as a host port is listed; so does any
  // other 10.0.2.x). The refused name is only in the answer, so any sight
  // of it on the host's loopback is the leak.
  LoopbackCapture lo;
  ASSERT_TRUE(lo.ok());
  auto sn = net::SandboxNet::Create({{listed_.port()}, Filtered(Base()).net_allow}, net::Mode::kBridge);
  ASSERT_TRUE(sn.ok()) << sn.error().ToString();
  std::string ns = NetnsPath((*sn)->netns_inode());
  UniqueFd tap = (*sn)->TakeTap();
  ASSERT_TRUE(tap);
  // The guest's answer path, without a guest: br0 knows its MAC.
  ASSERT_EQ(Shell("nsenter --net=" + ns + " ip neigh replace " + net::kGuestAddress + " lladdr " +
                  net::kGuestMac + " dev br0 nud permanent"),
            "");
  auto ask = [&](const uint8_t* mac, const char* src, const std::string& name) {
    auto f = UdpFrame(mac, kSlirpDnsMac, src, 40053, net::kDns, 53, QueryWire(name));
    return ::write(tap.get(), f.data(), f.size()) == static_cast<ssize_t>(f.size());
  };
  // Waits up to 2 s for the answer to a query for `name` on the tap (it
  // holds the name's first label). Meanwhile plays the forging guest's
  // part in ARP: when br0 asks for `forged_ip` (where its answer goes), it
  // is told "at slirp4netns' gateway MAC", from `mac`.
  auto answered = [&](const std::string& name, const uint8_t* mac, const char* forged_ip) {
    const std::string label = name.substr(0, name.find('.'));
    in_addr forged{};
    ::inet_pton(AF_INET, forged_ip, &forged);
    auto deadline = Clock::now() + 2s;
    std::vector<uint8_t> buf(70000);
    while (Clock::now() < deadline) {
      pollfd p{tap.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::read(tap.get(), buf.data(), buf.size());
      if (n <= 0) continue;
      if (n >= 42 && buf[12] == 0x08 && buf[13] == 0x06 && buf[21] == 1 &&
          std::memcmp(&buf[38], &forged, 4) == 0) {
        std::vector<uint8_t> r(buf.begin() + 6, buf.begin() + 12);  // to the asker
        r.insert(r.end(), mac, mac + 6);
        r.insert(r.end(), {0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2});
        r.insert(r.end(), kSlirpGatewayMac, kSlirpGatewayMac + 6);  // sender: the "gateway"
        r.insert(r.end(), &buf[38], &buf[42]);                      // at the forged address
        r.insert(r.end(), &buf[22], &buf[32]);                      // target: the asker
        (void)!::write(tap.get(), r.data(), r.size());
        continue;
      }
      if (std::string(buf.begin(), buf.begin() + n).find(label) != std::string::npos) return true;
    }
    return false;
  };
  std::string own = "own-" + RandomHex(4) + ".test";
  ASSERT_TRUE(ask(kGuestMacBytes, net::kGuestAddress, own));
  EXPECT_TRUE(answered(own, kGuestMacBytes, "0.0.0.0")) << "the guest's own query is answered (REFUSED)";

  const uint8_t other_mac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x07};
  struct Forgery {
    const uint8_t* mac;
    const char* ip;
  } forgeries[] = {
      {kGuestMacBytes, net::kGateway}, {other_mac, net::kGateway}, {kGuestMacBytes, "10.0.2.99"}};
  // With the guest's anti-spoofing chain, then without it: the filter
  // answers only the guest's address and the namespace sends only to the
  // guest, so the answer still goes nowhere else.
  for (bool chain : {true, false}) {
    if (!chain) {
      ASSERT_EQ(Shell("nsenter --net=" + ns + " nft delete chain bridge skiff guest"), "");
    }
    for (const auto& f : forgeries) {
      std::string name = "forged-" + RandomHex(4) + ".test";
      ASSERT_TRUE(ask(f.mac, f.ip, name));
      EXPECT_FALSE(answered(name, f.mac, f.ip)) << f.ip << " got an answer (chain " << chain << ")";
      EXPECT_FALSE(lo.Saw(name.substr(0, name.find('.'))))
          << "the answer to a forged " << f.ip << " reached the host's loopback (chain " << chain << ")";
    }
  }
}

TEST_F(DomainAllowTest, AFloodedFilterSlowsOnlyItsOwnSandbox) {
  auto a = net::SandboxNet::Create({{}, Filtered(Base()).net_allow}, net::Mode::kLocal);
  auto b = net::SandboxNet::Create({{}, Filtered(Base()).net_allow}, net::Mode::kLocal);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(Ask((*b)->netns_fd(), "x.wild.test"), "NOERROR: 198.51.100.8/3600");
  ASSERT_EQ(Ask((*a)->netns_fd(), "x.wild.test"), "NOERROR: 198.51.100.8/3600");
  // Sandbox a sends 20000 queries as fast as it can: allowed names (each
  // one would go upstream), refused names and junk.
  std::atomic<bool> done{false};
  std::thread flood([&] {
    InNetns((*a)->netns_fd(), [&] {
      int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(53);
      ::inet_pton(AF_INET, net::kDns, &sa.sin_addr);
      ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      for (int i = 0; i < 20000; ++i) {
        int kind = i % 3;
        const char* name = kind == 0 ? "api.example.test" : kind == 1 ? "other.test" : "x";
        ldns_pkt* q =
            ldns_pkt_query_new(ldns_dname_new_frm_str(name), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
        uint8_t* w = nullptr;
        size_t wl = 0;
        ldns_pkt2wire(&w, q, &wl);
        if (kind == 2) wl = 7;  // a runt
        (void)!::send(fd, w, wl, MSG_DONTWAIT);
        free(w);
        ldns_pkt_free(q);
      }
      ::close(fd);
      return 0;
    });
    done = true;
  });
  // Meanwhile sandbox b's resolver answers at once (asked 20 times a
  // second, well under its own rate bound).
  int answered = 0;
  while (!done || answered == 0) {
    auto t0 = Clock::now();
    EXPECT_EQ(Ask((*b)->netns_fd(), "x.wild.test"), "NOERROR: 198.51.100.8/3600");
    EXPECT_LT(Clock::now() - t0, 1s) << "sandbox b waited for sandbox a's flood";
    ++answered;
    std::this_thread::sleep_for(50ms);
  }
  flood.join();
  // a's own filter survived it and still answers (after its rate refills).
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Ask((*a)->netns_fd(), "api.example.test"), "NOERROR: 198.51.100.7/5");
  EXPECT_EQ(Ask((*a)->netns_fd(), "other.test"), "REFUSED:");
  EXPECT_LE(upstream_.Asked("api.example.test."), 400) << "the rate bound let the flood through";
}

TEST_F(DomainAllowTest, NoDomainEntryNoFilter) {
  auto sn = net::SandboxNet::Create({{}, {"203.0.113.0/24"}}, net::Mode::kLocal);
  ASSERT_TRUE(sn.ok()) << sn.error().ToString();
  EXPECT_FALSE((*sn)->dns_filtered());
  EXPECT_EQ(OwnThreadsIn((*sn)->netns_inode()), 0);
}

// A fixture of this file, with a microVM isolator and a busybox image.
template <class Fixture>
class OnMicrovm : public Fixture {
 protected:
  void SetUp() override {
    Fixture::SetUp();
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    iso_ = MakeMicrovmIsolator();
    auto st = iso_->Available();
    ASSERT_TRUE(st.ok()) << st.error().ToString();
    rootfs_ = BusyboxRootfs();
    ASSERT_FALSE(rootfs_.empty()) << "could not build the busybox erofs test image";
  }
  std::unique_ptr<Isolator> iso_;
  std::string rootfs_;
};

class MicrovmNetworkTest : public OnMicrovm<NetworkTest> {
 protected:
  SandboxPolicy VmPolicy(bool network) {
    SandboxPolicy p = Base();
    p.network = network;
    p.rootfs.block_image = rootfs_;
    p.rootfs.block_fstype = "erofs";
    p.memory_mb = 256;
    return p;
  }
};

TEST_F(MicrovmNetworkTest, GuestEgressPolicyAndTeardown) { RunProbe(*iso_, VmPolicy(true), "eth0"); }

using MicrovmDomainAllowTest = OnMicrovm<DomainAllowTest>;

TEST_F(MicrovmDomainAllowTest, GuestQueriesReachTheFilterOverTheBridge) {
  SandboxPolicy p = Filtered(Base());
  p.rootfs.block_image = rootfs_;
  p.rootfs.block_fstype = "erofs";
  p.memory_mb = 256;
  auto inst = iso_->Start(p);
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  uint64_t ino = (*inst)->Describe()["netns_inode"].get<uint64_t>();
  {
    auto c = proto::Client::Connect((*inst)->TakeChannel(), 60s);
    ASSERT_TRUE(c.ok()) << c.error().ToString();
    // The guest's own resolver (10.0.2.3, its resolv.conf) is the filter:
    // its frames are delivered to br0, never to slirp4netns.
    std::string out = Sh(**c,
                         "for n in api.example.test x.wild.test wild.test other.test; do "
                         "/bin/busybox nslookup $n >/tmp/ns 2>&1; echo $n=$? $(grep -o "
                         "'198.51.100.[0-9]*\\|REFUSED' /tmp/ns | head -1); done\n"
                         "if /bin/busybox nc -w 2 10.0.2.3 53 </dev/null; then echo tcp53=ok; "
                         "else echo tcp53=fail; fi\n",
                         60000);
    EXPECT_NE(out.find("api.example.test=0 198.51.100.7\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x.wild.test=0 198.51.100.8\n"), std::string::npos) << out;
    EXPECT_NE(out.find("wild.test=1 REFUSED\n"), std::string::npos) << out;
    EXPECT_NE(out.find("other.test=1 REFUSED\n"), std::string::npos) << out;
    EXPECT_NE(out.find("tcp53=ok\n"), std::string::npos) << "TCP to the resolver reaches the filter\n" << out;
  }
  std::string set = SetOf(NetnsPath(ino), "bridge");
  EXPECT_NE(set.find("198.51.100.7"), std::string::npos) << set;
  EXPECT_NE(set.find("198.51.100.8"), std::string::npos) << set;
  EXPECT_EQ(set.find("198.51.100.99"), std::string::npos) << set;
  EXPECT_EQ(upstream_.Asked("other.test."), 0);
  EXPECT_EQ(OwnThreadsIn(ino), 1);
  (*inst)->Stop(1000ms);
  inst->reset();
  EXPECT_EQ(OwnThreadsIn(ino), 0) << "the filter thread survived the VM";
  EXPECT_EQ(NetnsUsers(ino), 0);
}

std::string Hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) s += {d[c >> 4], d[c & 15]};
  return s;
}

TEST_F(MicrovmDomainAllowTest, GuestCodeForgingFramesGetsNoAnswerAndTeachesTheBridgeNothing) {
  // Code in the guest keeps CAP_NET_RAW (docs/security.md), so it can write
  // any frame to its NIC: the forged-gateway exploit replayed from inside
  // a real guest. Twenty forged source MACs; br0 told over ARP that the
  // gateway 10.0.2.2 is at slirp4netns' MAC; then a query to the filter
  // from 10.0.2.2, whose answer would go to slirp4netns and on to the
  // host's loopback (a host port is listed). The same raw path from the
  // guest's own addresses is answered: the refusals are not a broken tool.
  std::string rootfs = testing_support::BusyboxRootfs(SKIFF_TEST_FORGE);
  ASSERT_FALSE(rootfs.empty());
  LoopbackCapture lo;
  ASSERT_TRUE(lo.ok());
  SandboxPolicy p = Filtered(Base());
  p.rootfs.block_image = rootfs;
  p.rootfs.block_fstype = "erofs";
  p.memory_mb = 256;
  auto inst = iso_->Start(p);
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  std::string ns = NetnsPath((*inst)->Describe()["netns_inode"].get<uint64_t>());
  ASSERT_FALSE(ns.empty());
  const std::string own = "own-" + RandomHex(4), forged = "forged-" + RandomHex(4),
                    both = "both-" + RandomHex(4);
  const std::string me = std::string(net::kGuestMac) + " $dns " + net::kGuestAddress;
  auto c = proto::Client::Connect((*inst)->TakeChannel(), 60s);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  std::string out = Sh(
      **c,
      "b=/bin/busybox; f=/bin/skiff-test-forge\n"
      "$b nslookup api.example.test >/tmp/ns 2>&1; echo own=$? $($b grep -o 198.51.100.7 /tmp/ns | $b head "
      "-1)\n"
      "dns=$($b awk '$1==\"10.0.2.3\"{print $4}' /proc/net/arp); echo dns=$dns\n"
      "$f macs eth0 20 $dns && echo macs=sent\n"
      "$f udp eth0 " +
          me + " 40053 10.0.2.3 53 " + Hex(QueryWire(own + ".test")) +
          " await\n"
          "$f arp eth0 52:55:0a:00:02:02 52:55:0a:00:02:02 10.0.2.2 $dns 10.0.2.3 && "
          "$f arp eth0 " +
          net::kGuestMac +
          " 52:55:0a:00:02:02 10.0.2.2 $dns 10.0.2.3 && echo arp=sent\n"
          "$f spoof eth0 " +
          net::kGuestMac +
          " 52:55:0a:00:02:02 10.0.2.2 4 & $b sleep 0.3\n"
          "$f udp eth0 " +
          net::kGuestMac + " $dns 10.0.2.2 40054 10.0.2.3 53 " + Hex(QueryWire(forged + ".test")) +
          " && $b sleep 1.5 && $f udp eth0 52:55:0a:00:02:02 $dns 10.0.2.2 40055 10.0.2.3 53 " +
          Hex(QueryWire(both + ".test")) + " && echo forged=sent; wait\n",
      90000);
  EXPECT_NE(out.find("own=0 198.51.100.7\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("dns=\n"), std::string::npos) << "the guest has no ARP entry for 10.0.2.3\n" << out;
  EXPECT_NE(out.find("macs=sent\n"), std::string::npos) << out;
  EXPECT_NE(out.find("answered=1\n"), std::string::npos) << "the raw query from the guest's own addresses\n"
                                                         << out;
  EXPECT_NE(out.find("arp=sent\n"), std::string::npos) << out;
  EXPECT_NE(out.find("forged=sent\n"), std::string::npos) << out;
  std::this_thread::sleep_for(2s);  // time for an answer to reach the host
  EXPECT_FALSE(lo.Saw(forged)) << "the answer to a query from a forged 10.0.2.2 reached the host";
  EXPECT_FALSE(lo.Saw(both)) << "the answer to a query from a forged MAC and 10.0.2.2 reached the host";
  auto entries = GuestPortEntries(ns);
  ASSERT_EQ(entries.size(), 1u) << "the bridge learned the guest's forged MACs: " << entries.size();
  EXPECT_NE(entries[0].find(std::string(net::kGuestMac) + " dev vm0 master br0 static"), std::string::npos)
      << entries[0];
  (*inst)->Stop(1000ms);
}

// A networked VM saved whole (a snapshot, or a fork's) restores with a
// network of its own: a namespace, helper and filter made for the restoring
// policy, behind the same guest address; the guest reaches what that policy
// allows through it, and nothing of it outlives the copy. Restoring it
// without network is refused, saying why.
TEST_F(MicrovmNetworkTest, ASavedNetworkedVmRestoresWithANetworkOfItsOwn) {
  auto src = iso_->Start(VmPolicy(true));
  ASSERT_TRUE(src.ok()) << src.error().ToString();
  testing_support::TempDir dir("vm-netsnap");
  {
    auto c = proto::Client::Connect((*src)->TakeChannel(), 30s);
    ASSERT_TRUE(c.ok()) << c.error().ToString();
    EXPECT_EQ(Sh(**c, "echo kept > /tmp/file; echo ok"), "ok\n");
    auto q = (*c)->Quiesce(Clock::now() + 10s);
    ASSERT_TRUE(q.ok()) << q.error().ToString();
    auto saved = (*src)->Snapshot(dir.path(), uint64_t{1} << 30);
    ASSERT_TRUE((*c)->Release(*q, Clock::now() + 10s).ok());
    ASSERT_TRUE(saved.ok()) << saved.error().ToString();
    EXPECT_TRUE(saved->memory);
  }
  (*src)->Stop(1000ms);
  src->reset();

  SandboxPolicy off = VmPolicy(false);
  off.restore_dir = dir.path();
  auto refused = iso_->Start(off);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kS300);
  EXPECT_NE(refused.error().message().find("saved with network: true"), std::string::npos)
      << refused.error().message();

  SandboxPolicy on = VmPolicy(true);
  on.restore_dir = dir.path();
  std::string kept;
  RunProbe(*iso_, on, "eth0", "cat /tmp/file", &kept);
  EXPECT_EQ(kept, "kept\n") << "the copy runs on from the saved state";
}

// A networked VM hibernates with its network: slirp4netns and the namespace
// go with the VMM, and the wake makes new ones for the same policy, through
// which the guest reaches what that policy allows.
TEST_F(MicrovmNetworkTest, AHibernatedNetworkedVmWakesWithANetworkOfItsOwn) {
  auto inst = iso_->Start(VmPolicy(true));
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  json d = (*inst)->Describe();
  pid_t helper = d["net_helper_pid"].get<pid_t>();
  uint64_t ino = d["netns_inode"].get<uint64_t>();
  auto c = proto::Client::Connect((*inst)->TakeChannel(), 30s);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(Sh(**c, "echo kept > /tmp/file; echo ok"), "ok\n");
  ASSERT_TRUE((*inst)->CanHibernate().ok());

  testing_support::TempDir dir("vm-nethib");
  auto q = (*c)->Quiesce(Clock::now() + 10s);
  ASSERT_TRUE(q.ok()) << q.error().ToString();
  ASSERT_TRUE((*c)->Suspend().ok());
  auto saved = (*inst)->Hibernate(dir.path(), uint64_t{1} << 30);
  ASSERT_TRUE(saved.ok()) << saved.error().ToString();
  EXPECT_FALSE(Alive(helper)) << "slirp4netns outlived the hibernated VM";
  EXPECT_EQ(NetnsUsers(ino), 0) << "the hibernated VM's namespace is still referenced";
  EXPECT_FALSE((*inst)->Describe().contains("net_helper_pid"));

  auto ch = (*inst)->Wake(dir.path());
  ASSERT_TRUE(ch.ok()) << ch.error().ToString();
  ASSERT_TRUE((*c)->Rebind(std::move(ch).value(), 30s).ok());
  d = (*inst)->Describe();
  ASSERT_TRUE(d.contains("net_helper_pid")) << d.dump();
  pid_t woken_helper = d["net_helper_pid"].get<pid_t>();
  uint64_t woken_ino = d["netns_inode"].get<uint64_t>();
  EXPECT_TRUE(Alive(woken_helper));
  EXPECT_EQ(Sh(**c, "cat /tmp/file"), "kept\n");
  int before = listed_.accepted();
  ExpectProbe(Sh(**c, ProbeScript(listed_.port(), unlisted_.port(), host_ip_, any_.port())), "eth0",
              !host_ip_.empty());
  EXPECT_EQ(listed_.accepted(), before + 1);
  EXPECT_EQ(unlisted_.accepted(), 0);
  EXPECT_EQ(any_.accepted(), 0);
  c->reset();
  (*inst)->Stop(1000ms);
  inst->reset();
  EXPECT_FALSE(Alive(woken_helper));
  EXPECT_EQ(NetnsUsers(woken_ino), 0);
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
