// The DNS filter behind `network.allow` domain entries (docs/security.md#networking-network-true).
//
// When the allow list holds a domain entry, the sandbox's resolver address
// (10.0.2.3, port 53, UDP and TCP) is answered by this filter instead of
// slirp4netns. It runs on the host side: a thread of the process that owns
// the SandboxNet, with listening sockets created inside the sandbox's
// host-owned network namespace. For each query it:
//   - parses the message with ldns (every byte comes from the sandbox);
//   - answers REFUSED when the question's name is not on the list
//     (`example.com` = that name only, `*.example.com` = any name below it),
//     FORMERR for anything that is not one plain query;
//   - forwards an allowed query to the upstream resolver (the host's, from
//     /etc/resolv.conf) under a fresh random id, from the host's namespace;
//   - before answering, adds the A addresses of the answer (the name and
//     its CNAME chain) that are public unicast to the nftables set `dns4`
//     of the sandbox's ruleset, with a timeout of the record's TTL bounded
//     to [30 s, 1 h]; TTLs in the answer are capped to 1 h so no client
//     caches an address longer than it stays in the set.
// Sizes, counts and rates are bounded; a misbehaving sandbox only slows its
// own resolver. Destroying the filter stops its thread and closes its
// sockets; the set goes with the namespace.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::net {

// One libnftables command at a time in this process (it keeps some
// process-wide state).
std::mutex& NftMutex();

// Bounds of the timeout of a resolved address in the set.
inline constexpr uint32_t kDnsMinTtl = 30;
inline constexpr uint32_t kDnsMaxTtl = 3600;

// The domain entries of network.allow, as lower-case wire-format names.
class DomainPolicy {
 public:
  // `entries` are the domain entries only (`example.com`, `*.example.com`,
  // an optional trailing dot). An entry that is not a host name → S001.
  static Result<DomainPolicy> Parse(const std::vector<std::string>& entries);
  // `wire_name`: an uncompressed wire-format name, any case.
  bool Allows(const std::string& wire_name) const;
  bool empty() const { return exact_.empty() && below_.empty(); }

 private:
  std::vector<std::string> exact_;  // lower-case wire names
  std::vector<std::string> below_;  // `*.x`: the wire name of x
};

// What to do with one message received from the sandbox.
struct QueryVerdict {
  enum class Kind { kDrop, kReply, kForward };
  Kind kind = Kind::kDrop;
  std::vector<uint8_t> wire;  // kReply: the answer; kForward: the query to send upstream
  uint16_t id = 0;            // the client's id
  std::string qname;          // lower-case wire name of the question
  uint16_t qtype = 0;
  size_t udp_limit = 512;  // largest UDP answer the client accepts
  bool edns = false;       // the client sent EDNS
};
// `tcp`: the message came over TCP (no UDP size limit applies).
QueryVerdict ScreenQuery(const DomainPolicy& policy, const uint8_t* data, size_t len, bool tcp);

// An upstream answer checked against its query and prepared for the client.
struct AnswerVerdict {
  std::vector<uint8_t> wire;                            // for the client
  std::vector<std::pair<in_addr, uint32_t>> addresses;  // eligible A records, set timeout (s)
};
// `eligible`: whether a resolved IPv4 address may enter the set (public
// unicast, not a host address). Fails when the answer does not belong to
// the query (question differs) or cannot be parsed.
Result<AnswerVerdict> ScreenAnswer(const QueryVerdict& query, uint16_t upstream_id, const uint8_t* data,
                                   size_t len, const std::function<bool(in_addr)>& eligible, bool tcp);

// A minimal answer to `query` with only the question and `rcode`.
std::vector<uint8_t> ErrorReply(const QueryVerdict& query, uint8_t rcode);

// The upstream resolver: $SKIFF_DNS_UPSTREAM ("ip" or "ip:port", for
// tests), else the first `nameserver` of /etc/resolv.conf, else 127.0.0.1.
Result<sockaddr_storage> UpstreamResolver();

class DnsFilter {
 public:
  struct Options {
    int netns_fd = -1;       // the sandbox's namespace (for the set updates)
    std::string nft_family;  // "inet" or "bridge": the table holding `dns4`
    DomainPolicy policy;
    std::function<bool(in_addr)> eligible;
    // Whether a query's source may be answered (UDP and TCP); others get
    // nothing. Empty: every source.
    std::function<bool(in_addr)> client;
    sockaddr_storage upstream{};
    UniqueFd udp;  // bound to 10.0.2.3:53 inside the namespace
    UniqueFd tcp;  // listening on 10.0.2.3:53 inside the namespace
  };
  static Result<std::unique_ptr<DnsFilter>> Start(Options opts);
  ~DnsFilter();
  DnsFilter(const DnsFilter&) = delete;
  DnsFilter& operator=(const DnsFilter&) = delete;

  struct Impl;

 private:
  explicit DnsFilter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace skiff::net
