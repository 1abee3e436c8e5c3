// File metadata as user.e2b.* (or trusted.e2b.*) extended attributes
// (agent/file_xattrs.h) on real files of this machine: written through an
// atomic write, read back by fs.stat and fs.ls, and attributes set by other
// means filtered to what the protocol allows. Where the test directory's
// filesystem keeps neither kind for this process, the write must be S216
// saying so (and the reading tests are skipped, saying why).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>

#include <unistd.h>
#include <filesystem>
#include <vector>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/atomic_write.h"
#include "agent/file_xattrs.h"
#include "agent/fs_ops.h"
#include "protocol/fs_messages.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

class AgentFileXattrs : public ::testing::Test {
 protected:
  // Runs in the first of these directories whose filesystem keeps user
  // attributes (tmpfs before Linux 6.6 does not; ext4 and xfs do), so the
  // tests run in full wherever one exists; else in the first, where only
  // the refusal can be checked.
  void SetUp() override {
    std::vector<std::string> parents;
    if (const char* t = std::getenv("TMPDIR"); t && *t) parents.push_back(t);
    parents.insert(parents.end(), {"/tmp", "/var/tmp", SKIFF_BINARY_DIR});
    for (const auto& parent : parents) {
      std::string tmpl = parent + "/skiff-xattr-XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) continue;
      bool keeps = Keeps(tmpl, "user.probe");
      if (dir_.empty() || keeps) {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
        dir_ = tmpl;
        supported_ = keeps;
      } else {
        std::filesystem::remove_all(tmpl);
      }
      if (supported_) break;
    }
    ASSERT_FALSE(dir_.empty()) << "no writable temporary directory";
  }
  // Whether `dir` keeps the attribute `name` set by this process.
  static bool Keeps(const std::string& dir, const char* name) {
    std::string probe = dir + "/probe";
    int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool keeps = ::fsetxattr(fd, name, "1", 1, 0) == 0;
    ::close(fd);
    ::unlink(probe.c_str());
    return keeps;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (ec) ADD_FAILURE() << "could not remove " << dir_ << ": " << ec.message();
  }
  Status Write(const std::string& path, const std::string& data, proto::FileMetadata m) {
    auto w = AtomicWrite::Begin(path, 0644, false);
    if (!w.ok()) return w.error();
    w->SetMetadata(std::move(m));
    SKIFF_RETURN_IF_ERROR(w->Append(data));
    return w->Commit();
  }
  proto::FsEntry Stat(const std::string& path) {
    auto r = FsStat(proto::FsStatRequest{path}.ToJson());
    EXPECT_TRUE(r.ok());
    auto e = proto::FsEntry::FromJson(*r);
    EXPECT_TRUE(e.ok()) << r->dump();
    return *e;
  }

  std::string dir_;
  bool supported_ = false;
};

TEST_F(AgentFileXattrs, AWriteSetsThemAndAWriteWithoutThemClearsThem) {
  std::string f = dir_ + "/f.txt";
  Status st = Write(f, "one", {{"owner", "alice"}, {"tag", ""}});
  if (!supported_ && !Keeps(dir_, "trusted.probe")) {
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code(), Code::kS216) << st.error().ToString();
    EXPECT_NE(st.error().message().find("file metadata not supported"), std::string::npos);
    EXPECT_NE(::access(f.c_str(), F_OK), 0) << "a refused write leaves no file";
    GTEST_SKIP() << "no temporary directory here keeps user xattrs; checked the refusal only";
  }
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  char v[16];
  ASSERT_EQ(::getxattr(f.c_str(), "user.e2b.owner", v, sizeof v), 5);
  EXPECT_EQ(std::string(v, 5), "alice");
  EXPECT_EQ(Stat(f).metadata, (proto::FileMetadata{{"owner", "alice"}, {"tag", ""}}));

  ASSERT_TRUE(Write(f, "two", {}).ok());
  EXPECT_TRUE(Stat(f).metadata.empty()) << "the new file replaced the old with its attributes";
  ASSERT_TRUE(Write(f, "three", {{"k", "v"}}).ok());
  EXPECT_EQ(Stat(f).metadata, (proto::FileMetadata{{"k", "v"}}));
}

TEST_F(AgentFileXattrs, AttributesSetInsideTheSandboxAreReadBackWithinTheRules) {
  if (!supported_) GTEST_SKIP() << "no temporary directory here keeps user xattrs";
  std::string f = dir_ + "/g";
  ASSERT_TRUE(Write(f, "x", {}).ok());
  auto set = [&](const std::string& name, const std::string& value) {
    ASSERT_EQ(::setxattr(f.c_str(), name.c_str(), value.data(), value.size(), 0), 0) << name;
  };
  set("user.e2b.Mixed-Case", "shown as set");
  set("user.e2b.bad key", "a key that is no token: left out");
  set("user.e2b.ctl", "a value with a\nnewline: left out");
  set("user.e2b.long", std::string(proto::FileMetadataLimits::kMaxValueBytes + 1, 'v'));
  set("user.other", "not metadata");
  EXPECT_EQ(Stat(f).metadata, (proto::FileMetadata{{"Mixed-Case", "shown as set"}}));

  // fs.ls reads them too, for files and directories; symlinks have none.
  ASSERT_EQ(::mkdir((dir_ + "/d").c_str(), 0755), 0);
  ASSERT_EQ(::setxattr((dir_ + "/d").c_str(), "user.e2b.k", "dir", 3, 0), 0);
  ASSERT_EQ(::symlink("g", (dir_ + "/l").c_str()), 0);
  auto ls = FsLs(proto::FsLsRequest{dir_}.ToJson());
  ASSERT_TRUE(ls.ok());
  auto list = proto::FsLsResult::FromJson(*ls);
  ASSERT_TRUE(list.ok()) << ls->dump();
  ASSERT_EQ(list->entries.size(), 3u);
  EXPECT_EQ(list->entries[0].name, "d");
  EXPECT_EQ(list->entries[0].metadata, (proto::FileMetadata{{"k", "dir"}}));
  EXPECT_EQ(list->entries[1].metadata, (proto::FileMetadata{{"Mixed-Case", "shown as set"}}));
  EXPECT_TRUE(list->entries[2].metadata.empty());
}

// Where user attributes are not kept (a microVM guest's tmpfs), the agent
// keeps the pairs as trusted.e2b.*: read back the same, within the same
// rules, and a key under both prefixes shows its user value.
TEST_F(AgentFileXattrs, TrustedAttributesAreReadBackToo) {
  std::string f = dir_ + "/t";
  ASSERT_TRUE(Write(f, "x", {}).ok());
  auto set = [&](const std::string& name, const std::string& value) {
    return ::setxattr(f.c_str(), name.c_str(), value.data(), value.size(), 0) == 0;
  };
  if (!set("trusted.e2b.owner", "root")) {
    // Only a process with CAP_SYS_ADMIN may set trusted attributes: the
    // suite runs as root (scripts/test); an unprivileged run cannot.
    ASSERT_EQ(errno, EPERM) << "setting a trusted attribute: " << std::strerror(errno);
    GTEST_SKIP() << "trusted xattrs need CAP_SYS_ADMIN, which this process lacks (run as root)";
  }
  ASSERT_TRUE(set("trusted.e2b.bad key", "left out"));
  ASSERT_TRUE(set("trusted.other", "not metadata"));
  EXPECT_EQ(Stat(f).metadata, (proto::FileMetadata{{"owner", "root"}}));
  // Where user attributes are kept too, a key under both shows its user value.
  if (supported_) {
    ASSERT_TRUE(set("user.e2b.owner", "user value"));
    ASSERT_TRUE(set("user.e2b.more", "1"));
    EXPECT_EQ(Stat(f).metadata, (proto::FileMetadata{{"more", "1"}, {"owner", "user value"}}));
  }
}

TEST_F(AgentFileXattrs, ManyAttributesAreCappedAtTheProtocolsLimits) {
  if (!supported_) GTEST_SKIP() << "no temporary directory here keeps user xattrs";
  std::string f = dir_ + "/many";
  ASSERT_TRUE(Write(f, "x", {}).ok());
  using L = proto::FileMetadataLimits;
  for (size_t i = 0; i < L::kMaxEntries * 2; ++i) {
    std::string name = "user.e2b.k" + std::to_string(i);
    std::string value(200, 'v');
    if (::setxattr(f.c_str(), name.c_str(), value.data(), value.size(), 0) != 0) break;  // fs full
  }
  proto::FileMetadata m = ReadMetadata(f);
  EXPECT_FALSE(m.empty());
  EXPECT_TRUE(proto::CheckMetadata(m).ok()) << "what the agent answers, the host accepts";
}

TEST_F(AgentFileXattrs, AHostileWriteRequestIsRefusedBeforeAnyFileIsMade) {
  auto st = WriteMetadata(-1, {{"bad key", "v"}}, "/nowhere");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kS210);
}

}  // namespace
}  // namespace skiff::agent
