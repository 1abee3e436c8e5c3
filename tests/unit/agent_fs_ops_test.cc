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

TEST(AgentFsOps, RequestFieldsAreTypeChecked) {
  auto missing = ReqPath(json::object(), "path");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kS001);
  auto empty = ReqPath(json{{"path", ""}}, "path");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), Code::kS001);
  auto nul = ReqPath(json{{"path", std::string("a\0b", 3)}}, "path");
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.error().code(), Code::kS001);
  auto ok = ReqPath(json{{"path", "/x"}}, "path");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "/x");

  EXPECT_FALSE(ReqBool(json{{"b", 1}}, "b", false).ok());
  EXPECT_TRUE(*ReqBool(json::object(), "b", true));
  EXPECT_EQ(*ReqInt(json{{"n", UINT64_MAX}}, "n", 0), INT64_MAX);
  EXPECT_FALSE(ReqInt(json{{"n", "3"}}, "n", 0).ok());

  auto bad_mode = ReqMode(json{{"mode", "rwx"}}, "mode", std::nullopt);
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_EQ(bad_mode.error().code(), Code::kS210);
  auto no_mode = ReqMode(json::object(), "mode", std::nullopt);
  ASSERT_FALSE(no_mode.ok());
  EXPECT_EQ(no_mode.error().code(), Code::kS001);
  EXPECT_EQ(*ReqMode(json::object(), "mode", 0755u), 0755u);
}

TEST(AgentFsOps, ErrnoMapsToTypedErrors) {
  EXPECT_EQ(FsError(ENOENT, "/x").code(), Code::kS211);
  Error io = FsError(EIO, "/x");
  EXPECT_EQ(io.code(), Code::kS216);
  EXPECT_NE(io.message().find("/x"), std::string::npos);
}

}  // namespace
}  // namespace skiff::agent
