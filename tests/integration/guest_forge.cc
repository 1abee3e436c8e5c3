// skiff-test-forge: what hostile code with CAP_NET_RAW does inside a microVM
// guest, for network_test. Static, no project code: it is copied into the
// busybox test image and run by the sandbox. Each command writes hand-made
// Ethernet frames to an interface through an AF_PACKET socket:
//
//   macs IFACE N DSTMAC
//       N UDP frames to DSTMAC, each from another forged source MAC.
//   arp IFACE ETHSRC SENDERMAC SENDERIP TARGETMAC TARGETIP
//       one ARP reply "SENDERIP is at SENDERMAC", from ETHSRC to TARGETMAC.
//   udp IFACE SRCMAC DSTMAC SRCIP SPORT DSTIP DPORT HEX [await]
//       one UDP datagram carrying HEX; with `await`, first binds a UDP
//       socket to SPORT and then prints answered=1 if a datagram from
//       DSTIP:DPORT arrives within 3 s, else answered=0.
//   spoof IFACE ETHSRC FAKEMAC FAKEIP SECONDS
//       for SECONDS, answers every ARP request for FAKEIP seen on IFACE
//       with "FAKEIP is at FAKEMAC", from ETHSRC (prints spoofed=N).
//
// Exit 0 when every frame was written, 1 on a usage error, 2 on a system
// error (printed with its errno text).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<uint8_t>;

[[noreturn]] void Die(int code, const std::string& what) {
  if (code == 2)
    std::fprintf(stderr, "skiff-test-forge: %s: %s\n", what.c_str(), std::strerror(errno));
  else
    std::fprintf(stderr, "skiff-test-forge: %s\n", what.c_str());
  std::exit(code);
}

Bytes Mac(const char* s) {
  unsigned v[6];
  if (std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    Die(1, std::string("not a MAC: ") + s);
  Bytes b;
  for (unsigned x : v) b.push_back(static_cast<uint8_t>(x));
  return b;
}

Bytes Ip(const char* s) {
  Bytes b(4);
  if (::inet_pton(AF_INET, s, b.data()) != 1) Die(1, std::string("not an IPv4 address: ") + s);
  return b;
}

uint16_t Port(const char* s) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v <= 0 || v > 65535) Die(1, std::string("not a port: ") + s);
  return static_cast<uint16_t>(v);
}

Bytes Hex(const char* s) {
  size_t n = std::strlen(s);
  if (n % 2 != 0) Die(1, "odd hex payload");
  Bytes b;
  for (size_t i = 0; i < n; i += 2) {
    unsigned v = 0;
    if (std::sscanf(s + i, "%2x", &v) != 1) Die(1, "bad hex payload");
    b.push_back(static_cast<uint8_t>(v));
  }
  return b;
}

void Append(Bytes& to, const Bytes& b) { to.insert(to.end(), b.begin(), b.end()); }
void Append16(Bytes& to, uint16_t v) {
  to.push_back(static_cast<uint8_t>(v >> 8));
  to.push_back(static_cast<uint8_t>(v));
}

Bytes UdpFrame(const Bytes& src_mac, const Bytes& dst_mac, const Bytes& src_ip, uint16_t sport,
               const Bytes& dst_ip, uint16_t dport, const Bytes& payload) {
  Bytes f = dst_mac;
  Append(f, src_mac);
  Append16(f, ETHERTYPE_IP);
  Bytes ip = {0x45, 0, 0, 0, 0, 0, 0, 0, 64, IPPROTO_UDP, 0, 0};
  uint16_t total = static_cast<uint16_t>(20 + 8 + payload.size());
  ip[2] = static_cast<uint8_t>(total >> 8);
  ip[3] = static_cast<uint8_t>(total);
  Append(ip, src_ip);
  Append(ip, dst_ip);
  uint32_t sum = 0;
  for (size_t i = 0; i < ip.size(); i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<uint8_t>(~sum >> 8);
  ip[11] = static_cast<uint8_t>(~sum);
  Append(f, ip);
  Append16(f, sport);
  Append16(f, dport);
  Append16(f, static_cast<uint16_t>(8 + payload.size()));
  Append16(f, 0);  // no UDP checksum
  Append(f, payload);
  return f;
}

class Link {
 public:
  // `protocol`: what the socket also receives (0: nothing).
  explicit Link(const char* iface, uint16_t protocol = 0) {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(protocol));
    if (fd_ < 0) Die(2, "socket(AF_PACKET)");
    to_.sll_family = AF_PACKET;
    to_.sll_protocol = htons(protocol);
    to_.sll_ifindex = static_cast<int>(::if_nametoindex(iface));
    to_.sll_halen = 6;
    if (to_.sll_ifindex == 0) Die(2, std::string("interface ") + iface);
    if (protocol != 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&to_), sizeof to_) != 0) Die(2, "bind");
  }
  ~Link() { ::close(fd_); }
  int fd() const { return fd_; }
  void Send(const Bytes& f) {
    std::memcpy(to_.sll_addr, f.data(), 6);
    if (::sendto(fd_, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to_), sizeof to_) !=
        static_cast<ssize_t>(f.size()))
      Die(2, "sendto");
  }

 private:
  int fd_ = -1;
  sockaddr_ll to_{};
};

int Macs(int argc, char** argv) {
  if (argc != 5) Die(1, "usage: macs IFACE N DSTMAC");
  Link link(argv[2]);
  int n = std::atoi(argv[3]);
  Bytes dst = Mac(argv[4]);
  for (int i = 0; i < n; ++i) {
    Bytes src = {0x02, 0x10, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 0x00, 0x01};
    link.Send(UdpFrame(src, dst, Ip("10.0.2.15"), 40000, Ip("10.0.2.2"), 9, Bytes(16, 'x')));
  }
  return 0;
}

Bytes ArpReply(const Bytes& eth_src, const Bytes& sender_mac, const Bytes& sender_ip, const Bytes& target_mac,
               const Bytes& target_ip) {
  Bytes f = target_mac;
  Append(f, eth_src);
  Append16(f, ETHERTYPE_ARP);
  Append(f, {0, 1, 0x08, 0x00, 6, 4, 0, 2});  // Ethernet/IPv4, reply
  Append(f, sender_mac);
  Append(f, sender_ip);
  Append(f, target_mac);
  Append(f, target_ip);
  return f;
}

int Arp(int argc, char** argv) {
  if (argc != 8) Die(1, "usage: arp IFACE ETHSRC SENDERMAC SENDERIP TARGETMAC TARGETIP");
  Link link(argv[2]);
  link.Send(ArpReply(Mac(argv[3]), Mac(argv[4]), Ip(argv[5]), Mac(argv[6]), Ip(argv[7])));
  return 0;
}

int Spoof(int argc, char** argv) {
  if (argc != 7) Die(1, "usage: spoof IFACE ETHSRC FAKEMAC FAKEIP SECONDS");
  Link link(argv[2], ETHERTYPE_ARP);
  Bytes eth_src = Mac(argv[3]), fake_mac = Mac(argv[4]), fake_ip = Ip(argv[5]);
  int spoofed = 0;
  for (int waited = 0; waited < std::atoi(argv[6]) * 1000; waited += 100) {
    pollfd p{link.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    uint8_t buf[2048];
    ssize_t n = ::recv(link.fd(), buf, sizeof buf, 0);
    // A request (op 1) whose target address is FAKEIP.
    if (n < 42 || buf[12] != 0x08 || buf[13] != 0x06 || buf[21] != 1 ||
        std::memcmp(&buf[38], fake_ip.data(), 4) != 0)
      continue;
    Bytes asker_mac(buf + 22, buf + 28), asker_ip(buf + 28, buf + 32);
    link.Send(ArpReply(eth_src, fake_mac, fake_ip, asker_mac, asker_ip));
    ++spoofed;
  }
  std::printf("spoofed=%d\n", spoofed);
  return 0;
}

int Udp(int argc, char** argv) {
  if (argc != 10 && !(argc == 11 && std::strcmp(argv[10], "await") == 0))
    Die(1, "usage: udp IFACE SRCMAC DSTMAC SRCIP SPORT DSTIP DPORT HEX [await]");
  Link link(argv[2]);
  uint16_t sport = Port(argv[6]), dport = Port(argv[8]);
  Bytes dst_ip = Ip(argv[7]);
  int rx = -1;
  if (argc == 11) {
    rx = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(sport);
    if (rx < 0 || ::bind(rx, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die(2, "bind");
  }
  link.Send(UdpFrame(Mac(argv[3]), Mac(argv[4]), Ip(argv[5]), sport, dst_ip, dport, Hex(argv[9])));
  if (rx < 0) return 0;
  bool answered = false;
  for (int waited = 0; waited < 3000 && !answered; waited += 100) {
    pollfd p{rx, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    uint8_t buf[2048];
    sockaddr_in from{};
    socklen_t len = sizeof from;
    if (::recvfrom(rx, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len) < 0) continue;
    answered = std::memcmp(&from.sin_addr, dst_ip.data(), 4) == 0 && ntohs(from.sin_port) == dport;
  }
  std::printf("answered=%d\n", answered ? 1 : 0);
  ::close(rx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "macs") return Macs(argc, argv);
  if (cmd == "arp") return Arp(argc, argv);
  if (cmd == "udp") return Udp(argc, argv);
  if (cmd == "spoof") return Spoof(argc, argv);
  Die(1, "usage: skiff-test-forge macs|arp|udp|spoof ...");
}
