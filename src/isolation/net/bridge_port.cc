#include "isolation/net/bridge_port.h"

#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/unique_fd.h"

namespace skiff::net {
namespace {

// One rtnetlink request, built attribute by attribute.
class Request {
 public:
  Request(uint16_t type, uint16_t flags, const void* header, size_t header_len) {
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
    h.nlmsg_seq = 1;
    Append(&h, sizeof h);
    Append(header, header_len);
  }
  void Attr(uint16_t type, const void* data, size_t len) {
    nlattr a{};
    a.nla_type = type;
    a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
    Append(&a, sizeof a);
    Append(data, len);
  }
  // Opens a nested attribute; Close(at) sets its length.
  size_t Open(uint16_t type) {
    size_t at = buf_.size();
    Attr(static_cast<uint16_t>(type | NLA_F_NESTED), nullptr, 0);
    return at;
  }
  void Close(size_t at) {
    auto len = static_cast<uint16_t>(buf_.size() - at);
    std::memcpy(buf_.data() + at, &len, sizeof len);
  }
  std::vector<uint8_t>& Finish() {
    auto len = static_cast<uint32_t>(buf_.size());
    std::memcpy(buf_.data(), &len, sizeof len);
    return buf_;
  }

 private:
  void Append(const void* data, size_t len) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (len > 0) buf_.insert(buf_.end(), p, p + len);
    buf_.resize(NLMSG_ALIGN(buf_.size()), 0);
  }
  std::vector<uint8_t> buf_;
};

// Sends `req` and waits for the kernel's acknowledgement.
Status Talk(Request& req, const char* what) {
  UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!sock) return Error::Sys(Code::kS300, "socket", "AF_NETLINK", errno);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::vector<uint8_t>& msg = req.Finish();
  if (::sendto(sock.get(), msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) <
      0)
    return Error::Sys(Code::kS300, "sendto", what, errno);
  uint8_t buf[4096];
  for (;;) {
    ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "recv", what, errno);
    if (n == 0) return Error(Code::kS300, std::string(what) + ": no answer from the kernel");
    const auto len = static_cast<size_t>(n);
    size_t off = 0;
    while (off + sizeof(nlmsghdr) <= len) {
      nlmsghdr h{};
      std::memcpy(&h, buf + off, sizeof h);
      if (h.nlmsg_len < sizeof h || off + h.nlmsg_len > len) break;
      if (h.nlmsg_type == NLMSG_ERROR) {
        if (h.nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr)))
          return Error(Code::kS300, std::string(what) + ": short ack");
        nlmsgerr e{};
        std::memcpy(&e, buf + off + NLMSG_HDRLEN, sizeof e);
        if (e.error == 0) return OkStatus();
        return Error::Sys(Code::kS300, "rtnetlink", what, -e.error);
      }
      off += NLMSG_ALIGN(h.nlmsg_len);
    }
  }
}

}  // namespace

bool ParseMac(const std::string& text, std::array<uint8_t, 6>* out) {
  unsigned b[6];
  char tail = 0;
  if (text.size() != 17 || std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
                                       &b[4], &b[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) (*out)[i] = static_cast<uint8_t>(b[i]);
  return true;
}

Status PinPortAddress(const char* port, const std::array<uint8_t, 6>& mac) {
  int index = static_cast<int>(::if_nametoindex(port));
  if (index == 0) return Error::Sys(Code::kS300, "if_nametoindex", port, errno);
  // Learning off (AF_BRIDGE RTM_SETLINK, IFLA_PROTINFO { IFLA_BRPORT_LEARNING 0 }).
  ifinfomsg link{};
  link.ifi_family = AF_BRIDGE;
  link.ifi_index = index;
  Request learning(RTM_SETLINK, 0, &link, sizeof link);
  size_t nest = learning.Open(IFLA_PROTINFO);
  uint8_t off = 0;
  learning.Attr(IFLA_BRPORT_LEARNING, &off, sizeof off);
  learning.Close(nest);
  SKIFF_RETURN_IF_ERROR(Talk(learning, "bridge port learning off"));
  // The static entry (NUD_NOARP: static, not local to the bridge).
  ndmsg neigh{};
  neigh.ndm_family = AF_BRIDGE;
  neigh.ndm_ifindex = index;
  neigh.ndm_state = NUD_NOARP | NUD_REACHABLE;
  neigh.ndm_flags = NTF_MASTER;
  Request fdb(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_EXCL, &neigh, sizeof neigh);
  fdb.Attr(NDA_LLADDR, mac.data(), mac.size());
  return Talk(fdb, "bridge static forwarding entry");
}

}  // namespace skiff::net
