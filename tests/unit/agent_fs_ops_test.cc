// The agent's filesystem op table and request field checks, without a
// sandbox: which names dispatch to which operation, and the typed errors of
// malformed fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

TEST(AgentFsOps, ErrnoMapsToTypedErrors) {
  EXPECT_EQ(FsError(ENOENT, "/x").code(), Code::kS211);
  Error io = FsError(EIO, "/x");
  EXPECT_EQ(io.code(), Code::kS216);
  EXPECT_NE(io.message().find("/x"), std::string::npos);
}

}  // namespace
}  // namespace skiff::agent
