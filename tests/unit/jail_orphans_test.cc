// The state directory a jail sandbox's liveness lock records, and what a
// cleanup accepts from it: the lock outlives a crashed skiff, so what it
// says is checked before anything is removed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/file_io.h"
#include "base/unique_fd.h"
#include "isolation/jail/orphans.h"
#include "support/temp_dir.h"

namespace skiff::jail {
namespace {

constexpr const char* kId = "0b6c9c3e-5a41-4d4e-9d36-0f5a1c2b3d4e";

class LiveLockRecordTest : public ::testing::Test {
 protected:
  // The lock as a crashed skiff might have left it.
  void Leave(const std::string& text) {
    UniqueFd fd(::open(lock_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    ASSERT_TRUE(WriteAll(fd.get(), text, "lock").ok());
  }
  testing_support::TempDir dir_{"live-lock"};
  std::string lock_ = LiveLockPath(dir_.path(), kId);
};

TEST_F(LiveLockRecordTest, TheRecordedStateDirectoryIsReadBack) {
  UniqueFd fd(::open(lock_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd);
  const std::string dir = std::string("/run/skiff-other/sandboxes/") + kId;
  ASSERT_TRUE(RecordStateDir(fd.get(), "/a/much/longer/path/than/the/next/one/sandboxes/x").ok());
  ASSERT_TRUE(RecordStateDir(fd.get(), dir).ok());  // replaces, not appends
  EXPECT_EQ(RecordedStateDir(lock_, kId), dir);
}

TEST_F(LiveLockRecordTest, ALockWithoutARecordNamesNothing) {
  EXPECT_EQ(RecordedStateDir(lock_, kId), "");  // no file
  Leave("");
  EXPECT_EQ(RecordedStateDir(lock_, kId), "");
}

TEST_F(LiveLockRecordTest, ARecordNamingAnythingButThatSandboxsStateIsIgnored) {
  const std::string id = kId;
  for (const std::string& bad : std::vector<std::string>{
           "/",                                         // the root
           "/etc",                                      // not a state directory
           "relative/sandboxes/" + id,                  // not absolute
           "/run/skiff/sandboxes/../../etc/" + id,      // climbs
           "/run/skiff/sandboxes/./" + id,              // not clean
           "/run/skiff/sandboxes/other-id",             // another sandbox's
           "/run/skiff/sandboxes/" + id + "/..",        // its parent
           "/run/skiff/sandboxes/" + id + "\n/etc",     // two lines
           "/run/skiff/not-sandboxes/" + id,            // not under sandboxes/
           "/sandboxes/" + id + "x",                    // a longer id
           "/run/skiff,upperdir=/etc/sandboxes/" + id,  // an overlay option
           std::string(5000, '/') + "sandboxes/" + id,  // too long to be one
       }) {
    Leave(bad);
    EXPECT_EQ(RecordedStateDir(lock_, id), "") << bad;
  }
  // An id that is not a name is never a path component.
  Leave("/run/skiff/sandboxes/..");
  EXPECT_EQ(RecordedStateDir(lock_, ".."), "");
}

TEST_F(LiveLockRecordTest, ALockThatIsASymlinkIsNotFollowed) {
  const std::string target = dir_ / "target";
  {
    UniqueFd fd(::open(target.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    ASSERT_TRUE(RecordStateDir(fd.get(), std::string("/run/skiff/sandboxes/") + kId).ok());
  }
  ASSERT_EQ(::symlink(target.c_str(), lock_.c_str()), 0);
  EXPECT_EQ(RecordedStateDir(lock_, kId), "");
}

}  // namespace
}  // namespace skiff::jail
