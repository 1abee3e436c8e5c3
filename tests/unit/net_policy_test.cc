// The pure parts of sandbox networking (spec §6.3): the egress ruleset,
// network.allow parsing and the loopback rewrite of create-time env.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  for (const char* range : {"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "192.0.0.0/24",
                            "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4", "10.0.0.0/8",
                            "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"})
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

TEST(NetAllow, HostBitsAreClearedAndDomainsRefusedNamingTheKey) {
  auto a = ParseAllow({"10.1.2.3/8", "192.168.1.1", "100.64.0.0/9", "8.8.8.8/8", "::1"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->v4_private, (std::vector<std::string>{"10.0.0.0/8", "192.168.1.1/32"}));
  // A /9 is wider than 100.64.0.0/10: not inside a private range, so it
  // unlocks nothing (the private deny comes first).
  EXPECT_EQ(a->v4_public, (std::vector<std::string>{"100.0.0.0/9", "8.0.0.0/8"}));
  EXPECT_EQ(a->v6, (std::vector<std::string>{"::1/128"}));
  for (const char* d : {"example.com", "*.example.org"}) {
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

}  // namespace
}  // namespace skiff::net
