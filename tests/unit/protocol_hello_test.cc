// The host's HELLO frames decode to what the agent expects.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/frame.h"
#include "protocol/hello.h"

namespace skiff::proto {
namespace {

Frame DecodeOne(const std::string& bytes) {
  Decoder dec;
  dec.Feed(bytes);
  auto f = dec.Next();
  EXPECT_TRUE(f.ok());
  EXPECT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(dec.buffered(), 0u);
  return f.ok() && f->has_value() ? **f : Frame{};
}

TEST(Hello, HostHelloIsProtoVersionOnStreamZero) {
  Frame f = DecodeOne(EncodeHostHello());
  EXPECT_EQ(f.type, Type::kHello);
  EXPECT_EQ(f.stream, 0u);
  EXPECT_EQ(f.flags, 0);
  EXPECT_EQ(nlohmann::json::parse(f.payload), (nlohmann::json{{"proto", kVersion}}));
}

TEST(Hello, ResumeHelloCarriesTheResumeObject) {
  Resume resume{"00ff", 123, "h"};
  Frame f = DecodeOne(EncodeResumeHello(resume));
  EXPECT_EQ(f.type, Type::kHello);
  EXPECT_EQ(f.stream, 0u);
  auto j = nlohmann::json::parse(f.payload);
  EXPECT_EQ(j["proto"], kVersion);
  EXPECT_EQ(j["resume"], (nlohmann::json{{"seed", "00ff"}, {"realtime_ns", 123}, {"hostname", "h"}}));
  EXPECT_EQ(j.size(), 2u);
  auto back = Resume::FromJson(j["resume"]);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->seed_hex, "00ff");
  EXPECT_EQ(back->realtime_ns, 123);
  EXPECT_EQ(back->hostname, "h");
}

TEST(Hello, AgentHelloIsTheWireObject) {
  AgentHello h{kVersion, "skiff-agent/1.2.3", {"info", "exec"}, false};
  Frame f = DecodeOne(EncodeAgentHello(h));
  EXPECT_EQ(f.type, Type::kHello);
  EXPECT_EQ(f.stream, 0u);
  EXPECT_EQ(f.payload, R"({"agent":"skiff-agent/1.2.3","ops":["info","exec"],"proto":1})");
  h.restored = true;
  EXPECT_EQ(h.ToJson().dump(),
            R"({"agent":"skiff-agent/1.2.3","ops":["info","exec"],"proto":1,"restored":true})");
  auto back = AgentHello::FromJson(h.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), h.ToJson());
}

TEST(Hello, MalformedHellosAreRefused) {
  using nlohmann::json;
  for (const json& bad :
       {json::array(), json{{"proto", -1}, {"agent", "a"}, {"ops", json::array()}},
        json{{"proto", "1"}, {"agent", "a"}, {"ops", json::array()}}, json{{"proto", 1}, {"agent", 7}},
        json{{"agent", "a"}, {"ops", json::array()}}, json{{"proto", 1}, {"agent", "a"}, {"ops", "info"}},
        json{{"proto", 1}, {"agent", "a"}, {"ops", {1}}}}) {
    auto h = AgentHello::FromJson(bad);
    ASSERT_FALSE(h.ok()) << bad.dump();
    EXPECT_EQ(h.error().code(), skiff::Code::kS300) << bad.dump();
  }
  for (const json& bad :
       {json("x"), json{{"seed", "0"}, {"realtime_ns", 1}}, json{{"seed", "0G"}, {"realtime_ns", 1}},
        json{{"seed", "00"}, {"realtime_ns", 1.5}}, json{{"seed", "00"}},
        json{{"seed", "00"}, {"realtime_ns", 1}, {"hostname", 7}}}) {
    auto r = Resume::FromJson(bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code(), skiff::Code::kS001) << bad.dump();
  }
}

}  // namespace
}  // namespace skiff::proto
