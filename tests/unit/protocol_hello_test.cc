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
  nlohmann::json resume = {{"seed", "00ff"}, {"realtime_ns", 123}, {"hostname", "h"}};
  Frame f = DecodeOne(EncodeResumeHello(resume));
  EXPECT_EQ(f.type, Type::kHello);
  EXPECT_EQ(f.stream, 0u);
  auto j = nlohmann::json::parse(f.payload);
  EXPECT_EQ(j["proto"], kVersion);
  EXPECT_EQ(j["resume"], resume);
  EXPECT_EQ(j.size(), 2u);
}

}  // namespace
}  // namespace skiff::proto
