// NormalizeArchivePath: an archive member's path below the archive's root.
#include <gtest/gtest.h>

#include <string>

#include "images/archive_path.h"

namespace skiff::images {
namespace {

std::string Ok(const std::string& path) {
  bool ok = false;
  std::string s = NormalizeArchivePath(path, &ok);
  EXPECT_TRUE(ok) << path;
  return s;
}

bool Escapes(const std::string& path) {
  bool ok = true;
  std::string s = NormalizeArchivePath(path, &ok);
  EXPECT_EQ(s, "") << path;
  return !ok;
}

TEST(ImagesArchivePathTest, PlainPathsAreKept) {
  EXPECT_EQ(Ok("manifest.json"), "manifest.json");
  EXPECT_EQ(Ok("blobs/sha256/ab"), "blobs/sha256/ab");
}

TEST(ImagesArchivePathTest, AbsolutePathsBecomeRelative) {
  EXPECT_EQ(Ok("/etc/passwd"), "etc/passwd");
  EXPECT_EQ(Ok("///a"), "a");
  EXPECT_EQ(Ok("/"), "");
}

TEST(ImagesArchivePathTest, EmptyAndDotComponentsAreDropped) {
  EXPECT_EQ(Ok(""), "");
  EXPECT_EQ(Ok("."), "");
  EXPECT_EQ(Ok("./"), "");
  EXPECT_EQ(Ok("./a//b/./c/"), "a/b/c");
  // Only "." itself is special: dotted names are names.
  EXPECT_EQ(Ok(".a/..b/.../b."), ".a/..b/.../b.");
}

TEST(ImagesArchivePathTest, DotDotRemovesTheComponentBefore) {
  EXPECT_EQ(Ok("a/b/../c"), "a/c");
  EXPECT_EQ(Ok("a/.."), "");
  EXPECT_EQ(Ok("a/b/../../c"), "c");
  EXPECT_EQ(Ok("/a/../b"), "b");
}

TEST(ImagesArchivePathTest, DotDotAboveTheRootEscapes) {
  EXPECT_TRUE(Escapes(".."));
  EXPECT_TRUE(Escapes("../a"));
  EXPECT_TRUE(Escapes("/../a"));
  EXPECT_TRUE(Escapes("a/../.."));
  EXPECT_TRUE(Escapes("a/../../b"));
  EXPECT_TRUE(Escapes("./a/b/../../../etc/passwd"));
  // Once out, a later component does not bring it back.
  EXPECT_TRUE(Escapes("../a/b/c/d"));
}

TEST(ImagesArchivePathTest, NulIsAnOrdinaryByte) {
  // Members' names come from C strings, so a NUL never reaches here from
  // an archive; given one, it is part of its component, not a terminator.
  EXPECT_EQ(Ok(std::string("a\0b/c", 5)), std::string("a\0b/c", 5));
  EXPECT_EQ(Ok(std::string("/\0/..", 5)), "");
  EXPECT_TRUE(Escapes(std::string("\0/../..", 7)));
}

TEST(ImagesArchivePathTest, NoLengthLimit) {
  // Bounding names is the archive reader's business: an overlong name or
  // component is resolved like any other.
  const std::string long_name(70000, 'x');
  EXPECT_EQ(Ok("/" + long_name + "/./y"), long_name + "/y");
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "d/";
  std::string up;
  for (int i = 0; i < 10000; ++i) up += "../";
  EXPECT_EQ(Ok(deep + up + "z"), "z");
  EXPECT_TRUE(Escapes(deep + up + "../z"));
}

}  // namespace
}  // namespace skiff::images
