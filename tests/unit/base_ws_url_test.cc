// base/ws_url: the engine URL's parts, its refusals, and loopback hosts.
#include "base/ws_url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace skiff {
namespace {

using ::testing::HasSubstr;

TEST(WsUrlTest, SplitsSchemeHostPortAndPath) {
  auto u = ParseWsUrl("ws://127.0.0.1:49135");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "49135");
  EXPECT_EQ(u->path, "/");

  u = ParseWsUrl("wss://engine.example/iii?x=1");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "engine.example");
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->path, "/iii?x=1");

  u = ParseWsUrl("ws://[::1]:7");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "7");
  u = ParseWsUrl("ws://[::1]");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(ParseWsUrl("wss://e:00443")->port, "443");
}

TEST(WsUrlTest, RefusesWhatIsNotAWebSocketUrl) {
  auto why = [](const char* url) {
    std::string w;
    EXPECT_FALSE(ParseWsUrl(url, &w)) << url;
    return w;
  };
  EXPECT_THAT(why("http://e:1"), HasSubstr("ws:// or wss://"));
  EXPECT_THAT(why("ws://"), HasSubstr("no host"));
  EXPECT_THAT(why("ws://:80"), HasSubstr("no host"));
  EXPECT_THAT(why("ws://e:"), HasSubstr("empty port"));
  EXPECT_THAT(why("ws://e:0"), HasSubstr("range"));
  EXPECT_THAT(why("ws://e:65536"), HasSubstr("range"));
  EXPECT_THAT(why("ws://e:12a"), HasSubstr("not a number"));
  EXPECT_THAT(why("ws://e:123456"), HasSubstr("not a number"));
  EXPECT_THAT(why("ws://user:pw@e:1"), HasSubstr("user information"));
  EXPECT_THAT(why("ws://[::1"), HasSubstr("unclosed"));
  EXPECT_THAT(why("ws://[::1]x"), HasSubstr("after the ]"));
  EXPECT_THAT(why("ws://e\r\nHost: x:1"), HasSubstr("characters"));
  EXPECT_THAT(why("ws://e%20x:1"), HasSubstr("characters"));
}

TEST(WsUrlTest, LoopbackHosts) {
  for (const char* h : {"localhost", "127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  for (const char* h : {"10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "localhost.example", "engine", ""})
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
}

}  // namespace
}  // namespace skiff
