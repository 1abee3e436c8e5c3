// The engine link's options (docs/multihost.md#tls): every mistake in the
// URL, the CA file or the credential file is found at start and named.
#include "api/engine_link_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/temp_dir.h"

namespace skiff::api {
namespace {

using ::testing::HasSubstr;

class EngineLinkOptionsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string ErrorOf(const std::string& url, std::optional<std::string> ca,
                      std::optional<std::string> token) {
    auto r = LoadEngineLinkOptions(url, ca, token);
    EXPECT_FALSE(r.ok()) << url;
    return r.ok() ? "" : r.error().message();
  }

  testing_support::TempDir dir_{"link"};
};

TEST_F(EngineLinkOptionsTest, LoopbackWsNeedsNoTls) {
  auto r = LoadEngineLinkOptions("ws://127.0.0.1:49135", std::nullopt, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->parsed.tls);
  EXPECT_EQ(r->tls, nullptr);
  EXPECT_EQ(r->token, "");
}

TEST_F(EngineLinkOptionsTest, WssGetsAVerifyingContext) {
  auto r = LoadEngineLinkOptions("wss://engine.example", std::nullopt, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->parsed.tls);
  ASSERT_NE(r->tls, nullptr);
}

TEST_F(EngineLinkOptionsTest, PlainWsAcrossANetworkIsRefused) {
  EXPECT_THAT(ErrorOf("ws://10.1.2.3:49135", std::nullopt, std::nullopt), HasSubstr("use wss://"));
  EXPECT_THAT(ErrorOf("http://127.0.0.1:1", std::nullopt, std::nullopt), HasSubstr("engine_url"));
  EXPECT_THAT(ErrorOf("ws://127.0.0.1:1", dir_ / "ca.pem", std::nullopt), HasSubstr("engine_ca_file"));
}

TEST_F(EngineLinkOptionsTest, BadCaFilesAreNamed) {
  EXPECT_THAT(ErrorOf("wss://e", dir_ / "missing.pem", std::nullopt), HasSubstr("missing.pem"));
  std::string junk = Write("junk.pem", "not a certificate\n", 0644);
  EXPECT_THAT(ErrorOf("wss://e", junk, std::nullopt), HasSubstr("engine_ca_file"));
}

TEST_F(EngineLinkOptionsTest, TheCredentialIsReadOnceAndGuarded) {
  std::string good = Write("token", "s3cret-Token_1\n", 0600);
  auto r = LoadEngineLinkOptions("ws://localhost:1", std::nullopt, good);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->token, "s3cret-Token_1");

  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("open", "t\n", 0644)), HasSubstr("chmod 600"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("group", "t\n", 0640)), HasSubstr("chmod 600"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("empty", "\n", 0600)), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("space", "a b\n", 0600)),
              HasSubstr("one line"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("crlf", "a\r\nHost: x\n", 0600)),
              HasSubstr("one line"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, Write("big", std::string(5000, 'a'), 0600)),
              HasSubstr("4096"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, dir_.path()), HasSubstr("not a regular file"));
  EXPECT_THAT(ErrorOf("ws://localhost:1", std::nullopt, dir_ / "nope"), HasSubstr("cannot read"));
}

}  // namespace
}  // namespace skiff::api
