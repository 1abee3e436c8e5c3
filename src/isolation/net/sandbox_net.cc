#include "isolation/net/sandbox_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "base/fd_pair.h"
#include "base/find_executable.h"
#include "base/log.h"
#include "base/thread.h"
#include "isolation/net/bridge_port.h"

extern char** environ;

namespace skiff::net {
namespace {

constexpr const char* kSlirpTap = "tap0";  // slirp4netns' end
constexpr const char* kGuestTap = "vm0";   // QEMU's end (kBridge)
constexpr const char* kBridge = "br0";
// br0's MAC with a DNS filter: guest DNS frames are re-addressed to it.
constexpr unsigned char kBridgeMac[6] = {0x02, 0x53, 0x0a, 0x00, 0x02, 0x03};
constexpr const char* kBridgeMacText = "02:53:0a:00:02:03";
constexpr auto kReadyTimeout = std::chrono::seconds(10);

Error NetError(std::string_view detail) { return Platform("network", detail); }

// IPv4 ranges of docs/security.md#networking-network-true that no configuration can unlock, and the
// private ranges an explicit allow CIDR may unlock.
constexpr const char* kNeverV4[] = {"0.0.0.0/8",     "127.0.0.0/8", "169.254.0.0/16", "192.0.0.0/24",
                                    "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4"};
constexpr const char* kPrivateV4[] = {"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"};

struct V4Net {
  uint32_t addr = 0;  // host order, host bits cleared
  int prefix = 32;
};

bool ParseV4(const std::string& s, V4Net* out) {
  std::string a = s;
  int prefix = 32;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    a = s.substr(0, slash);
    std::string p = s.substr(slash + 1);
    if (p.empty() || p.size() > 2 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    prefix = std::atoi(p.c_str());
    if (prefix > 32) return false;
  }
  in_addr in{};
  if (::inet_pton(AF_INET, a.c_str(), &in) != 1) return false;
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  out->addr = ntohl(in.s_addr) & mask;
  out->prefix = prefix;
  return true;
}

std::string V4Text(const V4Net& n) {
  in_addr in{htonl(n.addr)};
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &in, buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(n.prefix);
}

bool Inside(const V4Net& inner, const V4Net& outer) {
  if (inner.prefix < outer.prefix) return false;
  uint32_t mask = outer.prefix == 0 ? 0 : ~uint32_t{0} << (32 - outer.prefix);
  return (inner.addr & mask) == outer.addr;
}

bool ParseV6(const std::string& s, std::string* canonical) {
  std::string a = s;
  int prefix = 128;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    a = s.substr(0, slash);
    std::string p = s.substr(slash + 1);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    prefix = std::atoi(p.c_str());
    if (prefix > 128) return false;
  }
  in6_addr in{};
  if (::inet_pton(AF_INET6, a.c_str(), &in) != 1) return false;
  for (int bit = prefix; bit < 128; ++bit) in.s6_addr[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, &in, buf, sizeof buf);
  *canonical = std::string(buf) + "/" + std::to_string(prefix);
  return true;
}

// Runs `fn` on a fresh thread whose network namespace is `netns_fd` (or a
// new one when -1). Network namespaces are per thread, so the rest of the
// (multi-threaded) process is never moved.
Status InNetns(int netns_fd, const std::function<Status()>& fn) {
  // Stays this unless the body runs to its end (an exception ends it early).
  Status result = Error(Code::kS300, "netns: the namespace thread ended by an exception");
  Result<std::thread> t = StartThread("netns", [&] {
    if (netns_fd < 0 ? ::unshare(CLONE_NEWNET) : ::setns(netns_fd, CLONE_NEWNET)) {
      result = Error::Sys(Code::kS300, netns_fd < 0 ? "unshare" : "setns", "CLONE_NEWNET", errno);
      return;
    }
    result = fn();
  });
  if (!t.ok()) return std::move(t).error().With("entering the sandbox's network namespace");
  t->join();
  return result;
}

Status SetUp(int sock, const char* ifname) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (::ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
    return Error::Sys(Code::kS300, "ioctl(SIOCGIFFLAGS)", ifname, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
    return Error::Sys(Code::kS300, "ioctl(SIOCSIFFLAGS)", ifname, errno);
  return OkStatus();
}

Status AddToBridge(int sock, const char* port) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, kBridge, IFNAMSIZ - 1);
  ifr.ifr_ifindex = static_cast<int>(::if_nametoindex(port));
  if (ifr.ifr_ifindex == 0) return Error::Sys(Code::kS300, "if_nametoindex", port, errno);
  if (::ioctl(sock, SIOCBRADDIF, &ifr) < 0) return Error::Sys(Code::kS300, "ioctl(SIOCBRADDIF)", port, errno);
  return OkStatus();
}

Status SetAddress(int sock, const char* ifname, const char* addr, const char* mask) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  auto* sin = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
  sin->sin_family = AF_INET;
  ::inet_pton(AF_INET, addr, &sin->sin_addr);
  if (::ioctl(sock, SIOCSIFADDR, &ifr) < 0)
    return Error::Sys(Code::kS300, "ioctl(SIOCSIFADDR)", ifname, errno);
  ::inet_pton(AF_INET, mask, &sin->sin_addr);
  if (::ioctl(sock, SIOCSIFNETMASK, &ifr) < 0)
    return Error::Sys(Code::kS300, "ioctl(SIOCSIFNETMASK)", ifname, errno);
  return OkStatus();
}

// A socket bound to the sandbox resolver address (10.0.2.3:53), made in
// the calling thread's namespace.
Result<UniqueFd> DnsSocket(int type) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Error::Sys(Code::kS300, "socket", "dns filter", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(53);
  ::inet_pton(AF_INET, kDns, &sa.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
    return Error::Sys(Code::kS300, "bind", "10.0.2.3:53", errno);
  if (type == SOCK_STREAM && ::listen(fd.get(), 16) < 0)
    return Error::Sys(Code::kS300, "listen", "10.0.2.3:53", errno);
  return fd;
}

Status LoadRuleset(const std::string& rules) {
  std::lock_guard<std::mutex> g(NftMutex());
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return Error(Code::kS300, "nft_ctx_new failed");
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  int rc = nft_run_cmd_from_buffer(ctx, rules.c_str());
  std::string err = rc == 0 ? "" : nft_ctx_get_error_buffer(ctx);
  nft_ctx_free(ctx);
  if (rc != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Error(Code::kS300, "loading the egress filter failed: " + err.substr(0, 1000));
  }
  return OkStatus();
}

bool Executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

}  // namespace

// libnftables keeps some process-wide state; one command at a time.
std::mutex& NftMutex() {
  static std::mutex mu;
  return mu;
}

bool SandboxClient(in_addr a, Mode mode) {
  V4Net n{ntohl(a.s_addr), 32};
  auto is = [&](const char* text) {
    V4Net r;
    return ParseV4(text, &r) && Inside(n, r);
  };
  // 10.0.2.3: the namespace's own address, from which only the host asks
  // (skiff doctor, tests); an answer to it stays in the namespace.
  if (is(kDns)) return true;
  if (mode == Mode::kBridge) return is(kGuestAddress);
  return is(kJailAddress) || is("127.0.0.0/8");
}

bool ResolvedAddressEligible(in_addr a, const std::vector<std::string>& host_addrs) {
  V4Net n{ntohl(a.s_addr), 32};
  auto in_any = [&](const auto& list) {
    return std::any_of(std::begin(list), std::end(list), [&](const char* r) {
      V4Net range;
      return ParseV4(r, &range) && Inside(n, range);
    });
  };
  if (in_any(kNeverV4) || in_any(kPrivateV4)) return false;
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::find(host_addrs.begin(), host_addrs.end(), std::string(buf)) == host_addrs.end();
}

Result<AllowList> ParseAllow(const std::vector<std::string>& allow) {
  AllowList out;
  for (size_t i = 0; i < allow.size(); ++i) {
    const std::string& e = allow[i];
    V4Net v4;
    std::string v6;
    if (ParseV4(e, &v4)) {
      bool priv = std::any_of(std::begin(kPrivateV4), std::end(kPrivateV4), [&](const char* r) {
        V4Net range;
        ParseV4(r, &range);
        return Inside(v4, range);
      });
      (priv ? out.v4_private : out.v4_public).push_back(V4Text(v4));
    } else if (ParseV6(e, &v6)) {
      out.v6.push_back(v6);
    } else if (DomainPolicy::Parse({e}).ok()) {
      out.domains.push_back(e);
    } else {
      return NetError("network.allow[" + std::to_string(i) + "] '" + e +
                      "': not a domain, *.domain, IP address or CIDR");
    }
    out.empty = false;
  }
  return out;
}

Result<std::string> BuildRuleset(const NetPolicy& policy, Mode mode,
                                 const std::vector<std::string>& host_addrs) {
  SKIFF_ASSIGN_OR_RETURN(AllowList allow, ParseAllow(policy.allow));
  std::set<uint16_t> ports(policy.host_ports.begin(), policy.host_ports.end());
  ports.erase(0);
  // Jail: refused at once (ICMP port unreachable, so connect() fails fast);
  // bridge: dropped (the kernel here has no bridge-family reject).
  const std::string deny = mode == Mode::kLocal ? " reject\n" : " drop\n";
  const bool filtered = !allow.domains.empty();
  std::ostringstream body;
  if (filtered && mode == Mode::kLocal) {
    // Connections accepted once outlive the timeout of the set element
    // that let them start.
    body << "    ct state established,related accept\n";
  }
  // DNS through the gateway's resolver (with domain entries, the filter
  // answers the resolver address in the namespace itself: no packet to
  // it leaves), then the gateway's host ports.
  if (!filtered) {
    body << "    ip daddr " << kDns << " udp dport 53 accept\n";
    body << "    ip daddr " << kDns << " tcp dport 53 accept\n";
  }
  if (!ports.empty()) {
    std::string set;
    for (uint16_t p : ports) set += (set.empty() ? "" : ", ") + std::to_string(p);
    body << "    ip daddr " << kGateway << " tcp dport { " << set << " } accept\n";
    body << "    ip daddr " << kGateway << " udp dport { " << set << " } accept\n";
  }
  // Everything else on the sandbox network (other gateway ports, the DNS
  // address on other ports) is denied, whatever `allow` says.
  body << "    ip daddr " << kSubnet << deny;
  // With domain entries no other resolver is reachable, whatever `allow`
  // says: the filter is the only way to get a name's address.
  if (filtered) body << "    udp dport 53" << deny << "    tcp dport 53" << deny;
  std::set<std::string> seen;
  for (const auto& a : host_addrs) {
    V4Net n;
    if (ParseV4(a, &n) && n.prefix == 32 && seen.insert(a).second)
      body << "    ip daddr " << V4Text(n).substr(0, V4Text(n).size() - 3) << deny;
  }
  std::string never;
  for (const char* r : kNeverV4) never += (never.empty() ? "" : ", ") + std::string(r);
  body << "    ip daddr { " << never << " }" << deny;
  for (const auto& c : allow.v4_private) body << "    ip daddr " << c << " accept\n";
  std::string priv;
  for (const char* r : kPrivateV4) priv += (priv.empty() ? "" : ", ") + std::string(r);
  body << "    ip daddr { " << priv << " }" << deny;
  if (allow.empty) {
    body << (mode == Mode::kLocal ? "    meta nfproto ipv4 accept\n" : "    ether type ip accept\n");
  } else {
    for (const auto& c : allow.v4_public) body << "    ip daddr " << c << " accept\n";
    if (filtered) {
      // Addresses the DNS filter resolved for allowed names. The bridge
      // has no connection tracking here: a packet refreshes its address
      // for the longest set timeout instead, so a connection in use is
      // not cut when the element would have expired.
      body << "    ip daddr @dns4"
           << (mode == Mode::kLocal
                   ? ""
                   : " update @dns4 { ip daddr timeout " + std::to_string(kDnsMaxTtl) + "s }")
           << " accept\n";
    }
  }
  if (mode == Mode::kLocal) body << "    reject\n";
  // No IPv6 route exists; the policy drops IPv6 and everything not accepted.
  std::ostringstream out;
  if (mode == Mode::kLocal) {
    out << "table inet skiff {\n";
    if (filtered) out << "  set dns4 { type ipv4_addr; flags timeout; size 4096; }\n";
    out << "  chain egress {\n"
        << "    type filter hook output priority filter; policy drop;\n"
        << "    oifname \"lo\" accept\n"
        << body.str() << "  }\n"
        << "}\n";
  } else {
    out << "table bridge skiff {\n";
    if (filtered) out << "  set dns4 { type ipv4_addr; flags dynamic, timeout; size 4096; }\n";
    // The guest sends only from its own MAC and IPv4 address, IPv4 and
    // well-formed ARP only. Dropped before the bridge sees the frame, so
    // a forged source is never learned nor answered (the DNS filter's reply
    // to a forged 10.0.2.2 would reach the host's loopback through
    // slirp4netns).
    const std::string guest = "    iifname \"" + std::string(kGuestTap) + "\" ";
    out << "  chain guest {\n"
        << "    type filter hook prerouting priority -400; policy accept;\n"
        << guest << "ether saddr != " << kGuestMac << " drop\n"
        << guest << "ether type != { ip, arp } drop\n"
        << guest << "ip saddr != " << kGuestAddress << " drop\n"
        << guest << "arp htype != 1 drop\n"
        << guest << "arp ptype != ip drop\n"
        << guest << "arp hlen != 6 drop\n"
        << guest << "arp plen != 4 drop\n"
        << guest << "arp saddr ether != " << kGuestMac << " drop\n"
        << guest << "arp saddr ip != " << kGuestAddress << " drop\n"
        << "  }\n";
    if (filtered) {
      // Guest DNS to the resolver address is delivered to br0 (which
      // carries 10.0.2.3 and the filter's sockets) instead of slirp4netns.
      out << "  chain dns {\n"
          << "    type filter hook prerouting priority -300; policy accept;\n";
      for (const char* proto : {"udp", "tcp"})
        out << "    iifname \"" << kGuestTap << "\" ip daddr " << kDns << " " << proto
            << " dport 53 ether daddr set " << kBridgeMacText << " meta pkttype set host\n";
      out << "  }\n";
    }
    // What the namespace's own stack sends (the DNS filter's answers, ARP)
    // goes to the guest only, never to slirp4netns.
    out << "  chain reply {\n"
        << "    type filter hook output priority filter; policy drop;\n"
        << "    oifname \"" << kGuestTap << "\" ether type arp accept\n"
        << "    oifname \"" << kGuestTap << "\" ip daddr " << kGuestAddress << " accept\n"
        << "  }\n";
    out << "  chain local {\n"
        << "    type filter hook input priority filter; policy drop;\n";
    if (filtered) {
      out << "    iifname \"" << kGuestTap << "\" ether type arp accept\n";
      for (const char* proto : {"udp", "tcp"})
        out << "    iifname \"" << kGuestTap << "\" ip daddr " << kDns << " " << proto
            << " dport 53 accept\n";
    }
    out << "  }\n"
        << "  chain egress {\n"
        << "    type filter hook forward priority filter; policy drop;\n"
        << "    iifname \"" << kSlirpTap << "\" oifname \"" << kGuestTap << "\" accept\n"
        << "    iifname != \"" << kGuestTap << "\" drop\n"
        << "    oifname != \"" << kSlirpTap << "\" drop\n"
        << "    ether type arp accept\n"
        << body.str() << "  }\n"
        << "}\n";
  }
  return out.str();
}

std::vector<std::string> HostAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char buf[INET6_ADDRSTRLEN];
    if (i->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      out.emplace_back(buf);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof buf);
      out.emplace_back(buf);
    }
  }
  ::freeifaddrs(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string RewriteLoopback(const std::string& value, const std::vector<uint16_t>& ports) {
  if (ports.empty()) return value;
  std::set<uint32_t> listed(ports.begin(), ports.end());
  std::string out;
  size_t i = 0;
  while (i < value.size()) {
    size_t hit = std::string::npos, host_len = 0;
    for (const char* host : {"://localhost:", "://127.0.0.1:"}) {
      size_t p = value.find(host, i);
      if (p < hit) {
        hit = p;
        host_len = std::strlen(host);
      }
    }
    if (hit == std::string::npos) break;
    size_t digits = hit + host_len, end = digits;
    while (end < value.size() && end - digits < 6 && value[end] >= '0' && value[end] <= '9') ++end;
    bool ok = end > digits && (end == value.size() || value[end] < '0' || value[end] > '9') &&
              end - digits <= 5 &&
              listed.count(static_cast<uint32_t>(std::stoul(value.substr(digits, end - digits))));
    out.append(value, i, hit - i);
    if (ok) {
      out += std::string("://") + kGateway + ":" + value.substr(digits, end - digits);
      i = end;
    } else {
      out.append(value, hit, 3);  // "://": look for the next occurrence after it
      i = hit + 3;
    }
  }
  out.append(value, i, std::string::npos);
  return out;
}

std::string Slirp4netnsBinary() {
  if (const char* v = std::getenv("SKIFF_SLIRP4NETNS"); v != nullptr && *v) return v;
  if (auto found = FindExecutable("slirp4netns")) return *found;
  for (const char* p : {"/usr/bin/slirp4netns", "/usr/local/bin/slirp4netns"})
    if (Executable(p)) return p;
  return "/usr/bin/slirp4netns";
}

Status Available() {
  if (::geteuid() != 0) return NetError("network: true needs the daemon to run as root");
  std::string slirp = Slirp4netnsBinary();
  if (!Executable(slirp))
    return NetError("slirp4netns not found (" + slirp +
                    "): install the slirp4netns package or set SKIFF_SLIRP4NETNS");
  if (::access("/dev/net/tun", R_OK | W_OK) != 0)
    return NetError("/dev/net/tun is missing or not usable (kernel without TUN/TAP?)");
  return OkStatus();
}

nlohmann::json Doctor() {
  nlohmann::json j;
  std::string slirp = Slirp4netnsBinary();
  j["slirp4netns"] = {{"path", slirp}, {"ok", Executable(slirp)}};
  j["tun"] = {{"ok", ::access("/dev/net/tun", R_OK | W_OK) == 0}};
  Status avail = Available();
  if (avail.ok()) {
    // A full trial: namespace, filter, bridge, slirp4netns ready.
    // With a domain entry, so the DNS filter is part of the trial.
    auto t0 = std::chrono::steady_clock::now();
    auto trial = SandboxNet::Create(NetPolicy{{}, {"doctor.invalid"}}, Mode::kBridge);
    j["domain_allow_entries"] = trial.ok();
    if (!trial.ok()) {
      j["domain_error"] = trial.error().message();
      trial = SandboxNet::Create(NetPolicy{}, Mode::kBridge);
    }
    j["setup_ok"] = trial.ok();
    if (!trial.ok()) j["error"] = trial.error().message();
    j["setup_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  } else {
    j["setup_ok"] = false;
    j["error"] = avail.error().message();
    j["domain_allow_entries"] = false;
  }
  j["available"] = j["setup_ok"];
  j["ipv6_egress"] = false;
  return j;
}

Result<std::unique_ptr<SandboxNet>> SandboxNet::Create(const NetPolicy& policy, Mode mode) {
  SKIFF_RETURN_IF_ERROR(Available());
  const std::vector<std::string> host_addrs = HostAddresses();
  SKIFF_ASSIGN_OR_RETURN(std::string rules, BuildRuleset(policy, mode, host_addrs));
  SKIFF_ASSIGN_OR_RETURN(AllowList allow, ParseAllow(policy.allow));
  const bool filtered = !allow.domains.empty();
  const bool ports_empty =
      std::none_of(policy.host_ports.begin(), policy.host_ports.end(), [](uint16_t p) { return p != 0; });
  DnsFilter::Options dns;
  if (filtered) {
    auto domains = DomainPolicy::Parse(allow.domains);
    if (!domains.ok()) return NetError(domains.error().message());
    dns.policy = std::move(domains).value();
    auto up = UpstreamResolver();
    if (!up.ok()) return NetError("dns filter: " + up.error().message());
    dns.upstream = *up;
    dns.nft_family = mode == Mode::kLocal ? "inet" : "bridge";
    dns.eligible = [host_addrs](in_addr a) { return ResolvedAddressEligible(a, host_addrs); };
    dns.client = [mode](in_addr a) { return SandboxClient(a, mode); };
  }
  std::unique_ptr<SandboxNet> sn(new SandboxNet());

  // 1. The namespace, its loopback, the guest tap and bridge, the filter.
  UniqueFd tap;
  Status st = InNetns(-1, [&]() -> Status {
    int fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::Sys(Code::kS300, "open", "/proc/thread-self/ns/net", errno);
    sn->netns_.reset(fd);
    UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock) return Error::Sys(Code::kS300, "socket", "AF_INET", errno);
    SKIFF_RETURN_IF_ERROR(SetUp(sock.get(), "lo"));
    SKIFF_RETURN_IF_ERROR(LoadRuleset(rules));
    if (mode == Mode::kBridge) {
      int t = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
      if (t < 0) return Error::Sys(Code::kS300, "open", "/dev/net/tun", errno);
      tap.reset(t);
      ifreq ifr{};
      std::strncpy(ifr.ifr_name, kGuestTap, IFNAMSIZ - 1);
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
      if (::ioctl(t, TUNSETIFF, &ifr) < 0)
        return Error::Sys(Code::kS300, "ioctl(TUNSETIFF)", kGuestTap, errno);
      char br[IFNAMSIZ] = {};
      std::strncpy(br, kBridge, IFNAMSIZ - 1);
      if (::ioctl(sock.get(), SIOCBRADDBR, br) < 0)
        return Error::Sys(Code::kS300, "ioctl(SIOCBRADDBR)", kBridge, errno);
      SKIFF_RETURN_IF_ERROR(AddToBridge(sock.get(), kGuestTap));
      std::array<uint8_t, 6> guest_mac{};
      if (!ParseMac(kGuestMac, &guest_mac)) return Error(Code::kS300, "bad guest MAC");
      SKIFF_RETURN_IF_ERROR(PinPortAddress(kGuestTap, guest_mac));
      SKIFF_RETURN_IF_ERROR(SetUp(sock.get(), kGuestTap));
      if (filtered) {
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, kBridge, IFNAMSIZ - 1);
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        std::memcpy(ifr.ifr_hwaddr.sa_data, kBridgeMac, sizeof kBridgeMac);
        if (::ioctl(sock.get(), SIOCSIFHWADDR, &ifr) < 0)
          return Error::Sys(Code::kS300, "ioctl(SIOCSIFHWADDR)", kBridge, errno);
      }
      SKIFF_RETURN_IF_ERROR(SetUp(sock.get(), kBridge));
    }
    if (filtered) {
      // The resolver address becomes local to the namespace: on a lo alias
      // (jail: queries never leave the namespace), or on br0 (microVM).
      SKIFF_RETURN_IF_ERROR(mode == Mode::kLocal ? SetAddress(sock.get(), "lo:dns", kDns, "255.255.255.255")
                                                 : SetAddress(sock.get(), kBridge, kDns, "255.255.255.0"));
      SKIFF_ASSIGN_OR_RETURN(dns.udp, DnsSocket(SOCK_DGRAM));
      SKIFF_ASSIGN_OR_RETURN(dns.tcp, DnsSocket(SOCK_STREAM));
    }
    return OkStatus();
  });
  if (!st.ok()) return NetError(Error(st.error()).With("configuring the sandbox's namespace").message());

  // 2. slirp4netns, in the host's namespace, attaching tap0 in ours. It
  // exits when the exit pipe's write end (ours) closes.
  Result<FdPair> exit_pipe = MakePipe(O_CLOEXEC);
  if (!exit_pipe.ok()) return std::move(exit_pipe).error().With("slirp4netns exit pipe");
  UniqueFd exit_read = std::move(exit_pipe->first);
  sn->exit_pipe_ = std::move(exit_pipe->second);
  Result<FdPair> ready_pipe = MakePipe(O_CLOEXEC);
  if (!ready_pipe.ok()) return std::move(ready_pipe).error().With("slirp4netns ready pipe");
  UniqueFd ready_read = std::move(ready_pipe->first), ready_write = std::move(ready_pipe->second);
  std::string slirp = Slirp4netnsBinary();
  std::vector<std::string> args = {slirp};
  if (mode == Mode::kLocal) args.insert(args.end(), {"--configure", "--mtu=65520"});
  // The gateway maps to the host's loopback only for network.host_ports;
  // without them slirp4netns refuses 10.0.2.2 itself, whatever reaches it.
  if (ports_empty) args.emplace_back("--disable-host-loopback");
  args.insert(args.end(), {"--enable-sandbox", "--enable-seccomp", "--exit-fd=3", "--ready-fd=4",
                           "--netns-type=path", "/proc/self/fd/5", kSlirpTap});
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char env0[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  // The sources are first moved above the targets: in a process with few
  // descriptors open (the CLI) the namespace could be fd 4, which the
  // second dup2 would overwrite before the third reads it.
  UniqueFd src[3];
  int from[3] = {exit_read.get(), ready_write.get(), sn->netns_.get()};
  for (int i = 0; i < 3; i++) {
    src[i].reset(::fcntl(from[i], F_DUPFD_CLOEXEC, 10));
    if (!src[i]) {
      posix_spawn_file_actions_destroy(&fa);
      return Error::Sys(Code::kS300, "fcntl(F_DUPFD_CLOEXEC)", "slirp4netns", errno);
    }
    posix_spawn_file_actions_adddup2(&fa, src[i].get(), 3 + i);
  }
  posix_spawn_file_actions_addclosefrom_np(&fa, 6);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, slirp.c_str(), &fa, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return NetError(Error::Sys(Code::kS300, "posix_spawn", slirp, rc).message());
  {
    // Our unreaped child: its pid cannot be reused before we wait for it.
    auto proc = Process::Open(pid);
    if (!proc.ok()) {
      ::kill(pid, SIGKILL);
      int ws;
      ::waitpid(pid, &ws, 0);
      return NetError(Error(proc.error()).With("opening a pidfd for slirp4netns").message());
    }
    sn->slirp_ = std::move(proc).value();
  }
  exit_read.reset();
  ready_write.reset();

  // 3. Ready when slirp4netns writes "1" (tap0 attached and, for kLocal,
  // configured with 10.0.2.100/24 and the default route).
  auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return NetError("slirp4netns did not become ready within 10 s");
    pollfd p[2] = {{ready_read.get(), POLLIN, 0}, {sn->slirp_.pidfd(), POLLIN, 0}};
    int r = ::poll(p, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error::Sys(Code::kS300, "poll", "slirp4netns", errno);
    if (p[0].revents & (POLLIN | POLLHUP)) {
      char c = 0;
      ssize_t n = ::read(ready_read.get(), &c, 1);
      if (n == 1 && c == '1') break;
      auto ws = sn->slirp_.Wait(std::chrono::milliseconds(500));
      std::string how =
          ws.ok() && ws->has_value() ? " (exit status " + std::to_string(WEXITSTATUS(**ws)) + ")" : "";
      return NetError("slirp4netns failed to attach to the sandbox namespace" + how);
    }
    if (p[1].revents & POLLIN) return NetError("slirp4netns exited during setup");
  }

  // 4. kBridge: tap0 joins the bridge (no address: the guest owns one).
  if (mode == Mode::kBridge) {
    st = InNetns(sn->netns_.get(), [&]() -> Status {
      UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      if (!sock) return Error::Sys(Code::kS300, "socket", "AF_INET", errno);
      SKIFF_RETURN_IF_ERROR(AddToBridge(sock.get(), kSlirpTap));
      return SetUp(sock.get(), kSlirpTap);
    });
    if (!st.ok()) return NetError(Error(st.error()).With("bridging " + std::string(kSlirpTap)).message());
    sn->tap_ = std::move(tap);
  }

  // 5. The DNS filter, last: nothing in the sandbox runs before Create
  // returns, so no query can arrive before it does.
  if (filtered) {
    dns.netns_fd = sn->netns_.get();
    auto f = DnsFilter::Start(std::move(dns));
    if (!f.ok()) return NetError(f.error().message());
    sn->dns_ = std::move(f).value();
  }
  return sn;
}

SandboxNet::~SandboxNet() {
  dns_.reset();
  exit_pipe_.reset();
  if (slirp_.valid() && !slirp_.exited()) {
    (void)slirp_.Signal(SIGKILL);
    (void)slirp_.Wait(std::nullopt);
  }
  tap_.reset();
  netns_.reset();
}

uint64_t SandboxNet::netns_inode() const {
  struct stat st {};
  return ::fstat(netns_.get(), &st) == 0 ? st.st_ino : 0;
}

bool SandboxNet::HelperRunning() {
  if (!slirp_.valid() || slirp_.exited()) return false;
  auto r = slirp_.Wait(std::chrono::milliseconds(0));
  return r.ok() && !r->has_value();
}

}  // namespace skiff::net
