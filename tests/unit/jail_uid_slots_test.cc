// The /etc/subuid parser and the uid slot allocator of the jail backend.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "isolation/jail/uid_slots.h"
#include "support/temp_dir.h"

namespace skiff::jail {
namespace {

TEST(SubidParser, ReadsRangesCommentsAndBlankLines) {
  auto r = ParseSubidFile("# reserved\n\nalice:100000:65536\n  bob:200000:10  \r\n#x:1:1\n", "/etc/subuid");
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], IdRange(100000, 165536));
  EXPECT_EQ((*r)[1], IdRange(200000, 200010));
  auto last = ParseSubidFile("carol:5:5", "/etc/subgid");  // no final newline
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0], IdRange(5, 10));
  auto empty = ParseSubidFile("", "/etc/subuid");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

void ExpectRejected(const std::string& text, const std::string& where, const std::string& why) {
  auto r = ParseSubidFile(text, "/etc/subuid");
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find(where), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
}

TEST(SubidParser, MalformedLinesAreErrorsNamingFileAndLine) {
  ExpectRejected("alice:1:1\nbob\n", "/etc/subuid:2", "malformed");
  ExpectRejected("alice:1\n", "/etc/subuid:1", "malformed");
  ExpectRejected("alice:1:2:3\n", "/etc/subuid:1", "malformed");
  ExpectRejected("# c\n:100000:65536\n", "/etc/subuid:2", "missing user");
  ExpectRejected("alice:x:1\n", "/etc/subuid:1", "first");
  ExpectRejected("alice::1\n", "/etc/subuid:1", "first");
  ExpectRejected("alice:-1:1\n", "/etc/subuid:1", "first");
  ExpectRejected("alice:1:\n", "/etc/subuid:1", "count");
  ExpectRejected("alice:1:0\n", "/etc/subuid:1", "count");
  ExpectRejected("alice:1:12abc\n", "/etc/subuid:1", "count");
  ExpectRejected("a:1:1\n\n\nalice:18446744073709551615:2\n", "/etc/subuid:4", "overflow");
}

class UidSlotsTest : public ::testing::Test {
 protected:
  testing_support::TempDir dir_{"uid-slots"};
};

TEST_F(UidSlotsTest, SkipsReservedRangesAndReusesReleasedSlots) {
  const uint32_t base = 0x20000000u;
  // Slot 0 overlaps a reserved range by one id.
  UidSlots slots(base, 3, {{base + kRangeSize - 1, base + kRangeSize}}, dir_.path());
  auto a = slots.Acquire();
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->slot, 1u);
  EXPECT_EQ(a->base, base + kRangeSize);
  EXPECT_TRUE(slots.HeldHere(1));
  struct stat st {};
  ASSERT_EQ(::stat(slots.LockPath(1).c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0);  // the in-use mark
  auto b = slots.Acquire();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->slot, 2u);
  auto c = slots.Acquire();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kS400);
  slots.Release(*a);
  EXPECT_FALSE(slots.HeldHere(1));
  ASSERT_EQ(::stat(slots.LockPath(1).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);  // mark cleared
  auto d = slots.Acquire();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->slot, 1u);
  slots.Release(*b);
  slots.Release(*d);
}

}  // namespace
}  // namespace skiff::jail
