// The agent's fs.watch mechanics (agent/dir_watch.h) on a real directory
// of this machine: inotify events read into FsWatchEvent lines, names
// relative to the watched directory, new subdirectories followed by a
// recursive watch only, the end of a watch whose directory goes away, and
// the refusals of what cannot be watched.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "agent/dir_watch.h"
#include "protocol/fs_watch_messages.h"
#include "support/temp_dir.h"

namespace skiff::agent {
namespace {

namespace fs = std::filesystem;

class DirWatchTest : public ::testing::Test {
 protected:
  static void Touch(const fs::path& p, const std::string& text = "x") { std::ofstream(p) << text; }

  // Every event the watch reports within `ms` of quiet, as "type name".
  static std::vector<std::string> Drain(DirWatch& w, bool* ended = nullptr, int ms = 200) {
    std::vector<std::string> out;
    std::string lines;
    for (;;) {
      pollfd p{w.fd(), POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) break;
      auto more = w.Read(lines);
      EXPECT_TRUE(more.ok()) << more.error().ToString();
      if (!more.ok()) break;
      if (!*more) {
        if (ended) *ended = true;
        break;
      }
    }
    std::istringstream in(lines);
    for (std::string l; std::getline(in, l);) {
      auto e = proto::FsWatchEvent::FromJson(nlohmann::json::parse(l));
      EXPECT_TRUE(e.ok()) << l;
      if (e.ok()) out.push_back(std::string(proto::FsWatchChangeName(e->change)) + " " + e->name);
    }
    return out;
  }

  static bool Has(const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v)
      if (x == s) return true;
    return false;
  }

  testing_support::TempDir tmp_{"dirwatch"};
  fs::path dir_ = tmp_.path();
};

TEST_F(DirWatchTest, ReportsCreateWriteChmodRenameAndRemoveByName) {
  auto w = DirWatch::Begin(dir_.string(), false);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  Touch(dir_ / "a.txt");
  ::chmod((dir_ / "a.txt").c_str(), 0600);
  fs::rename(dir_ / "a.txt", dir_ / "b.txt");
  fs::remove(dir_ / "b.txt");
  auto ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "create a.txt"));
  EXPECT_TRUE(Has(ev, "write a.txt"));
  EXPECT_TRUE(Has(ev, "chmod a.txt"));
  EXPECT_TRUE(Has(ev, "rename a.txt"));
  EXPECT_TRUE(Has(ev, "create b.txt"));  // the new name arrives as a create
  EXPECT_TRUE(Has(ev, "remove b.txt"));
}

TEST_F(DirWatchTest, ANonRecursiveWatchSeesASubdirectoryButNotInsideIt) {
  fs::create_directory(dir_ / "old");
  auto w = DirWatch::Begin(dir_.string(), false);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ((*w)->watched_dirs(), 1u);
  fs::create_directory(dir_ / "sub");
  Touch(dir_ / "sub" / "f");
  Touch(dir_ / "old" / "g");
  auto ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "create sub"));
  EXPECT_FALSE(Has(ev, "create sub/f"));
  EXPECT_FALSE(Has(ev, "create old/g"));
}

TEST_F(DirWatchTest, ARecursiveWatchFollowsExistingAndNewSubdirectories) {
  fs::create_directories(dir_ / "old" / "deep");
  auto w = DirWatch::Begin(dir_.string(), true);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ((*w)->watched_dirs(), 3u);
  Touch(dir_ / "old" / "deep" / "a");
  fs::create_directory(dir_ / "new");
  auto first = Drain(**w);  // the watch of "new" is set when its create is read
  Touch(dir_ / "new" / "b");
  auto second = Drain(**w);
  EXPECT_TRUE(Has(first, "create old/deep/a"));
  EXPECT_TRUE(Has(first, "create new"));
  EXPECT_TRUE(Has(second, "create new/b"));
  EXPECT_EQ((*w)->watched_dirs(), 4u);
}

TEST_F(DirWatchTest, ADirectoryMovedOutIsLetGoAndOneMovedInIsFollowed) {
  fs::create_directories(dir_ / "in" / "x");
  fs::path outside = dir_.string() + "-outside";
  fs::create_directories(outside / "y");
  auto w = DirWatch::Begin((dir_ / "in").string(), true);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ((*w)->watched_dirs(), 2u);
  fs::rename(dir_ / "in" / "x", outside / "x");
  fs::rename(outside / "y", dir_ / "in" / "y");
  auto ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "rename x"));
  EXPECT_TRUE(Has(ev, "create y"));
  EXPECT_EQ((*w)->watched_dirs(), 2u);  // the root and y
  Touch(outside / "x" / "gone");
  Touch(dir_ / "in" / "y" / "here");
  ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "create y/here"));
  EXPECT_FALSE(Has(ev, "create x/gone"));
  fs::remove_all(outside);
}

TEST_F(DirWatchTest, TheWatchEndsWhenItsDirectoryIsRemoved) {
  fs::create_directory(dir_ / "w");
  auto w = DirWatch::Begin((dir_ / "w").string(), true);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  Touch(dir_ / "w" / "f");
  fs::remove_all(dir_ / "w");
  bool ended = false;
  auto ev = Drain(**w, &ended);
  EXPECT_TRUE(ended);
  EXPECT_TRUE(Has(ev, "create f"));
  EXPECT_TRUE(Has(ev, "remove f"));
}

TEST_F(DirWatchTest, RefusesWhatIsNotADirectory) {
  auto missing = DirWatch::Begin((dir_ / "nope").string(), false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kS211);
  Touch(dir_ / "file");
  auto file = DirWatch::Begin((dir_ / "file").string(), true);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code(), Code::kS212);
}

TEST_F(DirWatchTest, FollowsALinkToTheWatchedDirectoryButNoLinkBelowIt) {
  fs::create_directories(dir_ / "real" / "sub");
  fs::create_directory_symlink(dir_ / "real", dir_ / "link");
  fs::create_directory_symlink(dir_ / "real" / "sub", dir_ / "real" / "sublink");
  auto w = DirWatch::Begin((dir_ / "link").string(), true);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ((*w)->watched_dirs(), 2u);  // real and real/sub; the link below is not followed
  Touch(dir_ / "real" / "sub" / "f");
  auto ev = Drain(**w);
  EXPECT_TRUE(Has(ev, "create sub/f"));
  EXPECT_FALSE(Has(ev, "create sublink/f"));
}

TEST_F(DirWatchTest, LostEventsEndTheWatchWithS218) {
  auto w = DirWatch::Begin(dir_.string(), false);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  // More changes than the kernel queues for an unread watch (two files in
  // turn: the kernel merges an event identical to the one queued last).
  long max_events = 16384;
  if (std::ifstream f("/proc/sys/fs/inotify/max_queued_events"); f) f >> max_events;
  Touch(dir_ / "f0");
  Touch(dir_ / "f1");
  for (long i = 0; i <= max_events; ++i) ::chmod((dir_ / ("f" + std::to_string(i % 2))).c_str(), 0600);
  std::string lines;
  Result<bool> r = true;
  for (int i = 0; i < 100000 && r.ok() && *r; ++i) r = (*w)->Read(lines);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS218);
}

}  // namespace
}  // namespace skiff::agent
