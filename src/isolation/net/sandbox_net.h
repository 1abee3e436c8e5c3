// Networking of a `network: true` sandbox (docs/security.md#networking-network-true), shared by both
// backends.
//
// Each networked sandbox gets a network namespace created by the host, in
// the host's user namespace: nothing inside the sandbox (root in its own
// user namespace, or guest root behind a VM) holds CAP_NET_ADMIN over it, so
// nothing inside can change its interfaces or its filter. In it:
//   - `tap0`, the interface of a slirp4netns process (a user-mode TCP/IP
//     stack running on the host, in the host's network namespace), which
//     turns the sandbox's packets into ordinary host sockets. Its gateway
//     10.0.2.2 maps to host 127.0.0.1; its DNS 10.0.2.3 forwards to the
//     host's resolvers.
//   - an nftables ruleset (libnftables) enforcing the egress policy:
//     gateway only on `network.host_ports`, DNS, no special ranges, no host
//     addresses, `network.allow` CIDRs.
//   - with domain entries in `network.allow`: a DNS filter (dns_filter.h)
//     answering 10.0.2.3:53 inside the namespace, and an nftables set
//     `dns4` of the addresses it resolved for allowed names.
// Mode kLocal (jail): the sandbox's processes live in the namespace; tap0
// carries 10.0.2.100/24 and the default route; the filter is on the output
// hook. Mode kBridge (microVM): the namespace holds a bridge joining tap0 and
// a second tap whose descriptor is handed to QEMU; the guest configures
// 10.0.2.15/24 itself; the filter is on the bridge forward hook.
//
// Everything is owned by SandboxNet: destroying it kills slirp4netns and
// closes the namespace, after which the kernel frees the namespace, its
// devices and its rules. slirp4netns also exits when its exit pipe closes,
// so a crash of the owning process leaves nothing running.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/pidfd.h"
#include "base/unique_fd.h"
#include "isolation/net/dns_filter.h"

namespace skiff::net {

// The fixed address plan of the sandbox network (slirp4netns defaults).
inline constexpr const char* kGateway = "10.0.2.2";
inline constexpr const char* kDns = "10.0.2.3";
inline constexpr const char* kSubnet = "10.0.2.0/24";
inline constexpr const char* kJailAddress = "10.0.2.100";
inline constexpr const char* kGuestAddress = "10.0.2.15";
// The microVM guest's NIC address (QEMU's `virtio-net-device,mac=`): the
// only source MAC the bridge accepts from the guest, and its one static
// forwarding entry (the guest's port learns nothing).
inline constexpr const char* kGuestMac = "52:54:00:12:34:56";

enum class Mode { kLocal, kBridge };

struct NetPolicy {
  std::vector<uint16_t> host_ports;  // config network.host_ports
  std::vector<std::string> allow;    // config network.allow
};

// Splits network.allow into IPv4/IPv6 CIDRs and domain entries (an entry
// that is none of them: S300 naming the key).
struct AllowList {
  std::vector<std::string> v4_private;  // CIDRs inside a private range: unlock it
  std::vector<std::string> v4_public;
  std::vector<std::string> v6;       // accepted, but no IPv6 egress exists
  std::vector<std::string> domains;  // `example.com`, `*.example.com`: the DNS filter
  bool empty = true;
};
Result<AllowList> ParseAllow(const std::vector<std::string>& allow);

// The nftables ruleset (nft syntax) for one sandbox namespace.
// `host_addrs` are the host's own addresses (IPv4 and IPv6), always denied.
Result<std::string> BuildRuleset(const NetPolicy& policy, Mode mode,
                                 const std::vector<std::string>& host_addrs);

// Whether a resolved IPv4 address may enter the `dns4` set: public unicast
// (none of the denied or private ranges of docs/security.md#networking-network-true) and not a host address.
bool ResolvedAddressEligible(in_addr a, const std::vector<std::string>& host_addrs);

// Whether the DNS filter answers a query from `a`: an address of the
// sandbox itself (microVM: the guest's; jail: its own, its loopback) or
// the namespace's own 10.0.2.3. A forged source gets no answer, so the
// filter's replies go only to the sandbox.
bool SandboxClient(in_addr a, Mode mode);

// The addresses currently assigned to the host's interfaces.
std::vector<std::string> HostAddresses();

// docs/security.md#networking-network-true loopback rewrite of one env value: `://localhost:<P>` and
// `://127.0.0.1:<P>` with P listed and followed by a non-digit or the end
// become `://10.0.2.2:<P>`.
std::string RewriteLoopback(const std::string& value, const std::vector<uint16_t>& ports);

// The slirp4netns binary ($SKIFF_SLIRP4NETNS, else found on PATH).
std::string Slirp4netnsBinary();

// What is missing on this host for `network: true` (OkStatus when nothing).
Status Available();
// doctor: facts and, when possible, a full trial setup.
nlohmann::json Doctor();

class SandboxNet {
 public:
  // Sets everything up; on failure nothing is left behind. Errors are S300
  // ("network: ...").
  static Result<std::unique_ptr<SandboxNet>> Create(const NetPolicy& policy, Mode mode);
  ~SandboxNet();
  SandboxNet(const SandboxNet&) = delete;
  SandboxNet& operator=(const SandboxNet&) = delete;

  // The namespace (kLocal: the sandbox's processes setns() into it).
  int netns_fd() const { return netns_.get(); }
  // kBridge: the guest's tap, for QEMU's `-netdev tap,fd=`. Taken once.
  UniqueFd TakeTap() { return std::move(tap_); }
  pid_t helper_pid() const { return slirp_.pid(); }
  // The namespace's inode (what /proc/<pid>/ns/net links name), for facts.
  uint64_t netns_inode() const;
  bool HelperRunning();
  // Whether a DNS filter answers the sandbox's queries (domain entries).
  bool dns_filtered() const { return dns_ != nullptr; }

 private:
  SandboxNet() = default;
  UniqueFd netns_;
  UniqueFd tap_;
  UniqueFd exit_pipe_;  // write end; slirp4netns exits when it closes
  Process slirp_;
  std::unique_ptr<DnsFilter> dns_;  // domain entries in network.allow
};

}  // namespace skiff::net
