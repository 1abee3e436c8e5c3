// Pure helpers of the agent: globs, sed replacement expansion, line
// splitting, UTF-8 cuts, mode strings, path pieces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "agent/spawn.h"
#include "agent/text_util.h"
#include "support/temp_dir.h"

namespace skiff::agent {
namespace {

TEST(AgentGlob, BasenamePatternMatchesAtAnyDepth) {
  EXPECT_TRUE(GlobMatch("*.py", "a.py"));
  EXPECT_TRUE(GlobMatch("*.py", "src/deep/a.py"));
  EXPECT_FALSE(GlobMatch("*.py", "src/a.pyc"));
  EXPECT_FALSE(GlobMatch("*.py", "a.py/readme"));
  EXPECT_TRUE(GlobMatch("a?c", "x/abc"));
  EXPECT_FALSE(GlobMatch("a?c", "x/ac"));
  EXPECT_TRUE(GlobMatch("?", "x/\xC3\xA9"));  // one UTF-8 character
  EXPECT_TRUE(GlobMatch("README", "docs/README"));
  EXPECT_FALSE(GlobMatch("README", "docs/README.md"));
}

TEST(AgentGlob, SlashPatternMatchesWholePath) {
  EXPECT_TRUE(GlobMatch("src/*.py", "src/a.py"));
  EXPECT_FALSE(GlobMatch("src/*.py", "src/x/a.py"));
  EXPECT_FALSE(GlobMatch("src/*.py", "lib/src/a.py"));
  EXPECT_FALSE(GlobMatch("*/a.py", "x/y/a.py"));  // * never crosses '/'
  EXPECT_TRUE(GlobMatch("*/a.py", "x/a.py"));
  EXPECT_FALSE(GlobMatch("src/?.py", "src//.py"));
}

TEST(AgentGlob, DoubleStarSegments) {
  EXPECT_TRUE(GlobMatch("**/x", "x"));
  EXPECT_TRUE(GlobMatch("**/x", "a/b/x"));
  EXPECT_FALSE(GlobMatch("**/x", "a/b/y"));
  EXPECT_TRUE(GlobMatch("a/**/x", "a/x"));
  EXPECT_TRUE(GlobMatch("a/**/x", "a/b/c/x"));
  EXPECT_FALSE(GlobMatch("a/**/x", "b/a/x"));
  EXPECT_TRUE(GlobMatch("a/**", "a/b/c"));
  EXPECT_TRUE(GlobMatch("a/**", "a/b"));
  EXPECT_FALSE(GlobMatch("a/**", "b/c"));
  EXPECT_TRUE(GlobMatch("**", "anything/at/all"));
  EXPECT_TRUE(GlobMatch("**/*.go", "cmd/main.go"));
  EXPECT_TRUE(GlobMatch("src/**/*.go", "src/main.go"));
}

TEST(AgentGlob, BracketsAreLiteral) {
  EXPECT_TRUE(GlobMatch("[ab].txt", "[ab].txt"));
  EXPECT_FALSE(GlobMatch("[ab].txt", "a.txt"));
}

TEST(AgentGlob, Selection) {
  std::vector<std::string> none, inc = {"*.py", "*.md"}, exc = {"test_*"};
  EXPECT_TRUE(GlobSelected(none, none, "x.c"));
  EXPECT_TRUE(GlobSelected(inc, none, "a/x.py"));
  EXPECT_FALSE(GlobSelected(inc, none, "a/x.c"));
  EXPECT_FALSE(GlobSelected(inc, exc, "a/test_x.py"));
  EXPECT_FALSE(GlobSelected(none, exc, "test_y.c"));
}

std::string Expand(std::string_view repl, std::vector<std::string_view> groups,
                   std::map<std::string, int> names = {}) {
  std::string out;
  ExpandReplacement(
      repl, groups,
      [&](std::string_view n) -> std::optional<int> {
        auto it = names.find(std::string(n));
        if (it == names.end()) return std::nullopt;
        return it->second;
      },
      out);
  return out;
}

TEST(AgentSedExpand, GroupsNamesAndDollars) {
  std::vector<std::string_view> g = {"whole", "one", "two"};
  EXPECT_EQ(Expand("<$1>", g), "<one>");
  EXPECT_EQ(Expand("<${2}>", g), "<two>");
  EXPECT_EQ(Expand("$0", g), "whole");
  EXPECT_EQ(Expand("$$1", g), "$1");
  EXPECT_EQ(Expand("a$", g), "a$");
  EXPECT_EQ(Expand("$-x", g), "$-x");
  EXPECT_EQ(Expand("${1", g), "${1");  // unclosed brace is literal
  EXPECT_EQ(Expand("${}", g), "${}");
  EXPECT_EQ(Expand("$9", g), "");   // unknown group
  EXPECT_EQ(Expand("$1x", g), "");  // longest run: group "1x" is unknown
  EXPECT_EQ(Expand("${1}x", g), "onex");
  EXPECT_EQ(Expand("$word_1", g, {{"word_1", 2}}), "two");
  EXPECT_EQ(Expand("${word_1}!", g, {{"word_1", 1}}), "one!");
  EXPECT_EQ(Expand("$nope", g), "");
  EXPECT_EQ(Expand("plain", g), "plain");
}

TEST(AgentLines, SplitKeepsTerminators) {
  auto l = SplitLines("a\r\nb\n\nc");
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].content, "a");
  EXPECT_EQ(l[0].terminator, "\r\n");
  EXPECT_EQ(l[1].content, "b");
  EXPECT_EQ(l[1].terminator, "\n");
  EXPECT_EQ(l[1].offset, 3u);
  EXPECT_EQ(l[2].content, "");
  EXPECT_EQ(l[3].content, "c");
  EXPECT_EQ(l[3].terminator, "");
  EXPECT_TRUE(SplitLines("").empty());
  EXPECT_EQ(SplitLines("x\n").size(), 1u);
}

TEST(AgentLines, CutAtUtf8Boundary) {
  EXPECT_EQ(CutUtf8("hello", 0), "hello");
  EXPECT_EQ(CutUtf8("hello", 5), "hello");
  EXPECT_EQ(CutUtf8("hello", 3), "hel\xE2\x80\xA6");
  // "é" is 2 bytes at offset 2; a cut at 3 would split it.
  EXPECT_EQ(CutUtf8("ab\xC3\xA9z", 3), "ab\xE2\x80\xA6");
  EXPECT_EQ(CutUtf8("ab\xC3\xA9z", 4), "ab\xC3\xA9\xE2\x80\xA6");
}

TEST(AgentText, ModeStrings) {
  EXPECT_EQ(ModeString(0644), "0644");
  EXPECT_EQ(ModeString(S_IFDIR | 01777), "1777");
  EXPECT_EQ(ModeString(04755), "4755");
  EXPECT_EQ(ModeString(0), "0000");
}

TEST(AgentText, PathPieces) {
  EXPECT_EQ(ParentOf("/a/b"), "/a");
  EXPECT_EQ(ParentOf("/a"), "/");
  EXPECT_EQ(ParentOf("/a/b/"), "/a");
  EXPECT_EQ(ParentOf("a"), ".");
  EXPECT_EQ(ParentOf("a//b"), "a");
  EXPECT_EQ(LeafOf("/a/b/"), "b");
  EXPECT_EQ(LeafOf("/"), "");
  EXPECT_EQ(EntryName("/"), "/");
  EXPECT_EQ(EntryName("/x/y"), "y");
  EXPECT_EQ(JoinPath("/p", "a/b"), "/p/a/b");
  EXPECT_EQ(JoinPath("/p/", "a"), "/p/a");
  EXPECT_EQ(JoinPath("/p", ""), "/p");
}

// A link's absolute target, as E2B's symlinkTarget: relative text joined
// with the link's directory, normalised lexically, nothing followed.
TEST(AgentText, LinkTargetPath) {
  EXPECT_EQ(LinkTargetPath("/d", "/etc/hosts"), "/etc/hosts");
  EXPECT_EQ(LinkTargetPath("/d", "sub"), "/d/sub");
  EXPECT_EQ(LinkTargetPath("/d/e", "../f/./g/"), "/d/f/g");
  EXPECT_EQ(LinkTargetPath("/d", "../../../x"), "/x");
  EXPECT_EQ(LinkTargetPath("/", "a//b"), "/a/b");
  EXPECT_EQ(LinkTargetPath("/d", ".."), "/");
  EXPECT_EQ(LinkTargetPath("/d", "/a/../b/.."), "/");
  EXPECT_EQ(LinkTargetPath("/d/", "x"), "/d/x");
  EXPECT_EQ(LinkTargetPath("/d", "..."), "/d/...");
}

// An image's User, resolved against its own /etc/passwd and /etc/group.
TEST(AgentUser, ResolvesNamesIdsAndGroups) {
  testing_support::TempDir tmp("user-test");
  const std::string& etc = tmp.path();
  std::ofstream(etc + "/passwd") << "root:x:0:0:root:/root:/bin/sh\n# comment\n"
                                    "broken:x:nope:1::/:\napp:x:1234:2345:App:/work:/bin/sh\n";
  std::ofstream(etc + "/group") << "root:x:0:\napp:x:2345:\nextra:x:3000:root,app\n"
                                   "more:x:3001:someone,app\nstaff:x:50:\n";
  auto app = ResolveUser("app", etc);
  ASSERT_TRUE(app.ok()) << app.error().message();
  EXPECT_EQ(app->uid, 1234u);
  EXPECT_EQ(app->gid, 2345u);
  EXPECT_EQ(app->groups, (std::vector<gid_t>{2345, 3000, 3001}));
  auto by_uid = ResolveUser("1234", etc);  // a known uid takes its passwd gid
  ASSERT_TRUE(by_uid.ok());
  EXPECT_EQ(by_uid->gid, 2345u);
  auto unknown_uid = ResolveUser("4321", etc);  // an unknown uid gets gid 0
  ASSERT_TRUE(unknown_uid.ok());
  EXPECT_EQ(unknown_uid->uid, 4321u);
  EXPECT_EQ(unknown_uid->gid, 0u);
  EXPECT_EQ(unknown_uid->groups, (std::vector<gid_t>{0}));
  auto with_group = ResolveUser("app:staff", etc);
  ASSERT_TRUE(with_group.ok());
  EXPECT_EQ(with_group->gid, 50u);
  auto numeric = ResolveUser("7:8", etc);
  ASSERT_TRUE(numeric.ok());
  EXPECT_EQ(numeric->uid, 7u);
  EXPECT_EQ(numeric->gid, 8u);
  // Unknown names fail; malformed values are S001.
  auto nobody = ResolveUser("nobody", etc);
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.error().code(), Code::kS300);
  EXPECT_FALSE(ResolveUser("app:nogroup", etc).ok());
  EXPECT_FALSE(ResolveUser("broken", etc).ok());
  for (const char* bad : {"", ":", "app:", ":1", "1:2:3", "99999999999"}) {
    auto r = ResolveUser(bad, etc);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(ResolveUser("app:", etc).error().code(), Code::kS001);
  // No passwd at all: numeric users still work.
  std::filesystem::remove(etc + "/passwd");
  EXPECT_TRUE(ResolveUser("1000", etc).ok());
  EXPECT_FALSE(ResolveUser("app", etc).ok());
}

}  // namespace
}  // namespace skiff::agent
