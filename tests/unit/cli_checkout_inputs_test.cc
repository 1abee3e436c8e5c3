// The ./skiff wrapper's fast path in the binary: the manifest it computes is
// what `stat -c '%n %s %.9Y %i %.9Z'` prints (the bootstrap writes it with
// that command), and every kind of change misses it.
#include "cli/checkout_inputs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace skiff::cli {
namespace {

using testing_support::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// What the bootstrap writes: stat's text, without the last newline.
std::string StatManifest(const std::vector<std::string>& paths) {
  std::string cmd = "stat -c '%n %s %.9Y %i %.9Z' --";
  for (const auto& p : paths) cmd += " '" + p + "'";
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(f), 0);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class CheckoutInputsTest : public ::testing::Test {
 protected:
  CheckoutInputsTest() : dir_("inputs") {
    ::mkdir((dir_ / "src").c_str(), 0755);
    ::mkdir((dir_ / "build").c_str(), 0755);
    Write(dir_ / "src/a.cc", "int a;\n");
    Write(dir_ / "src/b.h", "");
    paths_ = {dir_ / "src/a.cc", dir_ / "src/b.h", dir_ / "src"};
  }

  // The bootstrap's end: the list and the manifest of it as stat prints it.
  void WriteManifest() {
    std::string list;
    for (const auto& p : paths_) list += p + "\n";
    Write(dir_ / "build/.inputs.list", list);
    Write(dir_ / "build/.inputs", StatManifest(paths_));
  }

  TempDir dir_;
  std::vector<std::string> paths_;
};

TEST_F(CheckoutInputsTest, TheManifestIsWhatStatPrints) {
  // A directory, an empty file, a name with a space and a symlink (not followed).
  Write(dir_ / "src/with space.txt", "x");
  ASSERT_EQ(::symlink("a.cc", (dir_ / "src/link").c_str()), 0);
  paths_.push_back(dir_ / "src/with space.txt");
  paths_.push_back(dir_ / "src/link");
  auto mine = InputsManifest(paths_);
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(*mine, StatManifest(paths_));
}

TEST_F(CheckoutInputsTest, AMissingPathHasNoManifest) {
  EXPECT_FALSE(InputsManifest({dir_ / "src/none"}).has_value());
}

TEST_F(CheckoutInputsTest, NothingChangedIsCurrent) {
  WriteManifest();
  EXPECT_TRUE(InputsCurrent(dir_ / "build"));
  EXPECT_TRUE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, AnEditInPlaceIsNotCurrent) {
  WriteManifest();
  std::ofstream(dir_ / "src/a.cc", std::ios::app) << "int b;\n";
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, AnMtimeSetBackwardsIsNotCurrent) {
  WriteManifest();
  // Same size; the mtime goes back to 2001, as `cp -p` or a tar extract sets it.
  struct timespec times[2] = {{978307200, 0}, {978307200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ / "src/b.h").c_str(), times, 0), 0);
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, OnlyTheCtimeMovingIsNotCurrent) {
  WriteManifest();
  struct stat before {};
  ASSERT_EQ(::stat((dir_ / "src/a.cc").c_str(), &before), 0);
  // Put size and mtime back exactly; only the ctime (no call can set it)
  // moves. The kernel may stamp it from a clock that ticks every few ms:
  // try again until it has moved.
  const std::string a = dir_ / "src/a.cc";
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  struct stat after {};
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(::chmod(a.c_str(), 0600), 0);
    ASSERT_EQ(::chmod(a.c_str(), before.st_mode & 07777), 0);
    ASSERT_EQ(::utimensat(AT_FDCWD, a.c_str(), times, 0), 0);
    ASSERT_EQ(::stat(a.c_str(), &after), 0);
    if (after.st_ctim.tv_sec != before.st_ctim.tv_sec || after.st_ctim.tv_nsec != before.st_ctim.tv_nsec)
      break;
    ::usleep(10'000);
  }
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mode, before.st_mode);
  ASSERT_FALSE(after.st_ctim.tv_sec == before.st_ctim.tv_sec &&
               after.st_ctim.tv_nsec == before.st_ctim.tv_nsec);
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, ANewFileInATrackedDirectoryIsNotCurrent) {
  WriteManifest();
  Write(dir_ / "src/c.cc", "");
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, ARewriteByRenameIsNotCurrent) {
  WriteManifest();
  std::string tmp = dir_ / "a.cc.new";
  ASSERT_EQ(std::system(("cp -p '" + dir_ / "src/a.cc" + "' '" + tmp + "'").c_str()), 0);
  ASSERT_EQ(std::rename(tmp.c_str(), (dir_ / "src/a.cc").c_str()), 0);
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, AMissingOrEmptyManifestIsNotCurrent) {
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
  WriteManifest();
  ::unlink((dir_ / "build/.inputs").c_str());
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
  Write(dir_ / "build/.inputs", "");
  Write(dir_ / "build/.inputs.list", "");
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, ADeletedInputIsNotCurrent) {
  WriteManifest();
  ::unlink((dir_ / "src/b.h").c_str());
  EXPECT_FALSE(InputsCurrent(dir_ / "build"));
}

TEST_F(CheckoutInputsTest, ACurrentBuildGoesOnAndTheWrapperVariablesAreGone) {
  WriteManifest();
  ::setenv("SKIFF_WRAPPER_BUILD_DIR", (dir_ / "build").c_str(), 1);
  ::setenv("SKIFF_WRAPPER", "/nonexistent/skiff", 1);
  ::setenv("SKIFF_WRAPPER_STALE", "1", 1);
  char arg0[] = "skiff";
  char* argv[] = {arg0, nullptr};
  ReturnToWrapperIfStale(argv);  // returns: current
  EXPECT_EQ(std::getenv("SKIFF_WRAPPER_BUILD_DIR"), nullptr);
  EXPECT_EQ(std::getenv("SKIFF_WRAPPER"), nullptr);
  EXPECT_EQ(std::getenv("SKIFF_WRAPPER_STALE"), nullptr);
  EXPECT_STREQ(argv[0], "skiff");
}

TEST_F(CheckoutInputsTest, AStaleBuildWhoseWrapperCannotRunExits125) {
  WriteManifest();
  Write(dir_ / "src/c.cc", "");
  std::string build = dir_ / "build";
  auto run_stale = [&build] {
    ::setenv("SKIFF_WRAPPER_BUILD_DIR", build.c_str(), 1);
    ::setenv("SKIFF_WRAPPER", "/nonexistent/skiff", 1);
    char arg0[] = "skiff";
    char* argv[] = {arg0, nullptr};
    ReturnToWrapperIfStale(argv);
    std::exit(0);
  };
  EXPECT_EXIT(run_stale(), ::testing::ExitedWithCode(125),
              "out of date.*/nonexistent/skiff could not be run");
}

}  // namespace
}  // namespace skiff::cli
