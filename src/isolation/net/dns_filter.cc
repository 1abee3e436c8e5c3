#include "isolation/net/dns_filter.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ldns/ldns.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/thread.h"

namespace skiff::net {

namespace {

using Clock = std::chrono::steady_clock;

// Bounds on what one sandbox may make its filter do.
constexpr size_t kMaxMessage = 4096;  // a query from the sandbox
constexpr size_t kMaxUpstreamMessage = 65535;
constexpr size_t kMaxPending = 128;  // queries waiting for upstream
constexpr size_t kMaxConns = 16;     // TCP connections
constexpr size_t kMaxPendingPerConn = 4;
constexpr size_t kMaxConnOutput = size_t{256} * 1024;
constexpr auto kUpstreamTimeout = std::chrono::seconds(5);
constexpr auto kConnIdle = std::chrono::seconds(10);
constexpr double kRate = 100;  // queries per second, sustained
constexpr double kBurst = 200;
constexpr int kMaxCnameHops = 16;

struct PktDeleter {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using Pkt = std::unique_ptr<ldns_pkt, PktDeleter>;
struct RdfDeleter {
  void operator()(ldns_rdf* r) const { ldns_rdf_deep_free(r); }
};
using Rdf = std::unique_ptr<ldns_rdf, RdfDeleter>;

// Lower-case wire bytes of a name.
std::string CanonicalName(const ldns_rdf* name) {
  std::string out(reinterpret_cast<const char*>(ldns_rdf_data(name)), ldns_rdf_size(name));
  // Wire names: length octets are < 64, so lower-casing every byte in
  // 'A'..'Z' touches label text only.
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::vector<uint8_t> ToWire(const ldns_pkt* p) {
  uint8_t* buf = nullptr;
  size_t n = 0;
  if (ldns_pkt2wire(&buf, p, &n) != LDNS_STATUS_OK || buf == nullptr) return {};
  std::vector<uint8_t> out(buf, buf + n);
  LDNS_FREE(buf);
  return out;
}

// A header-only answer for a message whose question cannot be trusted.
std::vector<uint8_t> HeaderReply(const uint8_t* data, uint8_t rcode) {
  std::vector<uint8_t> h(12, 0);
  h[0] = data[0];
  h[1] = data[1];
  h[2] = static_cast<uint8_t>(0x80 | (data[2] & 0x79));  // QR, opcode, RD
  h[3] = static_cast<uint8_t>(0x80 | (rcode & 0x0f));    // RA, rcode
  return h;
}

bool UdpLimit(const ldns_pkt* p, size_t* limit) {
  if (!ldns_pkt_edns(p)) {
    *limit = 512;
    return false;
  }
  *limit = std::clamp<size_t>(ldns_pkt_edns_udp_size(p), 512, kMaxMessage);
  return true;
}

}  // namespace

Result<DomainPolicy> DomainPolicy::Parse(const std::vector<std::string>& entries) {
  DomainPolicy out;
  for (const auto& e : entries) {
    bool below = e.rfind("*.", 0) == 0;
    std::string name = below ? e.substr(2) : e;
    bool ok = !name.empty() && name.size() <= 254 && name != ".";
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
    ldns_rdf* rdf = nullptr;
    if (ok && ldns_str2rdf_dname(&rdf, name.c_str()) == LDNS_STATUS_OK && rdf != nullptr) {
      Rdf owned(rdf);
      std::string wire = CanonicalName(rdf);
      (below ? out.below_ : out.exact_).push_back(wire);
    } else {
      return Error(Code::kS001, "network.allow: not a domain name: '" + e + "'");
    }
  }
  return out;
}

bool DomainPolicy::Allows(const std::string& wire_name) const {
  std::string n = wire_name;
  for (auto& c : n)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (std::find(exact_.begin(), exact_.end(), n) != exact_.end()) return true;
  // `*.x`: drop whole labels from the front; any strict suffix equal to x.
  size_t pos = 0;
  while (pos < n.size() && n[pos] != 0) {
    pos += 1 + static_cast<uint8_t>(n[pos]);
    if (pos >= n.size()) break;
    std::string rest = n.substr(pos);
    if (std::find(below_.begin(), below_.end(), rest) != below_.end()) return true;
  }
  return false;
}

std::vector<uint8_t> ErrorReply(const QueryVerdict& query, uint8_t rcode) {
  Pkt p(ldns_pkt_new());
  if (!p) return {};
  ldns_pkt_set_id(p.get(), query.id);
  ldns_pkt_set_qr(p.get(), true);
  ldns_pkt_set_rd(p.get(), true);
  ldns_pkt_set_ra(p.get(), true);
  ldns_pkt_set_opcode(p.get(), LDNS_PACKET_QUERY);
  ldns_pkt_set_rcode(p.get(), rcode);
  ldns_rr* q = ldns_rr_new();
  ldns_rr_set_owner(q,
                    ldns_dname_new_frm_data(static_cast<uint16_t>(query.qname.size()), query.qname.data()));
  ldns_rr_set_type(q, static_cast<ldns_rr_type>(query.qtype));
  ldns_rr_set_class(q, LDNS_RR_CLASS_IN);
  ldns_rr_set_question(q, true);
  ldns_pkt_push_rr(p.get(), LDNS_SECTION_QUESTION, q);
  return ToWire(p.get());
}

QueryVerdict ScreenQuery(const DomainPolicy& policy, const uint8_t* data, size_t len, bool tcp) {
  QueryVerdict v;
  if (len < 12 || len > kMaxMessage) return v;  // not even a header: nothing to answer
  if (data[2] & 0x80) return v;                 // a response: never answered
  v.id = static_cast<uint16_t>(data[0] << 8 | data[1]);
  v.kind = QueryVerdict::Kind::kReply;
  if (((data[2] >> 3) & 0x0f) != LDNS_PACKET_QUERY) {
    v.wire = HeaderReply(data, LDNS_RCODE_NOTIMPL);
    return v;
  }
  ldns_pkt* raw = nullptr;
  if (ldns_wire2pkt(&raw, data, len) != LDNS_STATUS_OK || raw == nullptr) {
    v.wire = HeaderReply(data, LDNS_RCODE_FORMERR);
    return v;
  }
  Pkt q(raw);
  if (ldns_pkt_qdcount(q.get()) != 1 || ldns_pkt_ancount(q.get()) != 0 || ldns_pkt_nscount(q.get()) != 0 ||
      ldns_rr_list_rr_count(ldns_pkt_question(q.get())) != 1) {
    v.wire = HeaderReply(data, LDNS_RCODE_FORMERR);
    return v;
  }
  const ldns_rr* question = ldns_rr_list_rr(ldns_pkt_question(q.get()), 0);
  v.qname = CanonicalName(ldns_rr_owner(question));
  v.qtype = static_cast<uint16_t>(ldns_rr_get_type(question));
  bool edns = UdpLimit(q.get(), &v.udp_limit);
  if (ldns_rr_get_class(question) != LDNS_RR_CLASS_IN || !policy.Allows(v.qname)) {
    v.wire = ErrorReply(v, LDNS_RCODE_REFUSED);
    return v;
  }
  if (v.qtype == LDNS_RR_TYPE_AXFR || v.qtype == LDNS_RR_TYPE_IXFR) {
    v.wire = ErrorReply(v, LDNS_RCODE_NOTIMPL);
    return v;
  }
  // The query sent upstream is rebuilt from what was understood: the
  // question, RD/CD and the EDNS size and DO bit, nothing else. A TCP
  // client has no UDP limit: ask upstream for the largest answer.
  Pkt f(ldns_pkt_new());
  ldns_pkt_set_opcode(f.get(), LDNS_PACKET_QUERY);
  ldns_pkt_set_rd(f.get(), ldns_pkt_rd(q.get()));
  ldns_pkt_set_cd(f.get(), ldns_pkt_cd(q.get()));
  ldns_pkt_push_rr(f.get(), LDNS_SECTION_QUESTION, ldns_rr_clone(question));
  if (edns || tcp) {
    ldns_pkt_set_edns_udp_size(f.get(), static_cast<uint16_t>(tcp ? kMaxMessage : v.udp_limit));
    ldns_pkt_set_edns_do(f.get(), edns && ldns_pkt_edns_do(q.get()));
  }
  v.edns = edns;
  v.wire = ToWire(f.get());
  if (v.wire.empty()) {
    v.wire = ErrorReply(v, LDNS_RCODE_SERVFAIL);
    return v;
  }
  v.kind = QueryVerdict::Kind::kForward;
  return v;
}

Result<AnswerVerdict> ScreenAnswer(const QueryVerdict& query, uint16_t upstream_id, const uint8_t* data,
                                   size_t len, const std::function<bool(in_addr)>& eligible, bool tcp) {
  ldns_pkt* raw = nullptr;
  if (len < 12 || ldns_wire2pkt(&raw, data, len) != LDNS_STATUS_OK || raw == nullptr)
    return Error(Code::kS300, "unparsable upstream answer");
  Pkt a(raw);
  if (ldns_pkt_id(a.get()) != upstream_id || !ldns_pkt_qr(a.get()) ||
      ldns_rr_list_rr_count(ldns_pkt_question(a.get())) != 1)
    return Error(Code::kS300, "upstream answer does not match its query");
  const ldns_rr* question = ldns_rr_list_rr(ldns_pkt_question(a.get()), 0);
  if (CanonicalName(ldns_rr_owner(question)) != query.qname || ldns_rr_get_type(question) != query.qtype)
    return Error(Code::kS300, "upstream answer is for another question");

  // The names that answer for the question: the name and its CNAME chain.
  ldns_rr_list* answer = ldns_pkt_answer(a.get());
  size_t n = ldns_rr_list_rr_count(answer);
  std::set<std::string> chain = {query.qname};
  for (int hop = 0; hop < kMaxCnameHops; ++hop) {
    size_t before = chain.size();
    for (size_t i = 0; i < n; ++i) {
      const ldns_rr* rr = ldns_rr_list_rr(answer, i);
      if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME || ldns_rr_rd_count(rr) != 1) continue;
      if (chain.count(CanonicalName(ldns_rr_owner(rr)))) chain.insert(CanonicalName(ldns_rr_rdf(rr, 0)));
    }
    if (chain.size() == before) break;
  }
  AnswerVerdict out;
  for (size_t i = 0; i < n; ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answer, i);
    if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_A || ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
        ldns_rr_rd_count(rr) != 1 || !chain.count(CanonicalName(ldns_rr_owner(rr))))
      continue;
    const ldns_rdf* rd = ldns_rr_rdf(rr, 0);
    if (ldns_rdf_get_type(rd) != LDNS_RDF_TYPE_A || ldns_rdf_size(rd) != 4) continue;
    in_addr addr{};
    std::memcpy(&addr, ldns_rdf_data(rd), 4);
    if (!eligible(addr)) continue;
    out.addresses.emplace_back(addr, std::clamp(ldns_rr_ttl(rr), kDnsMinTtl, kDnsMaxTtl));
  }

  // The client's answer: header, sections with TTLs capped, EDNS only if
  // the client spoke it.
  Pkt r(ldns_pkt_new());
  ldns_pkt_set_id(r.get(), query.id);
  ldns_pkt_set_qr(r.get(), true);
  ldns_pkt_set_opcode(r.get(), LDNS_PACKET_QUERY);
  ldns_pkt_set_aa(r.get(), ldns_pkt_aa(a.get()));
  ldns_pkt_set_tc(r.get(), ldns_pkt_tc(a.get()));
  ldns_pkt_set_rd(r.get(), ldns_pkt_rd(a.get()));
  ldns_pkt_set_ra(r.get(), ldns_pkt_ra(a.get()));
  ldns_pkt_set_ad(r.get(), ldns_pkt_ad(a.get()));
  ldns_pkt_set_cd(r.get(), ldns_pkt_cd(a.get()));
  ldns_pkt_set_rcode(r.get(), ldns_pkt_get_rcode(a.get()));
  ldns_pkt_push_rr(r.get(), LDNS_SECTION_QUESTION, ldns_rr_clone(question));
  for (auto [section, list] : {std::pair{LDNS_SECTION_ANSWER, ldns_pkt_answer(a.get())},
                               std::pair{LDNS_SECTION_AUTHORITY, ldns_pkt_authority(a.get())},
                               std::pair{LDNS_SECTION_ADDITIONAL, ldns_pkt_additional(a.get())}}) {
    for (size_t i = 0; i < ldns_rr_list_rr_count(list); ++i) {
      ldns_rr* rr = ldns_rr_clone(ldns_rr_list_rr(list, i));
      if (rr == nullptr) continue;
      ldns_rr_set_ttl(rr, std::min(ldns_rr_ttl(rr), kDnsMaxTtl));
      ldns_pkt_push_rr(r.get(), section, rr);
    }
  }
  if (query.edns) {
    ldns_pkt_set_edns_udp_size(r.get(), static_cast<uint16_t>(kMaxMessage));
    ldns_pkt_set_edns_do(r.get(), ldns_pkt_edns_do(a.get()));
  }
  out.wire = ToWire(r.get());
  if (out.wire.empty()) return Error(Code::kS300, "could not encode the answer");
  if (!tcp && out.wire.size() > query.udp_limit) {
    // Too large for the client's UDP: only the question, TC set; the
    // client retries over TCP. The addresses still enter the set.
    // The setters do not free the lists they replace.
    ldns_rr_list_deep_free(ldns_pkt_answer(r.get()));
    ldns_pkt_set_answer(r.get(), ldns_rr_list_new());
    ldns_rr_list_deep_free(ldns_pkt_authority(r.get()));
    ldns_pkt_set_authority(r.get(), ldns_rr_list_new());
    ldns_rr_list_deep_free(ldns_pkt_additional(r.get()));
    ldns_pkt_set_additional(r.get(), ldns_rr_list_new());
    ldns_pkt_set_ancount(r.get(), 0);
    ldns_pkt_set_nscount(r.get(), 0);
    ldns_pkt_set_arcount(r.get(), 0);
    ldns_pkt_set_tc(r.get(), true);
    out.wire = ToWire(r.get());
  }
  return out;
}

Result<sockaddr_storage> UpstreamResolver() {
  std::string spec;
  uint16_t port = 53;
  if (const char* v = std::getenv("SKIFF_DNS_UPSTREAM"); v != nullptr && *v) {
    spec = v;
    if (auto c = spec.rfind(':'); c != std::string::npos && spec.find(':') == c) {
      std::string p = spec.substr(c + 1);
      if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(p) == 0 || std::stoul(p) > 65535)
        return Error(Code::kS300, "SKIFF_DNS_UPSTREAM: bad port in '" + spec + "'");
      port = static_cast<uint16_t>(std::stoul(p));
      spec = spec.substr(0, c);
    }
  } else {
    std::ifstream in("/etc/resolv.conf");
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      std::string key, value;
      if (ls >> key >> value && key == "nameserver") {
        spec = value.substr(0, value.find('%'));
        break;
      }
    }
    if (spec.empty()) spec = "127.0.0.1";
  }
  sockaddr_storage ss{};
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, spec.c_str(), &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
  } else if (::inet_pton(AF_INET6, spec.c_str(), &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
  } else {
    return Error(Code::kS300, "no usable upstream resolver ('" + spec + "')");
  }
  return ss;
}

// ---- the server ----

struct DnsFilter::Impl {
  struct Pending {
    QueryVerdict query;
    bool tcp = false;
    sockaddr_storage client{};
    socklen_t client_len = 0;
    uint64_t conn = 0;
    Clock::time_point deadline;
  };
  struct Conn {
    UniqueFd fd;
    std::string in, out;
    int pending = 0;
    bool eof = false;
    Clock::time_point deadline;
  };

  Options o;
  UniqueFd upstream;
  UniqueFd stop;
  std::thread thread;
  nft_ctx* nft = nullptr;
  std::map<uint16_t, Pending> pending;  // by upstream id
  std::map<uint64_t, Conn> conns;
  uint64_t next_conn = 1;
  std::map<uint32_t, Clock::time_point> in_set;  // address -> expiry we set
  double tokens = kBurst;
  Clock::time_point refill = Clock::now();

  ~Impl() {
    if (nft != nullptr) nft_ctx_free(nft);
  }

  bool Admit() {
    auto now = Clock::now();
    tokens = std::min(kBurst, tokens + kRate * std::chrono::duration<double>(now - refill).count());
    refill = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }

  uint16_t NewId() {
    for (;;) {
      uint16_t id = 0;
      if (::getrandom(&id, sizeof id, 0) != sizeof id)
        id = static_cast<uint16_t>(Clock::now().time_since_epoch().count());
      if (!pending.count(id)) return id;
    }
  }

  bool Nft(const std::string& cmd) {
    std::lock_guard<std::mutex> g(NftMutex());
    return nft_run_cmd_from_buffer(nft, cmd.c_str()) == 0;
  }

  // Adds (or extends) the addresses in the set before the answer leaves.
  bool AddToSet(const std::vector<std::pair<in_addr, uint32_t>>& addrs) {
    if (addrs.empty()) return true;
    auto now = Clock::now();
    std::string add, del;
    std::vector<std::pair<uint32_t, Clock::time_point>> updates;
    for (const auto& [a, ttl] : addrs) {
      auto expiry = now + std::chrono::seconds(ttl);
      auto it = in_set.find(a.s_addr);
      if (it != in_set.end() && it->second > now && it->second + std::chrono::seconds(1) >= expiry)
        continue;  // already there for at least as long
      char buf[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &a, buf, sizeof buf);
      if (it != in_set.end() && it->second > now) del += (del.empty() ? "" : ", ") + std::string(buf);
      add += (add.empty() ? "" : ", ") + std::string(buf) + " timeout " + std::to_string(ttl) + "s";
      updates.emplace_back(a.s_addr, expiry);
    }
    if (add.empty()) return true;
    const std::string set = o.nft_family + " skiff dns4";
    std::string cmd = "add element " + set + " { " + add + " }\n";
    // An element's timeout cannot be raised in place: delete and re-add in
    // one transaction. If one of them expired meanwhile, the delete fails
    // and the whole transaction is undone: add alone then.
    bool ok = (!del.empty() && Nft("delete element " + set + " { " + del + " }\n" + cmd)) || Nft(cmd);
    if (!ok) return false;
    for (auto& [a, e] : updates) in_set[a] = e;
    if (in_set.size() > 8192) {
      for (auto it = in_set.begin(); it != in_set.end();)
        it = it->second <= now ? in_set.erase(it) : std::next(it);
    }
    return true;
  }

  void SendUdp(const std::vector<uint8_t>& wire, const sockaddr_storage& to, socklen_t len) {
    if (!wire.empty())
      (void)::sendto(o.udp.get(), wire.data(), wire.size(), MSG_DONTWAIT,
                     reinterpret_cast<const sockaddr*>(&to), len);
  }

  void SendTcp(uint64_t conn, const std::vector<uint8_t>& wire) {
    auto it = conns.find(conn);
    if (it == conns.end() || wire.empty() || wire.size() > 65535) return;
    if (it->second.out.size() + wire.size() > kMaxConnOutput) return;
    it->second.out.push_back(static_cast<char>(wire.size() >> 8));
    it->second.out.push_back(static_cast<char>(wire.size() & 0xff));
    it->second.out.append(reinterpret_cast<const char*>(wire.data()), wire.size());
  }

  void Reply(const Pending& p, const std::vector<uint8_t>& wire) {
    if (p.tcp)
      SendTcp(p.conn, wire);
    else
      SendUdp(wire, p.client, p.client_len);
  }

  // One message from the sandbox.
  void Query(const uint8_t* data, size_t len, bool tcp, const sockaddr_storage* from, socklen_t from_len,
             uint64_t conn) {
    if (!Admit()) return;  // over the rate: dropped, the client retries
    Pending p;
    p.query = ScreenQuery(o.policy, data, len, tcp);
    p.tcp = tcp;
    if (from != nullptr) p.client = *from;
    p.client_len = from_len;
    p.conn = conn;
    switch (p.query.kind) {
      case QueryVerdict::Kind::kDrop:
        return;
      case QueryVerdict::Kind::kReply:
        Reply(p, p.query.wire);
        return;
      case QueryVerdict::Kind::kForward:
        break;
    }
    Conn* c = tcp ? &conns.at(conn) : nullptr;
    if (pending.size() >= kMaxPending || (c && c->pending >= static_cast<int>(kMaxPendingPerConn))) {
      Reply(p, ErrorReply(p.query, LDNS_RCODE_SERVFAIL));
      return;
    }
    uint16_t id = NewId();
    std::vector<uint8_t> wire = std::move(p.query.wire);
    wire[0] = static_cast<uint8_t>(id >> 8);
    wire[1] = static_cast<uint8_t>(id & 0xff);
    if (::send(upstream.get(), wire.data(), wire.size(), MSG_DONTWAIT) != static_cast<ssize_t>(wire.size())) {
      Reply(p, ErrorReply(p.query, LDNS_RCODE_SERVFAIL));
      return;
    }
    p.deadline = Clock::now() + kUpstreamTimeout;
    SKIFF_LOG(Debug) << "dns filter " << this << ": forwarded as " << id;
    if (c) ++c->pending;
    pending.emplace(id, std::move(p));
  }

  void Finish(std::map<uint16_t, Pending>::iterator it, const std::vector<uint8_t>& wire) {
    Reply(it->second, wire);
    if (it->second.tcp) {
      if (auto c = conns.find(it->second.conn); c != conns.end()) --c->second.pending;
    }
    pending.erase(it);
  }

  void Upstream() {
    std::vector<uint8_t> buf(kMaxUpstreamMessage);
    for (int i = 0; i < 64; ++i) {
      ssize_t n = ::recv(upstream.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) return;
      if (n < 12) continue;
      uint16_t id = static_cast<uint16_t>(buf[0] << 8 | buf[1]);
      auto it = pending.find(id);
      if (it == pending.end()) continue;
      auto a =
          ScreenAnswer(it->second.query, id, buf.data(), static_cast<size_t>(n), o.eligible, it->second.tcp);
      SKIFF_LOG(Debug) << "dns filter " << this << ": answer " << id << " "
                       << (a.ok() ? "ok" : a.error().message());
      if (!a.ok()) continue;  // not this query's answer: keep waiting
      if (!AddToSet(a->addresses)) {
        SKIFF_LOG(Warn) << "dns filter: could not add resolved addresses to the egress set";
        Finish(it, ErrorReply(it->second.query, LDNS_RCODE_SERVFAIL));
        continue;
      }
      Finish(it, a->wire);
    }
  }

  bool FromSandbox(const sockaddr_storage& from) const {
    if (!o.client) return true;
    if (from.ss_family != AF_INET) return false;
    sockaddr_in sin{};
    std::memcpy(&sin, &from, sizeof sin);
    return o.client(sin.sin_addr);
  }

  void Udp() {
    uint8_t buf[kMaxMessage + 1];
    for (int i = 0; i < 64; ++i) {
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      ssize_t n = ::recvfrom(o.udp.get(), buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
                             reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) return;
      if (static_cast<size_t>(n) > kMaxMessage || !FromSandbox(from)) continue;
      Query(buf, static_cast<size_t>(n), false, &from, len, 0);
    }
  }

  void Accept() {
    for (int i = 0; i < 16 && conns.size() < kMaxConns; ++i) {
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      int fd = ::accept4(o.tcp.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      Conn c;
      c.fd.reset(fd);
      if (!FromSandbox(from)) continue;  // closed at once
      c.deadline = Clock::now() + kConnIdle;
      conns.emplace(next_conn++, std::move(c));
    }
  }

  // Reads, answers and writes one TCP connection; false: close it.
  bool Serve(uint64_t id, Conn& c, short revents) {
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
      if (n == 0) c.eof = true;
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        c.deadline = Clock::now() + kConnIdle;
      }
      while (c.in.size() >= 2) {
        size_t len = static_cast<uint8_t>(c.in[0]) << 8 | static_cast<uint8_t>(c.in[1]);
        if (len > kMaxMessage) return false;
        if (c.in.size() < 2 + len) break;
        std::string msg = c.in.substr(2, len);
        c.in.erase(0, 2 + len);
        Query(reinterpret_cast<const uint8_t*>(msg.data()), msg.size(), true, nullptr, 0, id);
      }
      if (c.in.size() > 2 + kMaxMessage) return false;
    }
    if (!c.out.empty()) {
      ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
        c.deadline = Clock::now() + kConnIdle;
      }
    }
    return !(c.eof && c.pending == 0 && c.out.empty());
  }

  void Expire() {
    auto now = Clock::now();
    for (auto it = pending.begin(); it != pending.end();) {
      auto next = std::next(it);
      if (it->second.deadline <= now) Finish(it, ErrorReply(it->second.query, LDNS_RCODE_SERVFAIL));
      it = next;
    }
    for (auto it = conns.begin(); it != conns.end();)
      it = it->second.deadline <= now ? conns.erase(it) : std::next(it);
  }

  void Loop() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      fds.assign({{stop.get(), POLLIN, 0},
                  {o.udp.get(), POLLIN, 0},
                  {upstream.get(), POLLIN, 0},
                  {o.tcp.get(), static_cast<short>(conns.size() < kMaxConns ? POLLIN : 0), 0}});
      ids.clear();
      for (auto& [id, c] : conns) {
        fds.push_back({c.fd.get(), static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
        ids.push_back(id);
      }
      auto wake = Clock::now() + std::chrono::seconds(1);
      for (auto& [id, p] : pending) wake = std::min(wake, p.deadline);
      for (auto& [id, c] : conns) wake = std::min(wake, c.deadline);
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
      int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(ms, 0) + 1));
      if (r < 0 && errno != EINTR) return;
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) Udp();
      if (fds[2].revents & POLLIN) Upstream();
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = conns.find(ids[i]);
        if (it == conns.end()) continue;
        if (!Serve(ids[i], it->second, fds[4 + i].revents)) conns.erase(it);
      }
      if (fds[3].revents & POLLIN) Accept();
      Expire();
    }
  }
};

DnsFilter::DnsFilter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<DnsFilter>> DnsFilter::Start(Options opts) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(opts);
  Impl& m = *impl;
  for (int fd : {m.o.udp.get(), m.o.tcp.get()})
    if (fd < 0 || ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
      return Error(Code::kS300, "dns filter: bad listening socket");
  // The upstream socket lives in this (the host's) namespace.
  const auto& up = m.o.upstream;
  m.upstream.reset(::socket(up.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!m.upstream) return Error::Sys(Code::kS300, "socket", "dns upstream", errno);
  socklen_t up_len = up.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::connect(m.upstream.get(), reinterpret_cast<const sockaddr*>(&up), up_len) < 0)
    return Error::Sys(Code::kS300, "connect", "dns upstream", errno);
  m.stop.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m.stop) return Error::Sys(Code::kS300, "eventfd", "dns filter", errno);

  // The thread joins the sandbox's namespace, so its nftables context
  // talks to the sandbox's ruleset; its sockets were all made before.
  auto started = std::make_shared<std::promise<Status>>();
  auto ready = started->get_future();
  Result<std::thread> thread = StartThread("dns filter", [&m, started] {
    // An exception before set_value leaves the promise broken: Start()
    // reads that as a failed start (a later one ends only the loop).
    if (::setns(m.o.netns_fd, CLONE_NEWNET) != 0) {
      started->set_value(Error::Sys(Code::kS300, "setns", "dns filter", errno));
      return;
    }
    {
      std::lock_guard<std::mutex> g(NftMutex());
      m.nft = nft_ctx_new(NFT_CTX_DEFAULT);
    }
    if (m.nft == nullptr) {
      started->set_value(Error(Code::kS300, "dns filter: nft_ctx_new failed"));
      return;
    }
    nft_ctx_buffer_output(m.nft);
    nft_ctx_buffer_error(m.nft);
    started->set_value(OkStatus());
    m.Loop();
  });
  if (!thread.ok()) return std::move(thread).error().With("starting the dns filter");
  m.thread = std::move(thread).value();
  Status st = Error(Code::kS300, "dns filter: its thread ended by an exception while starting");
  try {
    st = ready.get();
  } catch (const std::future_error&) {  // broken promise: the body threw, RunGuarded logged it
  }
  if (!st.ok()) {
    m.thread.join();
    return st.error();
  }
  return std::unique_ptr<DnsFilter>(new DnsFilter(std::move(impl)));
}

DnsFilter::~DnsFilter() {
  if (!impl_) return;
  uint64_t one = 1;
  (void)!::write(impl_->stop.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace skiff::net
