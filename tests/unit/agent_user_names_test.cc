// The agent's own passwd/group parser (agent/user_names.h): malformed lines
// skipped, first entry wins, numeric fallback, bounded and FIFO-safe reads,
// one read per UserNames.
#include "agent/user_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace skiff::agent {
namespace {

TEST(AgentUserNames, ParsesNameAndThirdField) {
  auto m = ParseIdNames(
      "root:x:0:0:root:/root:/bin/sh\n"
      "user:x:1000:1000::/home/user:/bin/bash\n"
      "wheel:x:10:root,user\n"  // a group line: same layout up to the id
      "nolf:x:42:");
  EXPECT_EQ(m.size(), 4u);
  EXPECT_EQ(m.at(0), "root");
  EXPECT_EQ(m.at(1000), "user");
  EXPECT_EQ(m.at(10), "wheel");
  EXPECT_EQ(m.at(42), "nolf");
}

TEST(AgentUserNames, SkipsMalformedLines) {
  auto m = ParseIdNames(
      "\n"
      "# comment:x:1:\n"
      "short:x\n"
      "noid:x::\n"
      ":x:2:\n"              // empty name
      "neg:x:-3:\n"          // not decimal
      "hex:x:0x10:\n"        // not decimal
      "big:x:4294967296:\n"  // above 32 bits
      "long:x:99999999999999:\n"
      "ctl\x01name:x:5:\n"  // control character
      "+::::::\n"           // NIS compat entry
      "max:x:4294967295:\n"
      "ok:x:7\n");  // only three fields is enough
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at(4294967295u), "max");
  EXPECT_EQ(m.at(7), "ok");
  std::string huge(257, 'n');
  EXPECT_TRUE(ParseIdNames(huge + ":x:9:\n").empty());
  EXPECT_EQ(ParseIdNames(std::string(256, 'n') + ":x:9:\n").at(9), std::string(256, 'n'));
}

TEST(AgentUserNames, FirstEntryForAnIdWins) {
  auto m = ParseIdNames("first:x:5:\nsecond:x:5:\nthird:x:5:\n");
  EXPECT_EQ(m.at(5), "first");
}

class AgentUserNamesFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/user_names_" + std::to_string(::getpid());
    ::mkdir(dir_.c_str(), 0700);
  }
  void TearDown() override {
    for (const char* f : {"/passwd", "/group", "/fifo"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }
  void Put(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  std::string dir_;
};

TEST_F(AgentUserNamesFiles, NamesOrDecimalFallback) {
  Put("passwd", "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
  Put("group", "root:x:0:\nstaff:x:50:user\n");
  UserNames names(dir_ + "/passwd", dir_ + "/group");
  EXPECT_EQ(names.Owner(0), "root");
  EXPECT_EQ(names.Owner(1000), "user");
  EXPECT_EQ(names.Owner(1234), "1234");
  EXPECT_EQ(names.Group(50), "staff");
  EXPECT_EQ(names.Group(1000), "1000");  // the user's id is not a group's
}

TEST_F(AgentUserNamesFiles, ReadsEachFileOncePerInstance) {
  Put("passwd", "a:x:1:\n");
  UserNames names(dir_ + "/passwd", dir_ + "/group");
  EXPECT_EQ(names.Owner(1), "a");
  Put("passwd", "b:x:1:\n");
  EXPECT_EQ(names.Owner(1), "a") << "cached for the request";
  EXPECT_EQ(UserNames(dir_ + "/passwd", dir_ + "/group").Owner(1), "b");
}

TEST_F(AgentUserNamesFiles, MissingFifoAndHugeFilesAreBounded) {
  UserNames missing(dir_ + "/none", dir_ + "/none");
  EXPECT_EQ(missing.Owner(0), "0");
  EXPECT_EQ(missing.Group(0), "0");
  // A FIFO planted as /etc/passwd must not block the agent.
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadIdFile((dir_ + "/fifo").c_str()), "");
  EXPECT_EQ(UserNames(dir_ + "/fifo", dir_ + "/fifo").Owner(0), "0");
  // Read up to 1 MiB: a name past it is not seen.
  Put("passwd", std::string(kMaxIdFileBytes, '\n') + "late:x:3:\n");
  EXPECT_EQ(ReadIdFile((dir_ + "/passwd").c_str()).size(), kMaxIdFileBytes);
  EXPECT_EQ(UserNames(dir_ + "/passwd", dir_ + "/group").Owner(3), "3");
}

}  // namespace
}  // namespace skiff::agent
