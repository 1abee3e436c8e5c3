// The pure parts of sandbox networking (docs/security.md#networking-network-true): the egress ruleset,
// network.allow parsing and the loopback rewrite of create-time env.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ldns/ldns.h>

#include <random>

#include "isolation/net/dns_filter.h"
#include "isolation/net/sandbox_net.h"

namespace skiff::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The lines of the ruleset in order, trimmed.
std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t e = s.find('\n', i);
    if (e == std::string::npos) e = s.size();
    std::string l = s.substr(i, e - i);
    l.erase(0, l.find_first_not_of(' '));
    if (!l.empty()) out.push_back(l);
    i = e + 1;
  }
  return out;
}

size_t IndexOf(const std::vector<std::string>& lines, const std::string& needle) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(needle) != std::string::npos) return i;
  return std::string::npos;
}

TEST(NetRuleset, JailDefaultDeniesSpecialRangesAndHostAllowsPublic) {
  auto r = BuildRuleset({{8080, 5432}, {}}, Mode::kLocal, {"127.0.0.1", "198.51.100.7", "fe80::1"});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto l = Lines(*r);
  EXPECT_THAT(*r, HasSubstr("table inet skiff"));
  EXPECT_THAT(*r, HasSubstr("hook output priority filter; policy drop;"));
  EXPECT_THAT(*r, HasSubstr("ip daddr 10.0.2.2 tcp dport { 5432, 8080 } accept"));
  EXPECT_THAT(*r, HasSubstr("ip daddr 10.0.2.3 udp dport 53 accept"));
  EXPECT_THAT(*r, HasSubstr("ip daddr 198.51.100.7 reject"));  // a host address
  for (const char* range :
       {"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4",
        "240.0.0.0/4", "10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"})
    EXPECT_THAT(*r, HasSubstr(range));
  // Order: gateway ports, then the rest of the sandbox subnet denied, then
  // special ranges, then public unicast accepted, then everything else.
  size_t gw = IndexOf(l, "10.0.2.2 tcp dport"), subnet = IndexOf(l, "10.0.2.0/24 reject"),
         priv = IndexOf(l, "192.168.0.0/16"), pub = IndexOf(l, "meta nfproto ipv4 accept");
  ASSERT_NE(pub, std::string::npos);
  EXPECT_LT(gw, subnet);
  EXPECT_LT(subnet, priv);
  EXPECT_LT(priv, pub);
  EXPECT_EQ(l[pub + 1], "reject");
}

TEST(NetRuleset, NoHostPortsMeansNoGatewayAccept) {
  auto r = BuildRuleset({{}, {}}, Mode::kLocal, {});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r, Not(HasSubstr("10.0.2.2")));
  EXPECT_THAT(*r, HasSubstr("ip daddr 10.0.2.0/24 reject"));
}

TEST(NetRuleset, AllowCidrsUnlockOnlyPrivateRangesAndReplacePublic) {
  auto r = BuildRuleset({{}, {"10.20.0.0/16", "203.0.113.9", "198.51.100.0/24", "2001:db8::/32"}},
                        Mode::kLocal, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto l = Lines(*r);
  size_t never = IndexOf(l, "127.0.0.0/8"), unlock = IndexOf(l, "ip daddr 10.20.0.0/16 accept"),
         priv = IndexOf(l, "192.168.0.0/16"), pub = IndexOf(l, "ip daddr 203.0.113.9/32 accept");
  ASSERT_NE(unlock, std::string::npos) << *r;
  ASSERT_NE(pub, std::string::npos) << *r;
  EXPECT_LT(never, unlock);  // loopback/link-local/... can never be unlocked
  EXPECT_LT(unlock, priv);
  EXPECT_LT(priv, pub);
  EXPECT_THAT(*r, HasSubstr("ip daddr 198.51.100.0/24 accept"));
  EXPECT_THAT(*r, Not(HasSubstr("meta nfproto ipv4 accept")));  // non-empty allow: no blanket accept
}

TEST(NetRuleset, BridgeModeFiltersForwardedGuestTraffic) {
  auto r = BuildRuleset({{8080}, {}}, Mode::kBridge, {});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r, HasSubstr("table bridge skiff"));
  EXPECT_THAT(*r, HasSubstr("hook forward priority filter; policy drop;"));
  EXPECT_THAT(*r, HasSubstr("ether type arp accept"));
  EXPECT_THAT(*r, HasSubstr("ether type ip accept"));
  EXPECT_THAT(*r, HasSubstr("ip daddr 10.0.2.0/24 drop"));
  EXPECT_THAT(*r, Not(HasSubstr("reject")));
}

TEST(NetRuleset, BridgeModeTakesOnlyTheGuestsOwnSourcesAndAnswersOnlyTheGuest) {
  for (const std::vector<std::string>& allow : {std::vector<std::string>{}, {"api.example.com"}}) {
    auto r = BuildRuleset({{}, allow}, Mode::kBridge, {});
    ASSERT_TRUE(r.ok());
    // Before the bridge learns or delivers anything (prerouting, ahead of
    // the DNS re-addressing at -300).
    EXPECT_THAT(*r, HasSubstr("type filter hook prerouting priority -400; policy accept;"));
    for (const char* rule :
         {"iifname \"vm0\" ether saddr != 52:54:00:12:34:56 drop",
          "iifname \"vm0\" ether type != { ip, arp } drop", "iifname \"vm0\" ip saddr != 10.0.2.15 drop",
          "iifname \"vm0\" arp saddr ether != 52:54:00:12:34:56 drop",
          "iifname \"vm0\" arp saddr ip != 10.0.2.15 drop"})
      EXPECT_THAT(*r, HasSubstr(rule));
    // The namespace's own frames (the DNS filter's answers) go to the
    // guest, never to slirp4netns.
    EXPECT_THAT(*r, HasSubstr("type filter hook output priority filter; policy drop;\n"
                              "    oifname \"vm0\" ether type arp accept\n"
                              "    oifname \"vm0\" ip daddr 10.0.2.15 accept\n  }"));
  }
}

TEST(NetDnsClient, OnlyTheSandboxsOwnAddressesAreAnswered) {
  auto in = [](const char* a) {
    in_addr x{};
    inet_pton(AF_INET, a, &x);
    return x;
  };
  EXPECT_TRUE(SandboxClient(in("10.0.2.15"), Mode::kBridge));
  EXPECT_TRUE(SandboxClient(in("10.0.2.3"), Mode::kBridge)) << "the namespace itself";
  for (const char* a : {"10.0.2.2", "10.0.2.100", "127.0.0.1", "1.2.3.4"})
    EXPECT_FALSE(SandboxClient(in(a), Mode::kBridge)) << a;
  for (const char* a : {"10.0.2.100", "10.0.2.3", "127.0.0.1", "127.1.2.3"})
    EXPECT_TRUE(SandboxClient(in(a), Mode::kLocal)) << a;
  for (const char* a : {"10.0.2.2", "10.0.2.15", "10.0.2.101", "1.2.3.4", "0.0.0.0"})
    EXPECT_FALSE(SandboxClient(in(a), Mode::kLocal)) << a;
}

TEST(NetAllow, HostBitsAreClearedDomainsKeptAndJunkRefusedNamingTheKey) {
  auto a = ParseAllow({"10.1.2.3/8", "192.168.1.1", "100.64.0.0/9", "8.8.8.8/8", "::1"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->v4_private, (std::vector<std::string>{"10.0.0.0/8", "192.168.1.1/32"}));
  // A /9 is wider than 100.64.0.0/10: not inside a private range, so it
  // unlocks nothing (the private deny comes first).
  EXPECT_EQ(a->v4_public, (std::vector<std::string>{"100.0.0.0/9", "8.0.0.0/8"}));
  EXPECT_EQ(a->v6, (std::vector<std::string>{"::1/128"}));
  auto d = ParseAllow({"example.com", "10.0.0.0/8", "*.example.org"});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->domains, (std::vector<std::string>{"example.com", "*.example.org"}));
  for (const char* d : {"exa mple.com", "*.", "a..b", "x/y"}) {
    auto e = ParseAllow({"10.0.0.0/8", d});
    ASSERT_FALSE(e.ok()) << d;
    EXPECT_EQ(e.error().code(), Code::kS300);
    EXPECT_THAT(e.error().message(), HasSubstr("network.allow[1]"));
    EXPECT_THAT(e.error().message(), HasSubstr(d));
  }
  EXPECT_FALSE(ParseAllow({"10.0.0.0/33"}).ok());
  EXPECT_FALSE(ParseAllow({"10.0.0.0/"}).ok());
}

TEST(NetRewrite, OnlyListedPortsFollowedByANonDigit) {
  std::vector<uint16_t> ports = {8080, 5432};
  EXPECT_EQ(RewriteLoopback("http://localhost:8080/api", ports), "http://10.0.2.2:8080/api");
  EXPECT_EQ(RewriteLoopback("postgres://u:p@127.0.0.1:5432", ports), "postgres://u:p@127.0.0.1:5432")
      << "'@127.0.0.1' is not '://127.0.0.1'";
  EXPECT_EQ(RewriteLoopback("postgres://127.0.0.1:5432", ports), "postgres://10.0.2.2:5432");
  EXPECT_EQ(RewriteLoopback("http://localhost:80801", ports), "http://localhost:80801");
  EXPECT_EQ(RewriteLoopback("http://localhost:9090", ports), "http://localhost:9090");
  EXPECT_EQ(RewriteLoopback("a=http://localhost:8080,b=ws://127.0.0.1:5432x", ports),
            "a=http://10.0.2.2:8080,b=ws://10.0.2.2:5432x");
  EXPECT_EQ(RewriteLoopback("http://localhost:", ports), "http://localhost:");
  EXPECT_EQ(RewriteLoopback("http://localhost:8080", {}), "http://localhost:8080");
  EXPECT_EQ(RewriteLoopback("http://LOCALHOST:8080", ports), "http://LOCALHOST:8080");
}

// ---- domain entries ----

std::string Wire(const char* name) {
  ldns_rdf* r = ldns_dname_new_frm_str(name);
  std::string out(reinterpret_cast<const char*>(ldns_rdf_data(r)), ldns_rdf_size(r));
  ldns_rdf_deep_free(r);
  return out;
}

// The wire form of p, which is freed.
std::vector<uint8_t> WireOf(ldns_pkt* p) {
  uint8_t* w = nullptr;
  size_t n = 0;
  ldns_pkt2wire(&w, p, &n);
  std::vector<uint8_t> out(w, w + n);
  free(w);
  ldns_pkt_free(p);
  return out;
}

std::vector<uint8_t> Query(const char* name, ldns_rr_type type = LDNS_RR_TYPE_A, bool edns = false) {
  ldns_pkt* q = ldns_pkt_query_new(ldns_dname_new_frm_str(name), type, LDNS_RR_CLASS_IN, LDNS_RD);
  ldns_pkt_set_id(q, 0x1234);
  if (edns) ldns_pkt_set_edns_udp_size(q, 1232);
  return WireOf(q);
}

// An upstream answer to `v`'s forwarded query, with `rrs` in the answer.
std::vector<uint8_t> Answer(const QueryVerdict& v, uint16_t id, std::vector<const char*> rrs,
                            const char* qname = nullptr) {
  ldns_pkt* a = nullptr;
  EXPECT_EQ(ldns_wire2pkt(&a, v.wire.data(), v.wire.size()), LDNS_STATUS_OK);
  ldns_pkt_set_id(a, id);
  ldns_pkt_set_qr(a, true);
  if (qname) {
    ldns_rr* q = ldns_rr_list_rr(ldns_pkt_question(a), 0);
    ldns_rdf_deep_free(ldns_rr_owner(q));  // ldns_rr_set_owner does not free it
    ldns_rr_set_owner(q, ldns_dname_new_frm_str(qname));
  }
  for (const char* s : rrs) {
    ldns_rr* rr = nullptr;
    EXPECT_EQ(ldns_rr_new_frm_str(&rr, s, 0, nullptr, nullptr), LDNS_STATUS_OK) << s;
    ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
  }
  return WireOf(a);
}

uint8_t Rcode(const std::vector<uint8_t>& wire) { return wire.size() >= 4 ? wire[3] & 0x0f : 0xff; }

bool Public(in_addr a) { return ResolvedAddressEligible(a, {"203.0.113.50"}); }

TEST(DnsPolicy, ExactNamesWildcardsBelowTheApexCaseBlind) {
  auto p = DomainPolicy::Parse({"example.com", "*.wild.org.", "API.Upper.NET"});
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  EXPECT_TRUE(p->Allows(Wire("example.com.")));
  EXPECT_TRUE(p->Allows(Wire("EXAMPLE.Com")));
  EXPECT_TRUE(p->Allows(Wire("api.upper.net")));
  EXPECT_FALSE(p->Allows(Wire("www.example.com")));
  EXPECT_FALSE(p->Allows(Wire("example.com.evil.net")));
  EXPECT_FALSE(p->Allows(Wire("xexample.com")));
  EXPECT_FALSE(p->Allows(Wire("wild.org"))) << "the apex is not a subdomain";
  EXPECT_TRUE(p->Allows(Wire("a.wild.org")));
  EXPECT_TRUE(p->Allows(Wire("a.b.c.WILD.org")));
  EXPECT_FALSE(p->Allows(Wire("awild.org")));
  // A label holding a dot is one label: "a\.wild.org" has labels
  // ["a.wild", "org"] and is not below wild.org.
  EXPECT_FALSE(p->Allows(Wire("a\\.wild.org")));
  EXPECT_FALSE(p->Allows(Wire(".")));
  for (const char* bad : {"", "*.", "a b.com", "*", "x/y", "a..b"})
    EXPECT_FALSE(DomainPolicy::Parse({bad}).ok()) << bad;
}

TEST(DnsScreen, RefusedForNamesNotOnTheListForwardedOtherwise) {
  auto p = *DomainPolicy::Parse({"example.com", "*.wild.org"});
  auto q = Query("other.net");
  auto v = ScreenQuery(p, q.data(), q.size(), false);
  ASSERT_EQ(v.kind, QueryVerdict::Kind::kReply);
  EXPECT_EQ(Rcode(v.wire), LDNS_RCODE_REFUSED);
  EXPECT_EQ(v.wire[0], 0x12);
  EXPECT_EQ(v.wire[1], 0x34);
  EXPECT_TRUE(v.wire[2] & 0x80) << "QR set";
  q = Query("wild.org");
  EXPECT_EQ(Rcode(ScreenQuery(p, q.data(), q.size(), false).wire), LDNS_RCODE_REFUSED);
  q = Query("4.3.2.1.in-addr.arpa", LDNS_RR_TYPE_PTR);
  EXPECT_EQ(Rcode(ScreenQuery(p, q.data(), q.size(), false).wire), LDNS_RCODE_REFUSED);
  q = Query("x.wild.org", LDNS_RR_TYPE_AAAA, true);
  v = ScreenQuery(p, q.data(), q.size(), false);
  ASSERT_EQ(v.kind, QueryVerdict::Kind::kForward);
  EXPECT_EQ(v.udp_limit, 1232u);
  EXPECT_TRUE(v.edns);
  EXPECT_EQ(v.qname, Wire("x.wild.org"));
  q = Query("example.com", LDNS_RR_TYPE_AXFR);
  EXPECT_EQ(Rcode(ScreenQuery(p, q.data(), q.size(), true).wire), LDNS_RCODE_NOTIMPL);
  // A response sent to the resolver, a runt: no answer at all.
  q = Query("example.com");
  q[2] |= 0x80;
  EXPECT_EQ(ScreenQuery(p, q.data(), q.size(), false).kind, QueryVerdict::Kind::kDrop);
  EXPECT_EQ(ScreenQuery(p, q.data(), 5, false).kind, QueryVerdict::Kind::kDrop);
  // Two questions: FORMERR.
  q = Query("example.com");
  q[5] = 2;
  EXPECT_EQ(Rcode(ScreenQuery(p, q.data(), q.size(), false).wire), LDNS_RCODE_FORMERR);
}

TEST(DnsScreen, AnswerAddsOnlyPublicAddressesOfTheNameAndItsCnameChain) {
  auto p = *DomainPolicy::Parse({"example.com"});
  auto q = Query("example.com");
  auto v = ScreenQuery(p, q.data(), q.size(), false);
  ASSERT_EQ(v.kind, QueryVerdict::Kind::kForward);
  auto a = Answer(v, 777,
                  {"example.com. 10 IN CNAME cdn.example.net.", "cdn.example.net. 86400 IN A 198.51.100.1",
                   "cdn.example.net. 300 IN A 10.1.2.3", "cdn.example.net. 300 IN A 127.0.0.1",
                   "cdn.example.net. 300 IN A 169.254.169.254", "cdn.example.net. 300 IN A 203.0.113.50",
                   "unrelated.net. 300 IN A 198.51.100.2", "cdn.example.net. 300 IN A 100.64.0.1"});
  auto r = ScreenAnswer(v, 777, a.data(), a.size(), Public, false);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->addresses.size(), 1u);
  char buf[INET_ADDRSTRLEN];
  EXPECT_STREQ(::inet_ntop(AF_INET, &r->addresses[0].first, buf, sizeof buf), "198.51.100.1");
  EXPECT_EQ(r->addresses[0].second, kDnsMaxTtl);
  ldns_pkt* out = nullptr;
  ASSERT_EQ(ldns_wire2pkt(&out, r->wire.data(), r->wire.size()), LDNS_STATUS_OK);
  EXPECT_EQ(ldns_pkt_id(out), 0x1234) << "the client's id comes back";
  EXPECT_EQ(ldns_rr_list_rr_count(ldns_pkt_answer(out)), 8u) << "the answer itself is passed on";
  for (size_t i = 0; i < 8; ++i) EXPECT_LE(ldns_rr_ttl(ldns_rr_list_rr(ldns_pkt_answer(out), i)), kDnsMaxTtl);
  ldns_pkt_free(out);
  // A short TTL is raised to the minimum.
  a = Answer(v, 9, {"example.com. 1 IN A 198.51.100.3"});
  r = ScreenAnswer(v, 9, a.data(), a.size(), Public, false);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->addresses.size(), 1u);
  EXPECT_EQ(r->addresses[0].second, kDnsMinTtl);
  // Wrong id, wrong question: not this query's answer.
  EXPECT_FALSE(ScreenAnswer(v, 10, a.data(), a.size(), Public, false).ok());
  a = Answer(v, 9, {"evil.net. 300 IN A 198.51.100.3"}, "evil.net.");
  EXPECT_FALSE(ScreenAnswer(v, 9, a.data(), a.size(), Public, false).ok());
}

TEST(DnsScreen, OversizedUdpAnswerIsTruncatedButTcpIsNot) {
  auto p = *DomainPolicy::Parse({"example.com"});
  auto q = Query("example.com");
  auto v = ScreenQuery(p, q.data(), q.size(), false);
  std::vector<std::string> lines;
  for (int i = 0; i < 60; ++i) lines.push_back("example.com. 60 IN A 198.51.100." + std::to_string(i + 1));
  std::vector<const char*> rrs;
  for (auto& l : lines) rrs.push_back(l.c_str());
  auto a = Answer(v, 5, rrs);
  auto r = ScreenAnswer(v, 5, a.data(), a.size(), Public, false);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->wire.size(), 512u);
  EXPECT_TRUE(r->wire[2] & 0x02) << "TC set";
  EXPECT_EQ(r->addresses.size(), 60u);
  r = ScreenAnswer(v, 5, a.data(), a.size(), Public, true);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->wire.size(), 512u);
  EXPECT_FALSE(r->wire[2] & 0x02);
}

TEST(DnsScreen, RandomBytesNeverCrashAndNeverForwardJunk) {
  auto p = *DomainPolicy::Parse({"example.com"});
  std::mt19937 rng(7);
  auto base = Query("example.com", LDNS_RR_TYPE_A, true);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> m = base;
    if (i % 2) {
      m.resize(rng() % 600);
      for (auto& b : m) b = static_cast<uint8_t>(rng());
    } else {
      for (int k = 0; k < 4; ++k) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    }
    auto v = ScreenQuery(p, m.data(), m.size(), i % 3 == 0);
    if (v.kind == QueryVerdict::Kind::kForward) {
      EXPECT_EQ(v.qname, Wire("example.com")) << "only the allowed name goes upstream";
      // The forwarded query is rebuilt: it parses, and it has one question.
      ldns_pkt* f = nullptr;
      ASSERT_EQ(ldns_wire2pkt(&f, v.wire.data(), v.wire.size()), LDNS_STATUS_OK);
      EXPECT_EQ(ldns_pkt_qdcount(f), 1);
      ldns_pkt_free(f);
      auto r = ScreenAnswer(v, 1, m.data(), m.size(), Public, false);  // junk as an answer
      (void)r;
    }
  }
}

TEST(NetRuleset, DomainEntriesAddTheSetAndCloseOtherResolvers) {
  auto local = BuildRuleset({{8080}, {"example.com", "203.0.113.0/24"}}, Mode::kLocal, {"192.0.2.10"});
  ASSERT_TRUE(local.ok()) << local.error().ToString();
  auto l = Lines(*local);
  EXPECT_THAT(*local, HasSubstr("set dns4 { type ipv4_addr; flags timeout; size 4096; }"));
  EXPECT_THAT(*local, Not(HasSubstr("ip daddr 10.0.2.3 udp dport 53 accept")));
  // Denied ranges first, then the resolved set: a rebinding answer that
  // slipped into the set would still be denied.
  EXPECT_LT(IndexOf(l, "udp dport 53 reject"), IndexOf(l, "ip daddr @dns4 accept"));
  EXPECT_LT(IndexOf(l, "tcp dport 53 reject"), IndexOf(l, "ip daddr 203.0.113.0/24 accept"));
  EXPECT_LT(IndexOf(l, "ip daddr 192.0.2.10 reject"), IndexOf(l, "ip daddr @dns4 accept"));
  EXPECT_LT(IndexOf(l, "ip daddr { 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16 } reject"),
            IndexOf(l, "ip daddr @dns4 accept"));
  ASSERT_LT(IndexOf(l, "ip daddr @dns4 accept") + 1, l.size());
  EXPECT_EQ(l[IndexOf(l, "ip daddr @dns4 accept") + 1], "reject") << "then nothing else";
  EXPECT_NE(IndexOf(l, "ct state established,related accept"), l.size());
  auto bridge = BuildRuleset({{}, {"*.example.com"}}, Mode::kBridge, {});
  ASSERT_TRUE(bridge.ok());
  EXPECT_THAT(*bridge, HasSubstr("set dns4 { type ipv4_addr; flags dynamic, timeout; size 4096; }"));
  EXPECT_THAT(*bridge, HasSubstr("iifname \"vm0\" ip daddr 10.0.2.3 udp dport 53 ether daddr set "
                                 "02:53:0a:00:02:03 meta pkttype set host"));
  EXPECT_THAT(*bridge, HasSubstr("ip daddr @dns4 update @dns4 { ip daddr timeout 3600s } accept"));
  EXPECT_THAT(*bridge, HasSubstr("udp dport 53 drop"));
  // Without domain entries nothing changes.
  auto plain = BuildRuleset({{}, {"203.0.113.0/24"}}, Mode::kLocal, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, Not(HasSubstr("dns4")));
  EXPECT_THAT(*plain, HasSubstr("ip daddr 10.0.2.3 udp dport 53 accept"));
}

TEST(NetAllow, ResolvedAddressesMustBePublicAndNotTheHost) {
  auto ok = [](const char* a) {
    in_addr x{};
    ::inet_pton(AF_INET, a, &x);
    return ResolvedAddressEligible(x, {"203.0.113.50"});
  };
  EXPECT_TRUE(ok("198.51.100.1"));
  EXPECT_TRUE(ok("8.8.8.8"));
  for (const char* no :
       {"127.0.0.1", "10.0.2.2", "10.9.9.9", "169.254.169.254", "172.16.0.1", "192.168.1.1", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.0.8", "198.18.0.1", "203.0.113.50"})
    EXPECT_FALSE(ok(no)) << no;
}

}  // namespace
}  // namespace skiff::net
