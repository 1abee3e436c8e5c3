// The agent's filesystem op table and request field checks, without a
// sandbox: which names dispatch to which operation, and the typed errors of
// malformed fields.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/fs_ops.h"
#include "protocol/ops.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

TEST(AgentFsOps, TableNamesEverySynchronousOp) {
  namespace o = proto::op;
  EXPECT_EQ(FindFsOp(o::kFsLs), &FsLs);
  EXPECT_EQ(FindFsOp(o::kFsStat), &FsStat);
  EXPECT_EQ(FindFsOp(o::kFsMkdir), &FsMkdir);
  EXPECT_EQ(FindFsOp(o::kFsRm), &FsRm);
  EXPECT_EQ(FindFsOp(o::kFsMv), &FsMv);
  EXPECT_EQ(FindFsOp(o::kFsChmod), &FsChmod);
  EXPECT_EQ(FindFsOp(o::kFsGrep), &FsGrep);
  EXPECT_EQ(FindFsOp(o::kFsSed), &FsSed);
  // Streaming and non-fs ops are the loop's own.
  EXPECT_EQ(FindFsOp(o::kFsWrite), nullptr);
  EXPECT_EQ(FindFsOp(o::kFsRead), nullptr);
  EXPECT_EQ(FindFsOp(o::kExec), nullptr);
  EXPECT_EQ(FindFsOp("fs.LS"), nullptr);
  EXPECT_EQ(FindFsOp(""), nullptr);
}

TEST(AgentFsOps, RequestsAreCheckedByTheirProtocolTypes) {
  // The field checks themselves are protocol_messages_test's; here, that
  // each operation refuses a malformed request with the protocol's code
  // before touching the filesystem.
  auto missing = FsLs(json{{"op", "fs.ls"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kS001);
  EXPECT_EQ(missing.error().message(), "invalid request: path: expected a string");
  auto bad_mode = FsMkdir(json{{"op", "fs.mkdir"}, {"path", "/nonexistent/x"}, {"mode", "rwx"}});
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_EQ(bad_mode.error().code(), Code::kS210);
  auto no_mode = FsChmod(json{{"op", "fs.chmod"}, {"path", "/nonexistent"}});
  ASSERT_FALSE(no_mode.ok());
  EXPECT_EQ(no_mode.error().code(), Code::kS001);
  auto sed_form = FsSed(json{{"op", "fs.sed"}, {"pattern", "a"}, {"replacement", "b"}});
  ASSERT_FALSE(sed_form.ok());
  EXPECT_EQ(sed_form.error().code(), Code::kS210);
  auto grep_neg = FsGrep(json{{"op", "fs.grep"}, {"path", "/"}, {"pattern", "a"}, {"max_matches", -1}});
  ASSERT_FALSE(grep_neg.ok());
  EXPECT_EQ(grep_neg.error().code(), Code::kS001);
}

TEST(AgentFsOps, StatAnswersAnFsEntry) {
  auto r = FsStat(json{{"op", "fs.stat"}, {"path", "/"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  auto e = proto::FsEntry::FromJson(*r);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->name, "/");
  EXPECT_TRUE(e->is_dir);
  EXPECT_EQ(e->ToJson(), *r);
}

// A planted sparse file cannot keep the agent busy: grep reads at most
// 1 GiB per call and says it stopped early.
TEST(AgentFsOps, GrepStopsAtItsScanBudget) {
  std::string path = testing::TempDir() + "/grep_sparse_" + std::to_string(::getpid());
  {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::string head(9000, 'a');
    head += "\nneedle\n";
    ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    // The hole reads as NUL bytes: one over-long line, consumed without
    // being buffered, so only the scan budget ends the read.
    ASSERT_EQ(::ftruncate(fd, off_t{4} << 30), 0);  // 4 GiB, sparse
    ::close(fd);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto r = FsGrep(json{{"op", "fs.grep"}, {"path", path}, {"pattern", "needle|zzz"}, {"max_matches", 0}});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::unlink(path.c_str());
  ASSERT_TRUE(r.ok()) << r.error().message();
  auto g = proto::FsGrepResult::FromJson(*r);
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->matches.size(), 1u);
  EXPECT_EQ(g->matches[0].content, "needle");
  EXPECT_TRUE(g->truncated) << "a 4 GiB file was read to its end";
  RecordProperty("seconds", std::to_string(secs));
}

TEST(AgentFsOps, ErrnoMapsToTypedErrors) {
  EXPECT_EQ(FsError(ENOENT, "/x").code(), Code::kS211);
  Error io = FsError(EIO, "/x");
  EXPECT_EQ(io.code(), Code::kS216);
  EXPECT_NE(io.message().find("/x"), std::string::npos);
}

}  // namespace
}  // namespace skiff::agent
